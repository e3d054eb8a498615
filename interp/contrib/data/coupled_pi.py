"""CoupledPI: coupled training of a deployable model with privileged information and unlabeled data.

Paper: *Coupled Training with Privileged Information and Unlabeled Data* (arXiv 2605.23268; code not
public). The deployable model f(x) = x·α sees only x; the rich model g(x, w) = [x, w]·β also sees the
privileged view w (available for training rows only). The two-step recipe (fit g on the labeled rows,
then distil f from g's pseudo-responses on unlabeled rows) fails when w is weak or noisy: f inherits
g's overfit. Coupled training fits both at once:

    f-step: α = argmin |y - Xα|²/n_l + λ |X_u α - Z_u β|²/n_u + ρ|α|²
    g-step: β = argmin |y - Zβ|²/n_l + κλ |Z_u β - X_u α|²/n_u + ρ|β|²

(Z = [X, W]; the subscript u marks the unlabeled rows.) Labeled rows constrain both fits; unlabeled
pairs feed f through g's pseudo-responses, and with κ > 0 pull g back towards what f can express
(κ = 1: one joint quadratic objective; κ = 0: g is the labeled ridge fit and f a λ-weighted blend of
labeled ridge, λ = 0, and two-step distillation, λ -> ∞). The coupling (λ, κ) is chosen by K-fold
cross-validation of f's labeled error over a grid that includes λ = 0 (plain ridge on x): f borrows
from g only as much as it helps. `fit_coupled` iterates the two ridge steps (the paper's alternating
solver) and `coupled_closed_form` solves their joint stationarity equations in one linear solve (the
reference the tests hold it to). The two-step form, κ and the CV rule are our reconstruction of the
abstract: the paper's exact objective is not public. (With κ = 1 alone a strong privileged view is
wasted: the coupling shrinks g's use of w, which f cannot copy; measured in the README.)

    f = fit_coupled(X_l, W_l, y_l, X_u, W_u, lam=1.0)      # -> CoupledFit(alpha, beta, lam)
    f = fit_coupled_cv(X_l, W_l, y_l, X_u, W_u)              # λ picked by CV
    f.predict(X_test)

The strong baselines (issue 42) tune the ridge penalty ρ as well, by the same 5-fold CV on the labeled rows
over one grid (`DEFAULT_RHOS`) for every estimator, so that no estimator wins by its penalty alone:

    f = fit_ridge_cv(X_l, y_l)                                        # labeled-only ridge, CV ρ
    f = fit_two_step_cv(X_l, W_l, y_l, X_u, W_u)                      # two-step, one CV ρ for both stages
    f = fit_coupled_cv(X_l, W_l, y_l, X_u, W_u, rhos=DEFAULT_RHOS)    # (λ, κ, ρ) by CV
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from interp.contrib.common.ridge import ridge

DEFAULT_LAMBDAS = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0)
DEFAULT_KAPPAS = (0.0, 1.0)
DEFAULT_RHOS = (1e-3, 1e-2, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
"""The penalty grid every CV'd estimator searches (ρ multiplies |α|² against the mean squared error)."""


@dataclass
class CoupledFit:
    alpha: Tensor
    """Weights of the deployable model f(x) = x·α (x-only) [d_x]."""
    beta: Tensor | None
    """Weights of the rich model g(x, w) = [x, w]·β [d_x + d_w]; None for a model without g."""
    lam: float
    """The coupling strength used."""
    kappa: float = 0.0
    """How much the coupling pulls g towards f (0: one-way, 1: the joint objective)."""
    rho: float = 1e-3
    """The ridge penalty on α (and β) used."""

    def predict(self, x: Tensor) -> Tensor:
        """f(x) for rows x [n, d_x]."""
        if x.ndim != 2 or x.shape[1] != self.alpha.shape[0]:
            raise ValueError(f"x must be [n, {self.alpha.shape[0]}]; got {tuple(x.shape)}")
        return x.double() @ self.alpha


def _check(
    x_l: Tensor, w_l: Tensor, y: Tensor, x_u: Tensor, w_u: Tensor, lam: float, ridge: float, kappa: float = 0.0
) -> None:
    if not 0.0 <= kappa <= 1.0:
        raise ValueError(f"kappa={kappa} must lie in [0, 1]")
    if x_l.ndim != 2 or w_l.ndim != 2 or x_u.ndim != 2 or w_u.ndim != 2 or y.ndim != 1:
        raise ValueError("x_l, w_l, x_u, w_u must be 2-D [rows, features] and y 1-D [rows]")
    if not (len(x_l) == len(w_l) == len(y)) or len(x_u) != len(w_u):
        raise ValueError(
            f"row counts differ: x_l {len(x_l)}, w_l {len(w_l)}, y {len(y)}; x_u {len(x_u)}, w_u {len(w_u)}"
        )
    if x_l.shape[1] != x_u.shape[1] or w_l.shape[1] != w_u.shape[1]:
        raise ValueError("labeled and unlabeled rows must have the same feature counts")
    if len(y) == 0:
        raise ValueError("no labeled rows: CoupledPI needs at least one (x, w, y)")
    if lam < 0 or ridge < 0:
        raise ValueError(f"lam={lam} and ridge={ridge} must be >= 0")
    if lam > 0 and len(x_u) == 0:
        raise ValueError("lam > 0 needs unlabeled rows (x_u, w_u); pass lam=0 for plain ridge")


def coupled_closed_form(x_l, w_l, y, x_u, w_u, lam: float, kappa: float = 0.0, rho: float = 1e-3) -> CoupledFit:
    """The fixed point of the f- and g-steps by one linear solve of their stationarity equations."""
    _check(x_l, w_l, y, x_u, w_u, lam, rho, kappa)
    x_l, w_l, y, x_u, w_u = (t.double() for t in (x_l, w_l, y, x_u, w_u))
    z_l, z_u = torch.cat([x_l, w_l], 1), torch.cat([x_u, w_u], 1)
    nl, nu, dx, dz = len(y), max(len(x_u), 1), x_l.shape[1], z_l.shape[1]
    a_aa = x_l.T @ x_l / nl + lam * x_u.T @ x_u / nu + rho * torch.eye(dx, dtype=torch.float64)
    a_bb = z_l.T @ z_l / nl + kappa * lam * z_u.T @ z_u / nu + rho * torch.eye(dz, dtype=torch.float64)
    a_ab = -lam * x_u.T @ z_u / nu
    lhs = torch.cat([torch.cat([a_aa, a_ab], 1), torch.cat([kappa * a_ab.T, a_bb], 1)], 0)
    rhs = torch.cat([x_l.T @ y / nl, z_l.T @ y / nl])
    sol = torch.linalg.solve(lhs, rhs)
    return CoupledFit(sol[:dx], sol[dx:], lam, kappa, rho)


def fit_coupled(
    x_l, w_l, y, x_u, w_u, lam: float, kappa: float = 0.0, rho: float = 1e-3, iters: int = 500, tol: float = 1e-12
) -> CoupledFit:
    """Alternating ridge updates: the f-step (ridge on labeled y plus λ-weighted pseudo-responses g(x_u)),
    then the g-step (labeled y plus κλ-weighted f(x_u)); converges to `coupled_closed_form`'s fixed point."""
    _check(x_l, w_l, y, x_u, w_u, lam, rho, kappa)
    if iters < 1:
        raise ValueError(f"iters={iters} must be >= 1")
    x_l, w_l, y, x_u, w_u = (t.double() for t in (x_l, w_l, y, x_u, w_u))
    z_l, z_u = torch.cat([x_l, w_l], 1), torch.cat([x_u, w_u], 1)
    nl, nu = len(y), max(len(x_u), 1)
    eye_x = torch.eye(x_l.shape[1], dtype=torch.float64)
    eye_z = torch.eye(z_l.shape[1], dtype=torch.float64)
    a_x = torch.linalg.inv(x_l.T @ x_l / nl + lam * x_u.T @ x_u / nu + rho * eye_x)
    a_z = torch.linalg.inv(z_l.T @ z_l / nl + kappa * lam * z_u.T @ z_u / nu + rho * eye_z)
    beta = ridge(z_l, y, rho, mean=True)
    alpha = a_x @ (x_l.T @ y / nl + lam * x_u.T @ (z_u @ beta) / nu)
    for _ in range(iters):
        beta = a_z @ (z_l.T @ y / nl + kappa * lam * z_u.T @ (x_u @ alpha) / nu)
        new = a_x @ (x_l.T @ y / nl + lam * x_u.T @ (z_u @ beta) / nu)
        done = float((new - alpha).norm()) <= tol * (1 + float(alpha.norm()))
        alpha = new
        if done:
            break
    return CoupledFit(alpha, beta, lam, kappa, rho)


def fit_two_step(x_l, w_l, y, x_u, w_u, rho: float = 1e-3) -> CoupledFit:
    """Baseline: g = ridge on labeled [x, w]; f = ridge of g's pseudo-responses on the unlabeled x."""
    _check(x_l, w_l, y, x_u, w_u, 1.0, rho)
    beta = ridge(torch.cat([x_l, w_l], 1).double(), y.double(), rho, mean=True)
    pseudo = torch.cat([x_u, w_u], 1).double() @ beta
    return CoupledFit(ridge(x_u.double(), pseudo, rho, mean=True), beta, float("nan"), rho=rho)


def _cv_folds(n: int, folds: int, seed: int) -> list[Tensor]:
    """The K held-out index sets every CV'd estimator here shares (same seed, same folds)."""
    if not 2 <= folds <= n:
        raise ValueError(f"folds={folds} must be between 2 and the number of labeled rows {n}")
    return list(torch.randperm(n, generator=torch.Generator().manual_seed(seed)).chunk(folds))


def _cv_pick(candidates, fit_alpha, x_l: Tensor, y: Tensor, folds: int, seed: int):
    """The candidate whose `fit_alpha(train_rows, candidate)` has the least K-fold squared error of f on the
    held-out labeled rows (the first of equals, so a grid's order breaks ties)."""
    parts, candidates = _cv_folds(len(y), folds, seed), list(candidates)
    best, best_err = candidates[0], float("inf")
    for cand in candidates:
        err = 0.0
        for k, held in enumerate(parts):
            train = torch.cat([p for j, p in enumerate(parts) if j != k])
            alpha = fit_alpha(train, cand)
            err += float(((x_l[held].double() @ alpha - y[held].double()) ** 2).sum())
        if err < best_err - 1e-12:
            best, best_err = cand, err
    return best


def _check_grid(name: str, grid) -> None:
    if not grid or min(grid) < 0:
        raise ValueError(f"{name} must be a non-empty grid of values >= 0; got {grid}")


def fit_ridge_cv(x_l, y, rhos=DEFAULT_RHOS, folds: int = 5, seed: int = 0) -> CoupledFit:
    """Strong baseline: labeled-only ridge f(x) = x·α with ρ chosen by K-fold CV (no w, no unlabeled rows)."""
    _check_grid("rhos", rhos)
    if x_l.ndim != 2 or y.ndim != 1 or len(x_l) != len(y):
        raise ValueError(f"x_l must be [n, d] and y [n]; got {tuple(x_l.shape)}, {tuple(y.shape)}")
    x, yy = x_l.double(), y.double()
    rho = _cv_pick(rhos, lambda tr, r: ridge(x[tr], yy[tr], r, mean=True), x, yy, folds, seed)
    return CoupledFit(ridge(x, yy, rho, mean=True), None, 0.0, rho=rho)


def fit_two_step_cv(x_l, w_l, y, x_u, w_u, rhos=DEFAULT_RHOS, folds: int = 5, seed: int = 0) -> CoupledFit:
    """`fit_two_step` with one ρ (both stages) chosen by K-fold CV of f's error on the labeled rows."""
    _check(x_l, w_l, y, x_u, w_u, 1.0, 0.0)
    _check_grid("rhos", rhos)

    def fit(train, r):
        return fit_two_step(x_l[train], w_l[train], y[train], x_u, w_u, r).alpha

    return fit_two_step(x_l, w_l, y, x_u, w_u, _cv_pick(rhos, fit, x_l, y, folds, seed))


def fit_coupled_cv(
    x_l,
    w_l,
    y,
    x_u,
    w_u,
    lambdas=DEFAULT_LAMBDAS,
    kappas=DEFAULT_KAPPAS,
    folds: int = 5,
    rho: float = 1e-3,
    seed: int = 0,
    rhos=None,
) -> CoupledFit:
    """`coupled_closed_form` with (λ, κ) chosen by K-fold CV of f's squared error on the labeled rows; with
    `rhos` a grid, ρ is chosen with them (else it is `rho`)."""
    _check(x_l, w_l, y, x_u, w_u, 0.0, rho)
    _check_grid("lambdas", lambdas)
    rhos = (rho,) if rhos is None else tuple(rhos)
    _check_grid("rhos", rhos)
    grid = [(lam, kappa, r) for lam in lambdas for kappa in (kappas if lam > 0 else (0.0,)) for r in rhos]

    def fit(train, cand):
        return coupled_closed_form(x_l[train], w_l[train], y[train], x_u, w_u, *cand).alpha

    return coupled_closed_form(x_l, w_l, y, x_u, w_u, *_cv_pick(grid, fit, x_l, y, folds, seed))
