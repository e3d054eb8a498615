"""SourceScreen: pick which sources to pool when estimating a shared feature extractor.

Paper: *On the Power of Source Screening for Learning Shared Feature Extractors* (arXiv 2602.16125;
Wang, McLaughlin, Su; no public code). Each source s has y = <B θ_s, x> + ε with a shared B [d, k]
(orthonormal columns) and its own head θ_s [k]. The method-of-moments estimate of span(B) is the top-k
eigenvectors of M = mean_s mean_i y² x xᵀ; for Gaussian x, E[y² x xᵀ] = (|Bθ|² + σ²) I + 2 B θθᵀ Bᵀ,
so its eigengap is 2 λ_k(D_S) with the "diversity matrix" D_S = mean_{s∈S} θ_s θ_sᵀ. Pooling every
source averages in the sources whose heads all point the same way, which shrinks λ_k(D_S); a subset
with near-uniform head spectrum can estimate B better from less data.

Screening (our reconstruction of the selection rule; the paper proves minimax optimality of *some*
subset, the greedy rule here is ours): order sources greedily by D-optimal design on noise-weighted
heads (each step adds the head with the largest log det gain), then keep the prefix that maximises the
Davis-Kahan proxy λ_k(Σ_S θθᵀ) / sqrt(Σ_S (|θ_s|² + σ²)²) (pooled eigengap over the sampling noise the
sources bring: a source's moment noise grows with its head norm), or a fixed fraction. Genie-aided screening uses the
true heads; empirical screening uses heads from a pilot
fit (full-pool B̂, then per-source least squares).

Strong baseline (issue 42): `ridge_pca_subspace`, the standard multi-task estimate: per-source ridge regression
vectors β̂_s [d], stacked, and the top-k left singular vectors of the stack; the penalty by `cv_ridge_penalty`
(K-fold CV of the held-out squared error, summed over all sources, one grid).

    B_hat = mom_subspace(xs, ys, k)                 # lists of [n_s, d] and [n_s]
    keep = screen_sources(heads, k)                 # indices of the kept sources
    sin_theta(B_hat, B)                             # subspace error (0 = exact)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from interp.contrib.common.ridge import ridge as ridge_weights


def _check_sources(xs: Sequence[Tensor], ys: Sequence[Tensor]) -> int:
    if len(xs) == 0 or len(xs) != len(ys):
        raise ValueError(f"need one y per x source and at least one source; got {len(xs)} x and {len(ys)} y")
    d = xs[0].shape[-1]
    for s, (x, y) in enumerate(zip(xs, ys)):
        if x.ndim != 2 or y.ndim != 1 or len(x) != len(y) or x.shape[1] != d or len(x) == 0:
            raise ValueError(
                f"source {s}: x must be [n_s, {d}] and y [n_s] with n_s >= 1; got {tuple(x.shape)} and {tuple(y.shape)}"
            )
    return d


def mom_subspace(xs: Sequence[Tensor], ys: Sequence[Tensor], k: int, subset: Sequence[int] | None = None) -> Tensor:
    """Top-k eigenvectors [d, k] of M = mean over sources (in `subset`) of mean_i y² x xᵀ."""
    d = _check_sources(xs, ys)
    if not 1 <= k <= d:
        raise ValueError(f"k={k} must be between 1 and d={d}")
    idx = list(range(len(xs))) if subset is None else list(subset)
    if not idx:
        raise ValueError("the subset of sources is empty")
    m = torch.zeros(d, d, dtype=torch.float64)
    for s in idx:
        x, y = xs[s].double(), ys[s].double()
        m += (x * y.pow(2).unsqueeze(1)).T @ x / len(y)
    _, vecs = torch.linalg.eigh(m / len(idx))
    return vecs[:, -k:].flip(1)


def sin_theta(b_hat: Tensor, b: Tensor) -> float:
    """Largest principal-angle sine between span(b_hat) and span(b) (both [d, k], orthonormalised here)."""
    if b_hat.shape != b.shape or b.ndim != 2:
        raise ValueError(f"both bases must be [d, k] of the same shape; got {tuple(b_hat.shape)} and {tuple(b.shape)}")
    q1, _ = torch.linalg.qr(b_hat.double())
    q2, _ = torch.linalg.qr(b.double())
    resid = q1 - q2 @ (q2.T @ q1)
    return float(torch.linalg.matrix_norm(resid, ord=2).clamp(0, 1))


def diversity_spectrum(heads: Tensor, subset: Sequence[int] | None = None) -> Tensor:
    """Eigenvalues (descending) of D_S = mean_{s in S} θ_s θ_sᵀ; heads [n_sources, k]."""
    h = heads.double() if subset is None else heads.double()[list(subset)]
    if h.ndim != 2 or len(h) == 0:
        raise ValueError("heads must be a non-empty [n_sources, k] matrix")
    return torch.linalg.eigvalsh(h.T @ h / len(h)).flip(0)


def greedy_order(heads: Tensor, eps: float = 1e-3, noise_var: float = 0.0) -> list[int]:
    """Sources in D-optimal greedy order: each step adds the head with the largest log det(Σ_S + εI) gain,
    heads weighted by their signal per unit of moment noise, θ_s / sqrt(|θ_s|² + σ²)."""
    if heads.ndim != 2 or len(heads) == 0:
        raise ValueError("heads must be a non-empty [n_sources, k] matrix")
    if eps <= 0 or noise_var < 0:
        raise ValueError(f"eps={eps} must be positive and noise_var={noise_var} >= 0")
    h = heads.double()
    h = h / (h.pow(2).sum(1, keepdim=True) + noise_var).sqrt().clamp_min(1e-12)
    inv = torch.eye(h.shape[1], dtype=torch.float64) / eps
    left, order = set(range(len(h))), []
    while left:
        rest = sorted(left)
        gains = torch.einsum("nk,kj,nj->n", h[rest], inv, h[rest])
        s = rest[int(gains.argmax())]
        v = inv @ h[s]
        inv = inv - torch.outer(v, v) / (1 + h[s] @ v)  # Sherman-Morrison update of (Σ_S + εI)⁻¹
        order.append(s)
        left.remove(s)
    return order


def screening_score(heads: Tensor, subset: Sequence[int], k: int, noise_var: float = 0.0) -> float:
    """λ_k(Σ_{s∈S} θθᵀ) / sqrt(Σ_{s∈S} (|θ_s|² + σ²)²): eigengap of the pooled moment over the size of its
    sampling noise (source s adds noise of scale |θ_s|² + σ² to M), the proxy `screen_sources` maximises."""
    lam = diversity_spectrum(heads, subset)
    h = heads.double()[list(subset)]
    noise = (h.pow(2).sum(1) + noise_var).pow(2).sum().sqrt()
    return float(lam[k - 1]) * len(subset) / float(noise.clamp_min(1e-12))


def screen_sources(
    heads: Tensor, k: int, frac: float | None = None, min_sources: int | None = None, noise_var: float = 0.0
) -> list[int]:
    """Indices of the screened sources: the greedy prefix with the best score, or its first ceil(frac n).
    `noise_var` is the label-noise variance σ² (0 if unknown)."""
    if heads.ndim != 2 or not 1 <= k <= heads.shape[1]:
        raise ValueError(f"heads must be [n_sources, k_heads] with 1 <= k <= k_heads; got {tuple(heads.shape)}, k={k}")
    if frac is not None and not 0 < frac <= 1:
        raise ValueError(f"frac={frac} must lie in (0, 1]")
    order = greedy_order(heads, noise_var=noise_var)
    if frac is not None:
        return sorted(order[: max(1, math.ceil(frac * len(order)))])
    lo = max(k, min_sources or k)
    if lo > len(order):
        raise ValueError(f"need at least {lo} sources to screen; got {len(order)}")
    scores = [screening_score(heads, order[:m], k, noise_var) for m in range(lo, len(order) + 1)]
    best = lo + int(torch.tensor(scores).argmax())
    return sorted(order[:best])


def ridge_pca_subspace(
    xs: Sequence[Tensor], ys: Sequence[Tensor], k: int, lam: float, subset: Sequence[int] | None = None
) -> Tensor:
    """Top-k left singular vectors [d, k] of the stacked per-source ridge vectors β̂_s = ridge(x_s, y_s, lam)."""
    d = _check_sources(xs, ys)
    if not 1 <= k <= d:
        raise ValueError(f"k={k} must be between 1 and d={d}")
    idx = list(range(len(xs))) if subset is None else list(subset)
    if len(idx) < k:
        raise ValueError(f"need at least k={k} sources; got {len(idx)}")
    betas = torch.stack([ridge_weights(xs[s].double(), ys[s].double(), lam) for s in idx], 1)  # [d, sources]
    u, _, _ = torch.linalg.svd(betas, full_matrices=False)
    return u[:, :k]


def cv_ridge_penalty(xs: Sequence[Tensor], ys: Sequence[Tensor], grid: Sequence[float], folds: int = 5) -> float:
    """The penalty in `grid` with the lowest K-fold held-out squared error, summed over every source (each source
    fits its own ridge vector; rows split into `folds` contiguous blocks)."""
    _check_sources(xs, ys)
    if not grid or folds < 2:
        raise ValueError("need a non-empty grid and at least 2 folds")
    err = {lam: 0.0 for lam in grid}
    for x, y in zip(xs, ys):
        x, y = x.double(), y.double()
        n = len(y)
        for f in range(folds):
            test = torch.zeros(n, dtype=torch.bool)
            test[f * n // folds : (f + 1) * n // folds] = True
            if test.all() or not test.any():
                continue
            for lam in grid:
                w = ridge_weights(x[~test], y[~test], lam)
                err[lam] += float((y[test] - x[test] @ w).pow(2).sum())
    return min(grid, key=lambda lam: err[lam])


def pilot_heads(xs: Sequence[Tensor], ys: Sequence[Tensor], b_hat: Tensor, ridge: float = 1e-6) -> Tensor:
    """Per-source heads by least squares of y_s on x_s B̂ (for empirical screening): [n_sources, k]."""
    _check_sources(xs, ys)
    out = []
    for x, y in zip(xs, ys):
        z = x.double() @ b_hat.double()
        out.append(ridge_weights(z, y.double(), ridge))
    return torch.stack(out)
