import numpy as np
import pytest

from interp.contrib.causal_stats.causal_feature_learning import (
    CFL,
    cross_covariance,
    detection_rates,
    env_mean_covariance,
    loeo_ridge_penalty,
    pls_directions,
    rayleigh_quotient,
    within_env_ridge,
)
from interp.contrib.causal_stats.experiments.causal_feature_learning import BASELINE, main


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


def test_within_env_ridge_ignores_the_confounded_shift_and_cv_prefers_small_penalty_on_clean_data():
    # y = x0 plus an environment offset that also shifts x1: pooled OLS leans on x1, the within-environment
    # fit does not; at λ = 0 it is OLS on the centred rows; with little noise CV picks the smallest penalty
    rng = np.random.default_rng(2)
    env = np.repeat([0, 1, 2], 200)
    off = np.array([-3.0, 0.0, 3.0])[env]
    x = rng.normal(size=(600, 2))
    x[:, 1] += off
    y = (x[:, 0] + off + 0.01 * rng.normal(size=600))[:, None]
    b = within_env_ridge(x, y, env, 0.0)[:, 0]
    assert abs(b[0] - 1) < 0.01 and abs(b[1]) < 0.01
    pooled = np.linalg.lstsq(np.c_[x, np.ones(600)], y, rcond=None)[0][:2, 0]
    assert abs(pooled[1]) > 0.5
    lam, errs = loeo_ridge_penalty(x, y, env, (10.0, 1.0, 1e-3))
    assert lam == 1e-3 and errs[0] > errs[1] > errs[2]
    with pytest.raises(ValueError, match="environments"):
        loeo_ridge_penalty(x, y, np.zeros(600), (1.0,))


def test_quick_experiment_runs():
    out = main(["--quick"])
    assert "CFL λ=10" in out["synthetic_rank1"]
    assert out["synthetic_rank1"][BASELINE]["FDR"][0] > out["synthetic_rank1"]["PCA-T²"]["FDR"][0]
