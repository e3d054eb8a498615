"""MoE-NoiseFilter: iso-parameter sparse MoE vs dense MLP under feature noise, with router diagnostics.

Paper: *Robustness of Mixtures of Experts to Feature Noise* (arXiv 2601.14792; no public code). Claim:
when inputs are a module-specific signal plus isotropic feature noise, a sparse MoE with the same
parameter count as a dense MLP generalises better, is less sensitive to input perturbations and
converges faster, because each routed expert only passes the noise that falls in its own module's
subspace ("sparse activation acts as a noise filter").

This file holds the pieces: the two models (`Top1MoE` with ReLU experts and a linear router, `DenseMLP`),
`iso_dense_width` (the dense width with the MoE's parameter count), the modular data generator
`modular_task`, and the diagnostics:

- `perturbation_sensitivity`: E |f(x + δ) - f(x)|² / E|δ|² for small Gaussian δ;
- `noise_energy_fraction`: of the noise energy entering a first layer W, the fraction outside the
  module's signal subspace, |W (I - QQᵀ)|²_F / |W|²_F (for the MoE: the routed expert's W);
- `routing_purity`: how often tokens of one latent module share an expert (majority fraction).

    moe = Top1MoE(d_in=32, d_out=1, d_expert=16, n_experts=4)
    dense = DenseMLP(32, 1, iso_dense_width(32, 1, 16, 4))    # same parameter count
    task = modular_task(n=4000, sigma=1.0, seed=0)              # x, y, module, bases
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class DenseMLP(nn.Module):
    """x -> W2 relu(W1 x + b1) + b2."""

    def __init__(self, d_in: int, d_out: int, width: int):
        super().__init__()
        if min(d_in, d_out, width) < 1:
            raise ValueError(f"d_in, d_out and width must be >= 1; got {d_in}, {d_out}, {width}")
        self.fc1, self.fc2 = nn.Linear(d_in, width), nn.Linear(width, d_out)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.relu(self.fc1(x)))


class Top1MoE(nn.Module):
    """Sparse MoE: a linear router picks one ReLU expert per row (top-1), scaled by its softmax gate.

    `last_experts` keeps the last routing [n] for diagnostics.
    """

    def __init__(self, d_in: int, d_out: int, d_expert: int, n_experts: int):
        super().__init__()
        if min(d_in, d_out, d_expert) < 1 or n_experts < 2:
            raise ValueError(
                f"need d_in, d_out, d_expert >= 1 and n_experts >= 2; got {d_in}, {d_out}, {d_expert}, {n_experts}"
            )
        self.router = nn.Linear(d_in, n_experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(n_experts, d_expert, d_in) * d_in**-0.5)
        self.b1 = nn.Parameter(torch.zeros(n_experts, d_expert))
        self.w2 = nn.Parameter(torch.randn(n_experts, d_out, d_expert) * d_expert**-0.5)
        self.b2 = nn.Parameter(torch.zeros(n_experts, d_out))
        self.last_experts: Tensor | None = None

    def forward(self, x: Tensor) -> Tensor:
        gate = F.softmax(self.router(x), -1)
        weight, e = gate.max(-1)
        self.last_experts = e.detach()
        h = F.relu(torch.einsum("nd,nhd->nh", x, self.w1[e]) + self.b1[e])
        return weight.unsqueeze(-1) * (torch.einsum("nh,noh->no", h, self.w2[e]) + self.b2[e])


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def iso_dense_width(d_in: int, d_out: int, d_expert: int, n_experts: int) -> int:
    """Dense hidden width whose MLP has (to within one unit) the parameter count of `Top1MoE`."""
    moe = n_experts * (d_expert * d_in + d_expert + d_out * d_expert + d_out) + d_in * n_experts
    return max(1, round((moe - d_out) / (d_in + 1 + d_out)))


@dataclass
class ModularTask:
    x: Tensor
    """Inputs [n, d]: module mean + module-subspace signal + isotropic noise."""
    y: Tensor
    """Targets [n, 1]: a module-specific nonlinear function of the signal."""
    module: Tensor
    """Latent module of each row [n]."""
    bases: Tensor
    """Orthonormal basis of each module's signal subspace (mean direction included) [K, d, r + 1]."""


def modular_task(
    n: int, sigma: float, seed: int, n_modules: int = 4, d: int = 32, r: int = 4, spec_seed: int | None = None
) -> ModularTask:
    """x = 2 μ_m + U_m z + σ ξ, y = 2 tanh(v_mᵀ z) (z ~ N(0, I_r), ξ ~ N(0, I_d)); μ_m, U_m mutually
    orthogonal. `spec_seed` fixes the modules (μ, U, v) so that train and test share them."""
    if n < 1 or sigma < 0 or n_modules < 1 or n_modules * (r + 1) > d:
        raise ValueError(
            f"need n >= 1, sigma >= 0 and n_modules * (r + 1) <= d; got n={n}, sigma={sigma}, "
            f"n_modules={n_modules}, r={r}, d={d}"
        )
    gs = torch.Generator().manual_seed(seed if spec_seed is None else spec_seed)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=gs))
    bases = q[:, : n_modules * (r + 1)].T.reshape(n_modules, r + 1, d).transpose(1, 2)  # [K, d, r+1]
    v = torch.randn(n_modules, r, generator=gs)
    v = v / v.norm(dim=1, keepdim=True) * 2.0
    g = torch.Generator().manual_seed(seed + 7919)
    m = torch.randint(n_modules, (n,), generator=g)
    z = torch.randn(n, r, generator=g)
    signal = 2.0 * bases[m, :, 0] + torch.einsum("ndr,nr->nd", bases[m, :, 1:], z)
    x = signal + sigma * torch.randn(n, d, generator=g)
    y = 2.0 * torch.tanh((v[m] * z).sum(1, keepdim=True))
    return ModularTask(x, y, m, bases)


@torch.no_grad()
def perturbation_sensitivity(model: nn.Module, x: Tensor, eps: float = 0.1, seed: int = 0) -> float:
    """E |f(x + δ) - f(x)|² / E |δ|², δ ~ N(0, eps² I)."""
    if eps <= 0:
        raise ValueError(f"eps={eps} must be positive")
    delta = eps * torch.randn(x.shape, generator=torch.Generator().manual_seed(seed))
    return float((model(x + delta) - model(x)).pow(2).sum(-1).mean() / delta.pow(2).sum(-1).mean())


def noise_energy_fraction(w: Tensor, basis: Tensor) -> float:
    """|W (I - QQᵀ)|²_F / |W|²_F: the share of isotropic noise energy W passes from outside span(Q).

    w: a first layer [h, d]; basis: [d, r] (orthonormalised here). 1 - r/d for a W blind to the subspace.
    """
    if w.ndim != 2 or basis.ndim != 2 or basis.shape[0] != w.shape[1]:
        raise ValueError(f"w must be [h, d] and basis [d, r]; got {tuple(w.shape)} and {tuple(basis.shape)}")
    q, _ = torch.linalg.qr(basis.double())
    w = w.double()
    outside = w - (w @ q) @ q.T
    total = w.pow(2).sum()
    if total == 0:
        raise ValueError("w is all zeros")
    return float(outside.pow(2).sum() / total)


def routing_purity(experts: Tensor, module: Tensor) -> float:
    """Fraction of rows whose expert is the majority expert of their module (1 = modules never split)."""
    if experts.shape != module.shape or experts.numel() == 0:
        raise ValueError("experts and module must be non-empty and of the same shape")
    hit = 0
    for m in torch.unique(module):
        hit += int(torch.bincount(experts[module == m]).max())
    return hit / len(module)
