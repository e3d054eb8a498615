"""DiffInfo (*On the Separability of Information in Diffusion Models*, arXiv 2509.23937): where a diffusion
model's information sits, read from denoising errors through the I-MMSE relation.

For y = √snr·x + n (n ~ N(0, I)), I(x; y_snr) = ½ ∫_0^snr mmse(s) ds (Guo-Shamai-Verdú). So a denoiser's
error curve measures information: against the Gaussian with the data's mean and covariance (the best a
"second-order only" model can do, mmse_G(snr) = tr((Σ⁻¹ + snr I)⁻¹)),

    info_model   = ½ ∫ [mmse_G(snr) - mmse_model(snr)] d snr      (what the network knows beyond Gaussian)
    I(x; class)  ≈ ½ ∫ [mmse_uncond(snr) - mmse_cond(snr)] d snr   (exact for optimal denoisers)

Both split by component: projecting the error on a low-pass subspace (2x2 block averages, upsampled) and on
its orthogonal complement (the high-pass residual) splits the integrand exactly, since the two
projections are orthogonal and sum to the identity. The integrals run over log-snr (d snr = snr d log snr),
so the integrand per unit log-snr is the *density* of information along the sampling trajectory.

Also here: `cfg_norm`, the classifier-free guidance vector ‖ε(x, c) - ε(x, ∅)‖ per timestep, and
`HiddenTap`, a forward-hook reader of a denoiser's hidden layers (the [C] link: per-timestep, per-layer
activations).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

Denoiser = Callable[[Tensor, Tensor], Tensor]
"""x̂0 predictor: (noisy y at log-snr γ, γ [B]) -> x̂ [B, d]."""


def pool_projector(side: int = 8, block: int = 2) -> Tensor:
    """P_low [d, d] (d = side²): orthogonal projection onto images constant on block x block squares."""
    if side <= 0 or block <= 0 or side % block:
        raise ValueError(f"side must be a positive multiple of block; got {side}, {block}")
    d = side * side
    cells = torch.arange(d).reshape(side, side)
    B = torch.zeros(d, (side // block) ** 2, dtype=torch.float64)
    for bi in range(side // block):
        for bj in range(side // block):
            idx = cells[bi * block : (bi + 1) * block, bj * block : (bj + 1) * block].flatten()
            B[idx, bi * (side // block) + bj] = 1 / block  # unit-norm columns (block² entries of 1/block)
    return B @ B.T


def gaussian_mmse(cov: Tensor, snr: Tensor, proj: Tensor | None = None) -> Tensor:
    """mmse of x ~ N(μ, Σ) from √snr x + n, per snr: tr(P (Σ⁻¹ + snr I)⁻¹ P) (P = I by default).
    Uses the eigenbasis of Σ, so a singular Σ is fine (its null directions have zero error)."""
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"cov must be square; got {tuple(cov.shape)}")
    lam, U = torch.linalg.eigh(cov.double())
    lam = lam.clamp_min(0)
    P = torch.eye(len(cov), dtype=torch.float64) if proj is None else proj.double()
    w = ((P @ U) ** 2).sum(0)  # weight of each eigen-direction in P
    snr = torch.as_tensor(snr, dtype=torch.float64).reshape(-1, 1)
    return ((lam / (1 + snr * lam)) * w).sum(1)


def integrate_logsnr(gamma: Tensor, values: Tensor) -> float:
    """½ ∫ values d snr over the log-snr grid γ (trapezoid in γ with d snr = e^γ dγ)."""
    if gamma.shape != values.shape or gamma.ndim != 1 or len(gamma) < 2:
        raise ValueError("gamma and values must be 1-d of the same length >= 2")
    if not bool((gamma[1:] > gamma[:-1]).all()):
        raise ValueError("gamma must be strictly increasing")
    f = values.double() * gamma.double().exp()
    return float(0.5 * torch.trapezoid(f, gamma.double()))


@torch.no_grad()
def mmse_curve(
    denoise: Denoiser, x: Tensor, gammas: Tensor, projs: dict[str, Tensor], n_noise: int = 1, seed: int = 0
) -> dict[str, Tensor]:
    """E‖P(x - x̂)‖² per log-snr γ, for each named projection P. y = √snr x + n, snr = e^γ."""
    if x.ndim != 2 or len(x) == 0:
        raise ValueError(f"x must be [n, d] with n >= 1; got {tuple(x.shape)}")
    g = torch.Generator().manual_seed(seed)
    out = {k: torch.zeros(len(gammas), dtype=torch.float64) for k in projs}
    for i, gm in enumerate(gammas.tolist()):
        for _ in range(n_noise):
            y = math.exp(gm / 2) * x.double() + torch.randn(x.shape, generator=g, dtype=torch.float64)
            err = x.double() - denoise(y, torch.full((len(x),), gm, dtype=torch.float64)).double()
            for k, P in projs.items():
                out[k][i] += float(((err @ P.double()) ** 2).sum(1).mean()) / n_noise
    return out


class HiddenTap:
    """Records the outputs of chosen submodules during forward passes (removed on exit).

    with HiddenTap({"h1": net.layer1}) as tap:
        net(x); acts = tap.acts["h1"]
    """

    def __init__(self, modules: dict[str, nn.Module]):
        if not modules:
            raise ValueError("HiddenTap needs at least one module")
        self.modules, self.acts, self._handles = modules, {}, []

    def __enter__(self):
        for name, m in self.modules.items():
            self._handles.append(
                m.register_forward_hook(lambda mod, inp, out, name=name: self.acts.__setitem__(name, out.detach()))
            )
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles.clear()
        return False


def cfg_norm(eps_cond: Tensor, eps_uncond: Tensor) -> float:
    """Mean ‖ε(x, c) - ε(x, ∅)‖ over the batch: the size of the guidance vector."""
    if eps_cond.shape != eps_uncond.shape:
        raise ValueError(f"shapes differ: {tuple(eps_cond.shape)} vs {tuple(eps_uncond.shape)}")
    return float((eps_cond - eps_uncond).norm(dim=1).mean())
