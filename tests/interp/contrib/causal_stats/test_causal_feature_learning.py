import numpy as np
import pytest

from interp.contrib.causal_stats.causal_feature_learning import (
    CFL,
    cross_covariance,
    detection_rates,
    env_mean_covariance,
    pls_directions,
    rayleigh_quotient,
)
from interp.contrib.causal_stats.experiments.causal_feature_learning import main


def test_env_mean_covariance_hand_computed():
    x = np.array([[1.0, 5], [1, -5], [-1, 2], [-1, -2]])  # env 0 mean (1, 0), env 1 mean (-1, 0)
    np.testing.assert_allclose(env_mean_covariance(x, np.array([0, 0, 1, 1])), [[1.0, 0], [0, 0]])


def test_one_target_closed_form_and_maximum():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4)) @ rng.normal(size=(4, 4))
    y = x @ np.array([1.0, -2, 0, 0.5]) + rng.normal(size=300)
    env = np.repeat([0, 1, 2], 100)
    x[env == 1] += np.array([3.0, 0, 1, 0])
    lam = 5.0
    m = CFL.fit(x, y[:, None], env, 1, lam=lam, ridge=0.0)
    # rank-one numerator: the top direction is N⁻¹ C_xy with N = Σ_x + λ Σ_μ
    n = np.cov(x.T) + lam * env_mean_covariance(x, env)
    ref = np.linalg.solve(n, cross_covariance(x, y[:, None]))[:, 0]
    cos = abs(m.w[:, 0] @ ref) / np.linalg.norm(ref)
    assert cos == pytest.approx(1.0, abs=1e-8)
    best = rayleigh_quotient(m.w[:, 0], x, y[:, None], env, lam)
    for _ in range(20):
        assert rayleigh_quotient(rng.normal(size=4), x, y[:, None], env, lam) <= best + 1e-9


def test_penalty_removes_the_shifted_direction():
    # y depends on x0 and x1; environments shift the mean of x1 only. Large λ -> w ≈ e0.
    rng = np.random.default_rng(1)
    x = rng.normal(size=(600, 3))
    env = np.repeat([0, 1, 2], 200)
    y = x[:, 0] + x[:, 1] + 0.1 * rng.normal(size=600)
    x[:, 1] += np.array([-4.0, 0.0, 4.0])[env]
    w0 = CFL.fit(x, y[:, None], env, 1, lam=0.0).w[:, 0]
    w = CFL.fit(x, y[:, None], env, 1, lam=1000.0).w[:, 0]
    assert abs(w[1]) < 0.05 and abs(w[0]) > 0.95
    assert abs(w0[1]) > abs(w[1])
    assert pls_directions(x, y[:, None], 1).shape == (3, 1)


def test_t2_and_rates_hand_computed():
    x = np.array([[1.0, 0], [-1, 0], [0, 1], [0, -1]])  # feature covariance diag(2/3, 2/3)
    m = CFL.from_directions(np.eye(2), x)
    np.testing.assert_allclose(m.t2(np.array([[1.0, 1.0]])), [3.0])
    assert detection_rates(np.array([0.5, 2.0]), np.array([3.0, 0.1, 5.0, 6.0]), 1.0) == (0.5, 0.75)


def test_bad_input():
    x = np.zeros((10, 3))
    with pytest.raises(ValueError, match="Y must be"):
        CFL.fit(x, np.zeros(10), np.zeros(10), 1)
    with pytest.raises(ValueError, match="env must"):
        CFL.fit(x, np.zeros((10, 1)), np.zeros(9), 1)
    with pytest.raises(ValueError, match="at least 2 environments"):
        CFL.fit(np.random.default_rng(0).normal(size=(10, 3)), np.ones((10, 1)), np.zeros(10), 1, lam=1.0)
    with pytest.raises(ValueError, match="n_components"):
        CFL.fit(x, np.zeros((10, 1)), np.arange(10) % 2, 4)
    with pytest.raises(ValueError, match="lam"):
        CFL.fit(x, np.zeros((10, 1)), np.arange(10) % 2, 1, lam=-1)


def test_quick_experiment_runs():
    out = main(["--quick"])
    assert "CFL λ=10" in out["synthetic_rank1"]
