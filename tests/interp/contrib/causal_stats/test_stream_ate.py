import math

import numpy as np
import pytest

from interp.contrib.causal_stats.experiments.stream_ate import main
from interp.contrib.causal_stats.stream_ate import (
    HalvingCoreset,
    RandomFourier,
    StreamATE,
    balance_weights,
    halve,
    project_simplex,
)


def test_random_fourier_approximates_the_gaussian_kernel():
    rff = RandomFourier(2, 4000, lengthscale=1.5, seed=0)
    a, b = np.array([[0.0, 0.0]]), np.array([[1.0, 1.0]])
    assert float((rff(a) @ rff(b).T)[0, 0]) == pytest.approx(math.exp(-2 / (2 * 1.5**2)), abs=0.03)


def test_halve_hand_case_and_discrepancy():
    phi = np.array([[1.0, 0], [0, 1], [1.0, 0], [0, 1]])
    # first pair: s = 0 -> keep row 0 (s = d = (1, -1)); second pair: s·d = 2 > 0 -> keep row 3
    assert halve(phi).tolist() == [0, 3]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 16))
    keep = halve(x)
    walk = np.abs(x[keep].mean(0) - x.mean(0)).max()
    rand = np.abs(x[rng.permutation(512)[:256]].mean(0) - x.mean(0)).max()
    assert walk < rand  # the balancing walk keeps the mean better than a random half


def test_coreset_levels_and_multiplicities():
    c = HalvingCoreset(block=4)
    for i in range(16):
        c.add(np.array([float(i)]), float(i))
    phi, y, mult = c.rows()
    assert mult.sum() == 16  # every unit is represented once
    assert len(phi) == 4 and set(mult.tolist()) == {4.0}  # 16 rows -> one level-2 block of 4
    assert c.max_rows <= 4 * 3


def test_project_simplex_and_balance_exact():
    np.testing.assert_allclose(project_simplex(np.array([0.5, 0.5])), [0.5, 0.5])
    np.testing.assert_allclose(project_simplex(np.array([2.0, 0.0])), [1.0, 0.0])
    np.testing.assert_allclose(project_simplex(np.array([0.3, 0.1, -1.0])), [0.6, 0.4, 0.0])
    phi = np.eye(3)
    target = np.array([0.2, 0.3, 0.5])  # reachable exactly: w = target
    np.testing.assert_allclose(balance_weights(phi, target, alpha=0.0, iters=2000), target, atol=1e-6)


def test_streamate_recovers_a_constant_effect_under_confounding():
    rng = np.random.default_rng(1)
    n = 6000
    x = rng.normal(size=(n, 2))
    t = (rng.uniform(size=n) < 1 / (1 + np.exp(-1.5 * x[:, 0]))).astype(int)
    y = 2 * x[:, 0] + 1.0 * t + 0.1 * rng.normal(size=n)
    est = StreamATE(d_in=2, n_features=128, block=64, lengthscale=1.5, seed=0)
    est.update_many(x, t, y)
    naive = y[t == 1].mean() - y[t == 0].mean()
    assert abs(naive - 1.0) > 1.0
    assert abs(est.estimate() - 1.0) < 0.3


def test_bad_input():
    with pytest.raises(ValueError, match="even"):
        HalvingCoreset(block=3)
    with pytest.raises(ValueError, match="even number of rows"):
        halve(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="empty"):
        HalvingCoreset(4).rows()
    with pytest.raises(ValueError, match="treatment"):
        StreamATE(2).update(np.zeros(2), 2, 1.0)
    with pytest.raises(ValueError, match="columns"):
        RandomFourier(3, 8, 1.0)(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="alpha"):
        balance_weights(np.eye(2), np.zeros(2), alpha=-1.0)


def test_quick_experiment_runs():
    out = main(["--quick"])
    assert "StreamATE" in out[0]
