import math

import pytest
import torch

from interp.contrib.data.source_screen import (
    cv_ridge_penalty,
    diversity_spectrum,
    greedy_order,
    mom_subspace,
    pilot_heads,
    ridge_pca_subspace,
    screen_sources,
    screening_score,
    sin_theta,
)


def test_sin_theta_closed_forms():
    e = torch.eye(3, dtype=torch.float64)
    assert sin_theta(e[:, :1], e[:, :1]) == pytest.approx(0.0, abs=1e-12)
    assert sin_theta(e[:, 1:2], e[:, :1]) == pytest.approx(1.0)
    tilt = torch.tensor([[math.cos(0.3)], [math.sin(0.3)], [0.0]], dtype=torch.float64)
    assert sin_theta(tilt, e[:, :1]) == pytest.approx(math.sin(0.3))
    # the span matters, not the basis
    assert sin_theta(
        e[:, :2] @ torch.tensor([[1.0, 1.0], [1.0, -1.0]], dtype=torch.float64), e[:, :2]
    ) == pytest.approx(0.0, abs=1e-12)


def test_mom_recovers_the_subspace_with_diverse_heads():
    g = torch.Generator().manual_seed(0)
    d, k = 8, 2
    b, _ = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))
    heads = torch.randn(60, k, generator=g, dtype=torch.float64)
    xs = [torch.randn(400, d, generator=g, dtype=torch.float64) for _ in heads]
    ys = [x @ (b @ h) for x, h in zip(xs, heads)]
    b_hat = mom_subspace(xs, ys, k)
    assert sin_theta(b_hat, b) < 0.15
    assert torch.allclose(pilot_heads(xs, ys, b), heads, atol=1e-6)  # noiseless y, true basis: exact heads


def test_mom_matrix_matches_a_brute_force_sum():
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(5, 3, generator=g, dtype=torch.float64) for _ in range(2)]
    ys = [torch.randn(5, generator=g, dtype=torch.float64) for _ in range(2)]
    m = sum(sum(y[i] ** 2 * torch.outer(x[i], x[i]) for i in range(5)) / 5 for x, y in zip(xs, ys)) / 2
    top = torch.linalg.eigh(m)[1][:, -1:]
    assert sin_theta(mom_subspace(xs, ys, 1), top) < 1e-9


def test_diversity_and_greedy_screening_prefer_spread_heads():
    # 6 copies of e1 and one each of e2, e3: greedy takes the three directions first
    heads = torch.tensor([[1.0, 0, 0]] * 6 + [[0, 1.0, 0], [0, 0, 1.0]], dtype=torch.float64)
    assert diversity_spectrum(heads).tolist() == pytest.approx([6 / 8, 1 / 8, 1 / 8])
    order = greedy_order(heads)
    assert set(order[:3]) == {0, 6, 7} or set(order[:3]) == {order[0], 6, 7}
    keep = screen_sources(heads, 3)
    assert keep == sorted(order[:3])  # one e1 source plus e2, e3: λ_3 = 1, noise sqrt(3) -> score 1/sqrt(3)
    assert screening_score(heads, keep, 3) == pytest.approx(1 / math.sqrt(3))
    assert screening_score(heads, list(range(8)), 3) == pytest.approx(1 / math.sqrt(8))
    assert len(screen_sources(heads, 3, frac=0.5)) == 4


def test_bad_input():
    x, y = torch.zeros(4, 3), torch.zeros(4)
    with pytest.raises(ValueError, match="one y per x"):
        mom_subspace([x], [], 1)
    with pytest.raises(ValueError, match="source 0"):
        mom_subspace([x], [torch.zeros(5)], 1)
    with pytest.raises(ValueError, match="k=4"):
        mom_subspace([x], [y], 4)
    with pytest.raises(ValueError, match="empty"):
        mom_subspace([x], [y], 1, subset=[])
    with pytest.raises(ValueError, match="frac"):
        screen_sources(torch.eye(3), 2, frac=0.0)
    with pytest.raises(ValueError, match="at least"):
        screen_sources(torch.eye(3), 3, min_sources=5)
    with pytest.raises(ValueError, match="same shape"):
        sin_theta(torch.zeros(3, 1), torch.zeros(3, 2))


def test_ridge_pca_baseline_recovers_the_subspace_and_cv_picks_a_sane_penalty():
    # noiseless, one head per axis direction: the stacked exact β_s = B θ_s span B exactly
    g = torch.Generator().manual_seed(0)
    d, k = 6, 2
    b, _ = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))
    heads = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]], dtype=torch.float64)
    xs = [torch.randn(40, d, generator=g, dtype=torch.float64) for _ in heads]
    ys = [x @ (b @ h) for x, h in zip(xs, heads)]
    assert sin_theta(ridge_pca_subspace(xs, ys, k, 1e-9), b) < 1e-6
    with pytest.raises(ValueError, match="at least k"):
        ridge_pca_subspace(xs, ys, k, 1.0, subset=[0])
    # noiseless data: CV prefers the smallest penalty; pure noise targets: the largest
    assert cv_ridge_penalty(xs, ys, [1e-6, 1.0, 1e4]) == 1e-6
    noise = [torch.randn(40, generator=g, dtype=torch.float64) for _ in heads]
    assert cv_ridge_penalty(xs, noise, [1e-6, 1.0, 1e4]) == 1e4
