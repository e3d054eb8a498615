"""CREDIT: certified ownership verification against model extraction, from the mutual information of
embeddings.

Paper/code: *Certified Ownership Verification of Deep Neural Networks Against Model Extraction
Attacks* (LabRAI/CREDIT, read for this module; nothing copied). The served model perturbs its
embedding before the head,

    z' = z + N(0, σ²I) + σ·δ̂,   δ̂ ∝ Wᵀ(WWᵀ + εI)⁻¹ 1  (unit norm; W the head's weights),

so that a copy trained on the API's outputs inherits a dependence on the owner's embedding. To verify a
suspect, the owner embeds a verification set with both models and computes a KSG mutual-information
estimate between the two embeddings (k = 5, z-scored coordinates, Chebyshev norm, the repository's
variant ψ(k) - 1/k + ψ(n) - ⟨ψ(n_x + 1) + ψ(n_y + 1)⟩ with strict counts inside the joint k-th
neighbour distance), subtracts the estimate on a row-permuted pairing (the null), and passes the
difference through a softplus of temperature 0.02. A suspect is declared extracted when the score
exceeds a threshold τ.

The paper's certified τ = β(1 - ρ·exp(-Qβ / (η d n))) with β = δ̂² / (2σ²) "from nearest-neighbour
distances" is only partly specified (ρ, η and the δ̂ estimate are not in the repository, which takes τ
as an argument): `certified_threshold` is our reading (δ̂² = the median squared nearest-neighbour
distance of the owner's z-scored verification embeddings, ρ = η = 1), reported next to the
threshold-free AUROC.

    score = credit_score(owner_emb, suspect_emb, rng=np.random.default_rng(0))   # >= 0
    z_served = defend(z, W, sigma=0.3, rng=rng)
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import digamma


def watermark_direction(w: np.ndarray, eps: float = 1e-3) -> np.ndarray:
    """δ̂ ∝ Wᵀ(WWᵀ + εI)⁻¹ 1 for head weights W [classes, d], normalised to unit length: the
    minimum-norm direction that raises every logit by (about) the same amount."""
    w = np.asarray(w, dtype=float)
    if w.ndim != 2 or w.size == 0:
        raise ValueError(f"W must be a non-empty [classes, d] matrix; got shape {w.shape}")
    if eps <= 0:
        raise ValueError(f"eps={eps} must be positive")
    d = w.T @ np.linalg.solve(w @ w.T + eps * np.eye(w.shape[0]), np.ones(w.shape[0]))
    n = np.linalg.norm(d)
    if n == 0:
        raise ValueError("W gives a zero direction (all-zero head?)")
    return d / n


def defend(z: np.ndarray, w: np.ndarray, sigma: float, rng: np.random.Generator, eps: float = 1e-3) -> np.ndarray:
    """The served embedding z' = z + N(0, σ²I) + σ·δ̂ (rows of z [n, d])."""
    z = np.asarray(z, dtype=float)
    if z.ndim != 2 or z.shape[1] != np.asarray(w).shape[1]:
        raise ValueError(f"z must be [n, {np.asarray(w).shape[1]}]; got {z.shape}")
    if sigma < 0:
        raise ValueError(f"sigma={sigma} must be >= 0")
    return z + sigma * rng.standard_normal(z.shape) + sigma * watermark_direction(w, eps)


def utility_entropy(sigma: float, eigvals: np.ndarray) -> float:
    """ΔH_util = ½ Σ log(1 + σ²/λ_i) over the embedding covariance's eigenvalues (nats)."""
    lam = np.asarray(eigvals, dtype=float)
    if (lam <= 0).any():
        raise ValueError("eigenvalues must be positive (drop null directions first)")
    return float(0.5 * np.log1p(sigma**2 / lam).sum())


def _zscore(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(0)) / np.maximum(x.std(0), 1e-12)


def _cheb(x: np.ndarray) -> np.ndarray:
    d = np.abs(x[:, None, :] - x[None, :, :]).max(-1)
    np.fill_diagonal(d, np.inf)
    return d


def ksg_mi(x: np.ndarray, y: np.ndarray, k: int = 5, repo_variant: bool = True) -> float:
    """KSG estimate of I(X; Y) in nats. `repo_variant` (default): the CREDIT repository's formula, which
    subtracts 1/k from Kraskov's first estimator although it counts neighbours strictly inside the
    joint distance; that is a constant -1/k bias, cancelled by `credit_score`'s permutation null.
    `repo_variant=False`: Kraskov-Stögbauer-Grassberger estimator 1."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if y.ndim == 1:
        y = y[:, None]
    if x.ndim != 2 or y.ndim != 2 or len(x) != len(y):
        raise ValueError(f"x and y must be [n, d] with the same n; got {x.shape} and {y.shape}")
    n = len(x)
    if k < 1 or n <= k + 1:
        raise ValueError(f"need 1 <= k < n - 1; got k={k}, n={n}")
    xs, ys = _zscore(x), _zscore(y)
    dx, dy = _cheb(xs), _cheb(ys)
    eps_k = np.partition(np.maximum(dx, dy), k - 1, axis=1)[:, k - 1]  # joint Chebyshev = max of the two
    nx = (dx < eps_k[:, None]).sum(1)
    ny = (dy < eps_k[:, None]).sum(1)
    bias = 1.0 / k if repo_variant else 0.0
    return float(digamma(k) - bias + digamma(n) - (digamma(nx + 1).mean() + digamma(ny + 1).mean()))


def credit_score(
    owner: np.ndarray,
    suspect: np.ndarray,
    k: int = 5,
    n_perm: int = 1,
    temperature: float = 0.02,
    rng: np.random.Generator | None = None,
) -> float:
    """softplus_T(KSG(owner, suspect) - mean KSG(owner, permuted suspect))."""
    if temperature <= 0 or n_perm < 0:
        raise ValueError(f"temperature ({temperature}) must be positive and n_perm ({n_perm}) >= 0")
    rng = rng or np.random.default_rng(0)
    raw = ksg_mi(owner, suspect, k)
    null = (
        float(np.mean([ksg_mi(owner, np.asarray(suspect)[rng.permutation(len(suspect))], k) for _ in range(n_perm)]))
        if n_perm
        else 0.0
    )
    x = (raw - null) / temperature
    return float(temperature * (np.logaddexp(0.0, x)))


def certified_threshold(owner: np.ndarray, sigma: float, queries: int, rho: float = 1.0, eta: float = 1.0) -> float:
    """τ = β(1 - ρ·exp(-Qβ / (η d n))), β = δ̂² / (2σ²), δ̂² the median squared nearest-neighbour
    (Chebyshev) distance of the z-scored owner embeddings: our reading of the paper's formula."""
    owner = np.asarray(owner, dtype=float)
    if sigma <= 0 or queries <= 0:
        raise ValueError(f"sigma ({sigma}) and queries ({queries}) must be positive")
    n, d = owner.shape
    delta2 = float(np.median(_cheb(_zscore(owner)).min(1) ** 2))
    beta = delta2 / (2 * sigma**2)
    return float(beta * (1 - rho * math.exp(-queries * beta / (eta * d * n))))
