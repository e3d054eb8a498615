import pytest
import torch

from interp.contrib.common.ridge import ridge
from interp.contrib.data.coupled_pi import (
    DEFAULT_RHOS,
    coupled_closed_form,
    fit_coupled,
    fit_coupled_cv,
    fit_ridge_cv,
    fit_two_step,
    fit_two_step_cv,
)
from interp.contrib.data.experiments.coupled_pi import STRONG, strong_fits


def _data(seed=0, nl=30, nu=200, dx=4, dw=3, cw=2.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(nl + nu, dx, generator=g, dtype=torch.float64)
    w = torch.randn(nl + nu, dw, generator=g, dtype=torch.float64)
    y = (
        x @ torch.arange(1.0, dx + 1, dtype=torch.float64)
        + cw * w[:, 0]
        + 0.1 * torch.randn(nl + nu, generator=g, dtype=torch.float64)
    )
    return x[:nl], w[:nl], y[:nl], x[nl:], w[nl:]


def test_hand_computed_ridge_case():
    # x = (1, 2), y = (1, 2), no ridge, no coupling: alpha = 1 exactly
    xl, yl = torch.tensor([[1.0], [2.0]]), torch.tensor([1.0, 2.0])
    fit = coupled_closed_form(
        xl, torch.tensor([[1.0], [0.0]]), yl, torch.zeros(0, 1), torch.zeros(0, 1), lam=0.0, rho=0.0
    )
    assert fit.alpha.item() == pytest.approx(1.0, abs=1e-12)
    # ridge: (xᵀx/n + ρ)⁻¹ xᵀy/n = (2.5 / (2.5 + 0.5))
    assert ridge(xl, yl, 0.5, mean=True).item() == pytest.approx(2.5 / 3.0)


@pytest.mark.parametrize("kappa", [0.0, 0.5, 1.0])
def test_alternating_solver_reaches_closed_form(kappa):
    xl, wl, yl, xu, wu = _data()
    a = fit_coupled(xl, wl, yl, xu, wu, lam=2.0, kappa=kappa, iters=2000)
    b = coupled_closed_form(xl, wl, yl, xu, wu, lam=2.0, kappa=kappa)
    assert torch.allclose(a.alpha, b.alpha, atol=1e-8) and torch.allclose(a.beta, b.beta, atol=1e-8)


def test_limits_lambda_zero_is_ridge_and_large_lambda_is_two_step():
    xl, wl, yl, xu, wu = _data()
    assert torch.allclose(
        coupled_closed_form(xl, wl, yl, xu, wu, 0.0).alpha, ridge(xl, yl, 1e-3, mean=True), atol=1e-10
    )
    far = coupled_closed_form(xl, wl, yl, xu, wu, 1e6, kappa=0.0, rho=0.0).alpha
    assert torch.allclose(far, fit_two_step(xl, wl, yl, xu, wu, rho=0.0).alpha, atol=1e-4)


def test_joint_objective_is_minimised_at_kappa_one():
    xl, wl, yl, xu, wu = _data(1)
    fit = coupled_closed_form(xl, wl, yl, xu, wu, lam=1.5, kappa=1.0, rho=1e-3)

    def loss(al, be):
        zl, zu = torch.cat([xl, wl], 1), torch.cat([xu, wu], 1)
        return (
            ((yl - xl @ al) ** 2).mean()
            + ((yl - zl @ be) ** 2).mean()
            + 1.5 * ((zu @ be - xu @ al) ** 2).mean()
            + 1e-3 * (al.pow(2).sum() + be.pow(2).sum())
        )

    base = loss(fit.alpha, fit.beta)
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        assert (
            loss(
                fit.alpha + 1e-3 * torch.randn(4, generator=g, dtype=torch.float64),
                fit.beta + 1e-3 * torch.randn(7, generator=g, dtype=torch.float64),
            )
            > base
        )


def test_cv_uses_a_strong_privileged_view_and_predicts():
    xl, wl, yl, xu, wu = _data(2, nl=40, cw=6.0)
    fit = fit_coupled_cv(xl, wl, yl, xu, wu, folds=5)
    assert fit.lam > 0
    assert fit.predict(xu).shape == (len(xu),)


def test_strong_baseline_cv_picks_from_the_grid_and_beats_an_absurd_penalty():
    # noisy labels, few rows: the CV'd ridge must pick a grid penalty and land far closer to the truth than a
    # huge penalty (which shrinks α to 0) or the near-zero one the paper's fits use
    g = torch.Generator().manual_seed(3)
    a = torch.randn(10, generator=g, dtype=torch.float64) / 10**0.5
    x = torch.randn(30, 10, generator=g, dtype=torch.float64)
    y = x @ a + 2.0 * torch.randn(30, generator=g, dtype=torch.float64)
    fit = fit_ridge_cv(x, y)
    assert fit.rho in DEFAULT_RHOS and fit.beta is None
    err = float((fit.alpha - a).pow(2).sum())
    assert err < float((ridge(x, y, 1e4, mean=True) - a).pow(2).sum())
    assert err < float((ridge(x, y, 1e-3, mean=True) - a).pow(2).sum())
    # with every penalty CV'd on the same folds, each estimator picks from the same grid
    xl, wl, yl, xu, wu = _data(4, nl=25, nu=100)
    assert fit_two_step_cv(xl, wl, yl, xu, wu).rho in DEFAULT_RHOS
    assert fit_coupled_cv(xl, wl, yl, xu, wu, rhos=DEFAULT_RHOS).rho in DEFAULT_RHOS
    # a one-point grid is the fixed-penalty fit
    fixed = fit_coupled_cv(xl, wl, yl, xu, wu, rhos=(1e-3,))
    assert torch.allclose(fixed.alpha, fit_coupled_cv(xl, wl, yl, xu, wu).alpha)


def test_strong_fits_row_uses_the_privileged_view_when_it_is_strong():
    # tiny version of the experiment's strong-baseline row: with w carrying most of y, the CV'd two-step and
    # coupled fits beat the CV'd labeled-only ridge
    xl, wl, yl, xu, wu = _data(5, nl=40, nu=300, cw=6.0)
    fits = strong_fits(xl, wl, yl, xu, wu, seed=0)
    a = torch.arange(1.0, 5, dtype=torch.float64)
    err = {k: float((al - a).pow(2).sum()) for k, al in fits.items()}
    assert set(err) == set(STRONG)
    assert err[STRONG[1]] < err[STRONG[0]] and err[STRONG[2]] < err[STRONG[0]]


def test_bad_input():
    xl, wl, yl, xu, wu = _data()
    with pytest.raises(ValueError, match="row counts"):
        fit_coupled(xl, wl[:-1], yl, xu, wu, 1.0)
    with pytest.raises(ValueError, match=">= 0"):
        coupled_closed_form(xl, wl, yl, xu, wu, -1.0)
    with pytest.raises(ValueError, match="kappa"):
        coupled_closed_form(xl, wl, yl, xu, wu, 1.0, kappa=2.0)
    with pytest.raises(ValueError, match="no labeled rows"):
        coupled_closed_form(xl[:0], wl[:0], yl[:0], xu, wu, 1.0)
    with pytest.raises(ValueError, match="unlabeled rows"):
        coupled_closed_form(xl, wl, yl, xu[:0], wu[:0], 1.0)
    with pytest.raises(ValueError, match="folds"):
        fit_coupled_cv(xl, wl, yl, xu, wu, folds=1)
    with pytest.raises(ValueError, match="rhos"):
        fit_ridge_cv(xl, yl, rhos=())
    with pytest.raises(ValueError, match=r"\[n, 4\]"):
        fit_two_step(xl, wl, yl, xu, wu).predict(torch.zeros(3, 5))
