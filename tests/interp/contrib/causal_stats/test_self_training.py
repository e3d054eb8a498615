import pytest
import torch

from interp.contrib.causal_stats.experiments.self_training import main
from interp.contrib.causal_stats.self_training import (
    excess_risk,
    ridge,
    ridge_gcv_path,
    self_train,
    shrinkage,
    spiked_covariance,
)


def test_shrinkage_exact_on_orthogonal_design():
    # X = sqrt(n) diag(a) stacked: XᵀX/n = diag(a²), so A = diag(a² / (a² + λ)).
    a = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    x = 3**0.5 * torch.diag(a)  # n = 3 rows
    lam = 0.25
    torch.testing.assert_close(shrinkage(x, lam), torch.diag(a**2 / (a**2 + lam)))


def test_trajectory_matches_explicit_loop_and_ridge_gcv():
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(20, 5, generator=g, dtype=torch.float64)
    y = torch.randn(20, generator=g, dtype=torch.float64)
    fresh = [torch.randn(15, 5, generator=g, dtype=torch.float64) for _ in range(3)]
    traj = self_train(x0, y, fresh, lam=0.3)
    b = ridge(x0, y, 0.3)
    torch.testing.assert_close(traj.betas[0], b)
    for t, xt in enumerate(fresh, start=1):
        b = ridge(xt, xt @ b, 0.3)  # pseudo-labels from the previous iterate, no noise
        torch.testing.assert_close(traj.betas[t], b)
    # t = 0: ordinary ridge GCV with the hat matrix H = X (XᵀX + nλI)⁻¹ Xᵀ
    h = x0 @ torch.linalg.solve(x0.T @ x0 + 20 * 0.3 * torch.eye(5, dtype=torch.float64), x0.T)
    r = y - h @ y
    assert traj.gcv[0] == pytest.approx(float(r @ r / 20) / (1 - float(torch.trace(h)) / 20) ** 2)
    assert traj.dof[0] > traj.dof[1] > traj.dof[2] > traj.dof[3]  # every step shrinks


def test_ridge_gcv_baseline_matches_self_train_gcv_and_picks_a_large_penalty_for_noisy_labels():
    # the strong baseline's path: at λ its GCV equals self_train's t = 0 GCV; with pure-noise labels GCV picks
    # a large penalty (not the two smallest), with half the risk of the smallest or less
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(60, 10, generator=g, dtype=torch.float64)
    y = torch.randn(60, generator=g, dtype=torch.float64)
    lams = (0.01, 0.1, 1.0, 10.0, 100.0)
    path = ridge_gcv_path(x0, y, lams)
    assert path.gcv[0] == pytest.approx(self_train(x0, y, [], 0.01).gcv[0])
    torch.testing.assert_close(path.betas[2], ridge(x0, y, 1.0))
    assert lams[path.t_gcv] >= 1.0 and path.dof == sorted(path.dof, reverse=True)
    zero = torch.zeros(10, dtype=torch.float64)
    cov = torch.eye(10, dtype=torch.float64)
    assert excess_risk(path.betas[path.t_gcv], zero, cov) < 0.5 * excess_risk(path.betas[0], zero, cov)
    with pytest.raises(ValueError, match="lams"):
        ridge_gcv_path(x0, y, ())


def test_weak_directions_forgotten_first_and_risk_limit():
    cov = spiked_covariance(6, 2, 10.0, 0.5)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(400, 6, generator=g, dtype=torch.float64) * cov.diag().sqrt() for _ in range(60)]
    beta = torch.ones(6, dtype=torch.float64)
    traj = self_train(xs[0], xs[0] @ beta, xs[1:], lam=0.05)
    last = traj.betas[-1]
    # per step ~ e/(e+λ): strong (10/10.05)^59 ≈ 0.75 kept, weak (0.5/0.55)^59 ≈ 0.004 forgotten
    assert last[:2].min() > 0.6 and last[2:].abs().max() < 0.05
    assert excess_risk(torch.zeros(6, dtype=torch.float64), beta, cov) == pytest.approx(2 * 10 + 4 * 0.5)


def test_bad_input():
    x = torch.randn(5, 3)
    with pytest.raises(ValueError, match="lam"):
        self_train(x, torch.randn(5), [], lam=0.0)
    with pytest.raises(ValueError, match="y must be"):
        self_train(x, torch.randn(4), [], lam=0.1)
    with pytest.raises(ValueError, match="fresh\\[0\\] has 2 features"):
        self_train(x, torch.randn(5), [torch.randn(5, 2)], lam=0.1)
    with pytest.raises(ValueError, match="non-empty"):
        self_train(torch.zeros(0, 3), torch.zeros(0), [], lam=0.1)


def test_quick_experiment_runs():
    out = main(["--quick"])
    assert len(out["synthetic"][0]["risk"]) == 13
