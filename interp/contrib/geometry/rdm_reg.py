"""RDMReg (Rectified LpJEPA): sliced-Wasserstein matching of features to a rectified generalized Gaussian.

Paper: *Rectified LpJEPA: JEPAs with Sparse and Maximum-Entropy Representations* (arXiv 2602.01456;
Kuang et al.; official code YilunKuang/rectified-lp-jepa, read for the definitions, not copied). A
JEPA's collapse-preventing regulariser pulls the projector output towards a target distribution; a
Gaussian target gives dense codes. RDMReg targets the Rectified Generalized Gaussian

    RGG(μ, p) = ReLU(μ + σ_p GN_p),   GN_p density ∝ exp(-|x|^p / p),   σ_p = sqrt(Γ(1/p)/Γ(3/p)) / p^(1/p)

(σ_p gives GN_p unit variance; p = 1 is the rectified Laplace, the paper's default). The loss is the
two-sample sliced 2-Wasserstein distance between a batch of (ReLU) projector outputs and as many RGG
samples: project both on random unit directions, sort each projection, mean squared difference. The
SSL loss is λ_inv MSE(z1, z2) + λ_reg (RDMReg(z1) + RDMReg(z2)) / 2 with (25, 250) as in the paper's
minimal recipe. Lower μ (and p) gives sparser codes.

The same distance is a read-only score of any cached activation distribution (`rgg_fit`): which μ of
the family fits best after matching the scale, and how far it is, against a moment-matched Gaussian.

    loss = rdmreg_loss(z, p=1.0, mu=0.0, n_proj=1024)          # z: [batch, d] ReLU features
    l0_fraction(z)                                             # fraction of non-zero entries
    rgg_nonzero_fraction(mu=-0.5, p=1.0)                       # the target's own ℓ0, closed form
    rgg_fit(acts, p=1.0)                                        # {"mu", "distance", "gaussian_distance", ...}
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor


def rgg_sigma(p: float) -> float:
    """σ_p = sqrt(Γ(1/p)/Γ(3/p)) / p^(1/p): the scale that gives GN_p unit variance."""
    if p <= 0:
        raise ValueError(f"p={p} must be positive")
    return math.sqrt(math.gamma(1 / p) / math.gamma(3 / p)) / p ** (1 / p)


def sample_generalized_normal(shape, p: float, generator: torch.Generator | None = None) -> Tensor:
    """GN_p samples (density ∝ exp(-|x|^p / p)): |x| = (p G)^(1/p), G ~ Gamma(1/p, 1), random sign.

    The Gamma draws come from numpy, seeded from `generator` (or torch's global stream), so a seeded
    torch generator gives reproducible samples.
    """
    if p <= 0:
        raise ValueError(f"p={p} must be positive")
    shape = tuple(shape)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
    g = torch.from_numpy(np.random.default_rng(seed).gamma(1.0 / p, 1.0, size=shape)).float()
    sign = torch.randint(0, 2, shape, generator=generator).float() * 2 - 1
    return sign * (p * g).pow(1.0 / p)


def sample_rgg(shape, p: float = 1.0, mu: float = 0.0, generator: torch.Generator | None = None) -> Tensor:
    """Rectified generalized Gaussian samples ReLU(μ + σ_p GN_p)."""
    return torch.relu(mu + rgg_sigma(p) * sample_generalized_normal(shape, p, generator))


def rgg_nonzero_fraction(mu: float, p: float = 1.0) -> float:
    """P(RGG(μ, p) > 0) = P(GN_p > -μ/σ_p), in closed form: with t = |μ|/σ_p and Q the regularised upper
    incomplete gamma, P(|GN_p| > t) = Q(1/p, t^p/p), so the fraction is 1 - Q/2 for μ >= 0 and Q/2 below.
    For p = 1 (rectified Laplace) and μ < 0 it is exp(sqrt(2) μ) / 2. A projector trained to the target
    has this ℓ0 by construction, so a measured ℓ0 near it says the regulariser did what it was told."""
    if p <= 0:
        raise ValueError(f"p={p} must be positive")
    t = abs(mu) / rgg_sigma(p)
    a, x = torch.tensor(1 / p, dtype=torch.float64), torch.tensor(t**p / p, dtype=torch.float64)
    q = float(torch.special.gammaincc(a, x))
    return 1 - q / 2 if mu >= 0 else q / 2


def sliced_w2(a: Tensor, b: Tensor, n_proj: int = 1024, generator: torch.Generator | None = None) -> Tensor:
    """Two-sample sliced 2-Wasserstein distance (squared): mean over random unit directions θ of the mean
    squared difference of sorted <a, θ> and sorted <b, θ>. a, b: [n, d] with the same n."""
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"both samples must be [n, d] of the same shape; got {tuple(a.shape)} and {tuple(b.shape)}")
    if n_proj < 1 or len(a) == 0:
        raise ValueError(f"need n_proj >= 1 and at least one sample; got n_proj={n_proj}, n={len(a)}")
    theta = torch.randn(a.shape[1], n_proj, generator=generator, dtype=a.dtype).to(a.device)
    theta = theta / theta.norm(dim=0, keepdim=True)
    pa, _ = torch.sort(a @ theta, dim=0)
    pb, _ = torch.sort(b @ theta, dim=0)
    return (pa - pb).pow(2).mean()


def rdmreg_loss(z: Tensor, p: float = 1.0, mu: float = 0.0, n_proj: int = 1024,
                generator: torch.Generator | None = None) -> Tensor:
    """RDMReg: sliced W2 between features z [batch, d] and as many RGG(μ, p) samples."""
    target = sample_rgg(z.shape, p, mu, generator).to(z)
    return sliced_w2(z, target, n_proj, generator)


def gaussian_reg_loss(z: Tensor, n_proj: int = 1024, generator: torch.Generator | None = None) -> Tensor:
    """The Gaussian-target baseline (LeJEPA/SIGReg-style): sliced W2 between z and N(0, I) samples."""
    return sliced_w2(z, torch.randn(z.shape, generator=generator).to(z), n_proj, generator)


def vicreg_loss(z1: Tensor, z2: Tensor, lam: float = 25.0, mu: float = 25.0, nu: float = 1.0) -> Tensor:
    """VICReg (Bardes et al.): λ invariance + μ variance hinge (std >= 1) + ν off-diagonal covariance."""
    inv = (z1 - z2).pow(2).mean()
    std = lambda z: torch.sqrt(z.var(0) + 1e-4)  # noqa: E731
    var = torch.relu(1 - std(z1)).mean() + torch.relu(1 - std(z2)).mean()
    def cov(z):
        c = (z - z.mean(0)).T @ (z - z.mean(0)) / (len(z) - 1)
        return (c.pow(2).sum() - c.diagonal().pow(2).sum()) / z.shape[1]
    return lam * inv + mu * var + nu * (cov(z1) + cov(z2))


def l0_fraction(z: Tensor, tol: float = 0.0) -> float:
    """Mean fraction of entries with |z| > tol (the paper's ℓ0 metric; lower = sparser)."""
    return float((z.abs() > tol).float().mean())


def l1_sparsity(z: Tensor, eps: float = 1e-12) -> float:
    """Mean over rows of (|z|_1 / |z|_2)² / d: 1 for a flat row, 1/d for a one-hot row."""
    d = z.shape[1]
    return float(((z.abs().sum(1) / (z.norm(dim=1) + eps)).pow(2) / d).mean())


def rgg_fit(acts: Tensor, p: float = 1.0, mus=(-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0), n_proj: int = 256,
            max_rows: int = 4096, seed: int = 0) -> dict[str, float]:
    """Score a cached activation distribution [n, d] against the RGG family (read-only diagnostic).

    Each feature is scaled to unit RMS; for each μ the RGG samples are scaled to unit RMS too; the best μ
    (smallest sliced W2) is returned with its distance, the distance to a moment-matched Gaussian
    (per-feature mean and sd), and the data's ℓ0 fraction. A distance near the RGG's and far below the
    Gaussian's says the activations look like a rectified, sparse max-entropy code.
    """
    if acts.ndim != 2 or len(acts) < 2:
        raise ValueError(f"activations must be [n >= 2, d]; got {tuple(acts.shape)}")
    if not mus:
        raise ValueError("mus must hold at least one location")
    g = torch.Generator().manual_seed(seed)
    x = acts.double()
    if len(x) > max_rows:
        x = x[torch.randperm(len(x), generator=g)[:max_rows]]
    rms = x.pow(2).mean(0).sqrt().clamp_min(1e-12)
    x = x / rms
    best = (float("inf"), float("nan"))
    for mu in mus:
        t = sample_rgg(x.shape, p, mu, g).double()
        t = t / t.pow(2).mean(0).sqrt().clamp_min(1e-12)
        d = float(sliced_w2(x, t, n_proj, torch.Generator().manual_seed(seed + 1)))
        best = min(best, (d, mu))
    gauss = x.mean(0) + x.std(0) * torch.randn(x.shape, generator=g, dtype=torch.float64)
    return {"mu": best[1], "distance": best[0],
            "gaussian_distance": float(sliced_w2(x, gauss, n_proj, torch.Generator().manual_seed(seed + 1))),
            "l0": l0_fraction(acts, tol=1e-6 * float(acts.abs().max()))}
