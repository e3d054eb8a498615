"""SelfTrain: iterated ridge self-distillation, its denoising vs signal-forgetting trade-off, and iterated GCV.

Paper: *Why Self-Training Helps and Hurts: Denoising vs. Signal Forgetting* (arXiv 2602.14029; Wu, Yang,
Sun). The setting, as the catalog states it:

    β₀     = ridge(X₀, y)                      (y noisy labels of X₀)
    β_{t+1} = ridge(X_{t+1}, X_{t+1} β_t)      (fresh covariates, noiseless pseudo-labels)

with ridge(X, y) = (XᵀX/n + λI)⁻¹ Xᵀy/n. Each step multiplies the estimate by the ridge shrinkage
A_t = (Σ̂_t + λI)⁻¹ Σ̂_t of fresh covariates: noise in β₀ is shrunk away (denoising) while the signal is
shrunk too, weak eigendirections fastest (signal forgetting), so the test risk is U-shaped in t.

**Iterated GCV** (our reconstruction; the paper's estimator is not public): β_t = L_t y is a linear
smoother of the *original* labels, L_t = A_t ⋯ A_1 (X₀ᵀX₀/n + λI)⁻¹ X₀ᵀ/n, because the pseudo-labels
carry no new noise. Its in-sample smoother is S_t = X₀ L_t and

    GCV_t = (1/n) |y - S_t y|² / (1 - tr(S_t)/n)²

estimates the prediction risk σ² + (β_t - β*)ᵀΣ(β_t - β*) from training data only; t* = argmin_t GCV_t.
For t = 0 it is ridge's ordinary GCV (tested against the leave-one-out-free closed form).

    traj = self_train(X0, y, fresh=[X1, X2, ...], lam=0.02)      # traj.betas[t], traj.gcv[t]
    excess_risk(traj.betas[t], beta_star, cov)                      # (β - β*)ᵀ Σ (β - β*)

Features can be any rows, e.g. residual-stream rows read from an `ActivationStore` (self-distilled
linear probes: `experiments/self_training.py` runs one on SmolLM2's cache).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from interp.contrib.common.ridge import ridge_gram


def _check_rows(x: Tensor, name: str, d: int | None = None) -> None:
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty [n, d] matrix; got shape {tuple(x.shape)}")
    if d is not None and x.shape[1] != d:
        raise ValueError(f"{name} has {x.shape[1]} features but X0 has {d}; every covariate batch needs the same d")


def ridge_operator(x: Tensor, lam: float) -> Tensor:
    """(XᵀX/n + λI)⁻¹ Xᵀ/n: [d, n], so ridge(X, y) = ridge_operator(X, λ) @ y."""
    if lam <= 0:
        raise ValueError(f"the ridge penalty lam={lam} must be positive (λ > 0 keeps every step well posed)")
    return torch.linalg.solve(ridge_gram(x, lam, mean=True), x.T / len(x))


def ridge(x: Tensor, y: Tensor, lam: float) -> Tensor:
    """Ridge coefficients (XᵀX/n + λI)⁻¹ Xᵀy/n."""
    return ridge_operator(x, lam) @ y


def shrinkage(x: Tensor, lam: float) -> Tensor:
    """A = (Σ̂ + λI)⁻¹ Σ̂ of a covariate batch: β_{t+1} = A β_t when the labels are X β_t (noiseless)."""
    return ridge_operator(x, lam) @ x


@dataclass
class SelfTrainTrajectory:
    """The iterates β_0..β_T and the iterated-GCV risk estimate of each."""

    betas: list[Tensor]
    """β_t, t = 0..T ([d] each)."""
    gcv: list[float]
    """GCV_t (an estimate of the prediction risk σ² + excess risk, from X₀ and y only)."""
    dof: list[float]
    """tr(S_t): the smoother's effective degrees of freedom, shrinking along the trajectory."""

    @property
    def t_gcv(self) -> int:
        """The stopping time iterated GCV picks (argmin_t GCV_t)."""
        return int(torch.tensor(self.gcv).argmin())


def self_train(x0: Tensor, y: Tensor, fresh: Sequence[Tensor], lam: float) -> SelfTrainTrajectory:
    """Run β₀ = ridge(X₀, y), β_{t+1} = ridge(X_{t+1}, X_{t+1} β_t) over the batches `fresh` (T = len(fresh)).

    x0: [n, d] labelled covariates; y: [n] noisy labels; fresh: T unlabelled covariate batches [m, d].
    """
    _check_rows(x0, "X0")
    n, d = x0.shape
    if y.shape != (n,):
        raise ValueError(f"y must be [n] = [{n}] (one label per row of X0); got {tuple(y.shape)}")
    for i, xt in enumerate(fresh):
        _check_rows(xt, f"fresh[{i}]", d)
    x0, y = x0.double(), y.double()
    lin = ridge_operator(x0, lam)  # L_0: β_t = L_t y
    betas, gcv, dof = [], [], []
    for t in range(len(fresh) + 1):
        if t > 0:
            lin = shrinkage(fresh[t - 1].double(), lam) @ lin
        beta = lin @ y
        s = x0 @ lin
        tr = float(torch.trace(s))
        resid = y - s @ y
        betas.append(beta)
        dof.append(tr)
        gcv.append(float(resid @ resid / n) / (1 - tr / n) ** 2)
    return SelfTrainTrajectory(betas, gcv, dof)


def ridge_gcv_path(x0: Tensor, y: Tensor, lams: Sequence[float]) -> SelfTrainTrajectory:
    """The strong baseline (issue 42): plain ridge on the labelled rows over a grid of penalties, each with its
    ordinary GCV (the t = 0 formula of `self_train`); `.t_gcv` is the index of the penalty GCV picks. No fresh
    covariates are used."""
    _check_rows(x0, "X0")
    n = len(x0)
    if y.shape != (n,) or len(lams) == 0:
        raise ValueError(f"y must be [{n}] and lams non-empty; got {tuple(y.shape)}, {len(lams)} penalties")
    x0, y = x0.double(), y.double()
    betas, gcv, dof = [], [], []
    for lam in lams:
        lin = ridge_operator(x0, lam)
        s = x0 @ lin
        tr = float(torch.trace(s))
        resid = y - s @ y
        betas.append(lin @ y)
        dof.append(tr)
        gcv.append(float(resid @ resid / n) / (1 - tr / n) ** 2)
    return SelfTrainTrajectory(betas, gcv, dof)


def excess_risk(beta: Tensor, beta_star: Tensor, cov: Tensor) -> float:
    """(β - β*)ᵀ Σ (β - β*): the test risk above the noise floor for covariance Σ."""
    if beta.shape != beta_star.shape or cov.shape != (beta.numel(), beta.numel()):
        raise ValueError(f"shapes disagree: β {tuple(beta.shape)}, β* {tuple(beta_star.shape)}, Σ {tuple(cov.shape)}")
    e = (beta - beta_star).double()
    return float(e @ cov.double() @ e)


def spiked_covariance(d: int, n_spikes: int, spike: float, bulk: float) -> Tensor:
    """Diagonal Σ with `n_spikes` eigenvalues `spike` and the rest `bulk` (the catalog's demo)."""
    if not 0 <= n_spikes <= d or spike <= 0 or bulk <= 0:
        raise ValueError(f"need 0 <= n_spikes <= d and positive eigenvalues; got {n_spikes}, {d}, {spike}, {bulk}")
    ev = torch.full((d,), float(bulk), dtype=torch.float64)
    ev[:n_spikes] = spike
    return torch.diag(ev)


def direction_retention(
    traj: SelfTrainTrajectory, cov: Tensor, beta_star: Tensor, n_spikes: int
) -> tuple[float, float]:
    """How much of β* the last iterate keeps along strong (spiked) vs weak eigendirections of a diagonal Σ:
    (|β_T[strong]|·|β*[strong]| projection ratio, same for weak). Signal forgetting hits the weak ones first."""
    b = traj.betas[-1]
    s, w = slice(0, n_spikes), slice(n_spikes, None)

    def ratio(sl):
        den = float(beta_star[sl] @ beta_star[sl])
        return float(b[sl] @ beta_star[sl]) / den if den > 0 else float("nan")

    return ratio(s), ratio(w)
