import itertools
import math

import pytest
import torch

from interp.contrib.generative.trdi import (
    NoiseSchedule,
    best_path,
    ddim_jump,
    invert,
    jump_costs,
    path_cost,
    reconstruct,
)


def const_eps(c):
    return lambda x, t: c.expand_as(x)


def test_schedule_closed_form():
    s = NoiseSchedule(3, 0.1, 0.3)
    assert s.abar.tolist() == pytest.approx([0.9, 0.9 * 0.8, 0.9 * 0.8 * 0.7])


def test_hand_computed_jump():
    s = NoiseSchedule(3, 0.1, 0.3)
    x = torch.tensor([[1.0]], dtype=torch.float64)
    eps = torch.tensor([[0.5]], dtype=torch.float64)
    a0, a2 = 0.9, 0.504
    x0 = (1.0 - math.sqrt(1 - a0) * 0.5) / math.sqrt(a0)
    expected = math.sqrt(a2) * x0 + math.sqrt(1 - a2) * 0.5
    assert ddim_jump(const_eps(eps), s, x, 0, 2).item() == pytest.approx(expected, abs=1e-12)


def test_inversion_is_exact_when_epsilon_does_not_depend_on_x_or_t():
    s = NoiseSchedule(100)
    c = torch.randn(1, 5, dtype=torch.float64)
    x = torch.randn(4, 5, dtype=torch.float64)
    path = [0, 10, 40, 99]
    assert torch.allclose(reconstruct(const_eps(c), s, invert(const_eps(c), s, x, path), path), x, atol=1e-10)
    states = torch.stack([x] * 3)
    C = jump_costs(const_eps(c), s, states, [0, 10, 40])
    assert torch.allclose(
        C[torch.triu(torch.ones(3, 3, dtype=torch.bool), 1)], torch.zeros(3, dtype=torch.float64), atol=1e-18
    )


def test_round_trip_deviation_is_positive_for_an_x_dependent_model():
    s = NoiseSchedule(100)
    model = lambda x, t: torch.tanh(x) * (1 + t.double().unsqueeze(1) / 100)  # noqa: E731
    C = jump_costs(model, s, torch.randn(3, 8, 2, dtype=torch.float64), [0, 50, 99])
    assert (C[0, 1] > 0) and (C[0, 2] > 0) and math.isinf(C[1, 0])


def test_dp_matches_brute_force():
    g = torch.Generator().manual_seed(0)
    N = 7
    C = torch.rand(N, N, generator=g, dtype=torch.float64)
    C[torch.tril(torch.ones(N, N, dtype=torch.bool))] = math.inf
    for K in (1, 2, 3, 6):
        best = min(path_cost(C, [0, *mid, N - 1]) for mid in itertools.combinations(range(1, N - 1), K - 1))
        path = best_path(C, K)
        assert len(path) == K + 1 and path[0] == 0 and path[-1] == N - 1
        assert path_cost(C, path) == pytest.approx(best)


def test_bad_inputs():
    with pytest.raises(ValueError):
        NoiseSchedule(1)
    s = NoiseSchedule(10)
    with pytest.raises(ValueError, match="strictly increasing"):
        invert(const_eps(torch.zeros(1, 2)), s, torch.zeros(1, 2), [0, 5, 5])
    with pytest.raises(ValueError, match="strictly increasing"):
        invert(const_eps(torch.zeros(1, 2)), s, torch.zeros(1, 2), [0, 10])
    with pytest.raises(ValueError, match="K must be"):
        best_path(torch.zeros(3, 3), 3)
    with pytest.raises(ValueError, match="states"):
        jump_costs(const_eps(torch.zeros(1, 2)), s, torch.zeros(2, 1, 2), [0, 3, 6])


def test_beta_warp_baseline_grid():
    from interp.contrib.generative.experiments.trdi import beta_warped, stretched

    # a = b = 1 is the uniform grid (up to rounding), b = 1 the power warp t = 999 (k/K)^a
    assert beta_warped(4, 1.0, 1.0, 1000) == [0, 250, 500, 749, 999]
    assert beta_warped(5, 2.0, 1.0, 1000) == stretched(5, 2.0, 1000)
    # a = b > 1: symmetric, short jumps at both ends, long ones in the middle
    t = beta_warped(10, 2.0, 2.0, 1000)
    jumps = [b - a for a, b in zip(t, t[1:])]
    assert jumps[0] < jumps[5] and jumps[-1] < jumps[5] and abs(jumps[0] - jumps[-1]) <= 1
    # steep warps stay strictly increasing inside [0, T - 1]
    t = beta_warped(20, 3.0, 3.0, 1000)
    assert t[0] == 0 and t[-1] == 999 and all(a < b for a, b in zip(t, t[1:]))
    with pytest.raises(ValueError, match="too many"):
        beta_warped(1000, 1.0, 1.0, 1000)
