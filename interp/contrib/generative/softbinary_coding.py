"""SBC, SoftBinary Coding (arXiv 2606.29578): neural compression with a *stochastic binary* latent.

The encoder gives Bernoulli probabilities q(b|x) for m bits; the rate is KL(q(b|x) || p(b)) to a learned
factorised Bernoulli prior p, trained end to end with the distortion; at test time one sample of q is
*sent* by channel simulation (here the Poisson functional representation, PFR: the receiver and sender
share candidates b_k ~ p; the sender transmits the index k* = argmin_k τ_k / (q(b_k)/p(b_k)), τ_k the
arrival times of a unit Poisson process), so the decoder sees an exact sample of q: no train/test
quantization mismatch, at a cost of about KL + log(KL + 1) + O(1) bits.

The baseline is nonlinear transform coding (NTC): encoder -> scalar latent y, additive uniform noise in
training, rounding at test, rate -log2 P(round(y)) under a learned factorised density convolved with
U(-1/2, 1/2) (Ballé et al.). Also here: the closed forms used as references, Shannon's D(R) = σ² 2^{-2R}
for a Gaussian source and the exact rate/distortion of entropy-coded uniform scalar quantization (ECSQ).

    sbc = SBC(SBCConfig(dim=8, n_bits=32)); train_sbc(sbc, lam=..., steps=...)
    d, kl_bits = sbc.evaluate(x)                      # distortion, ideal KL rate (bits per sample)
    d, bits = sbc.evaluate_channel_sim(x, seed=0)     # an actual PFR code: index bits per sample
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from interp.contrib.common.fit import fit, make_optimizer

LOG2 = math.log(2.0)


@dataclass
class SBCConfig:
    """Sizes of an SBC (or NTC) codec for blocks of `dim` real samples."""

    dim: int = 8
    """Block length n (source samples coded jointly)."""
    n_bits: int = 32
    """Binary latent size m (SBC). The rate is the KL, not m."""
    hidden: int = 128
    """Hidden width of the encoder and decoder MLPs."""
    seed: int = 0
    """Initialisation seed."""

    def __post_init__(self):
        if self.dim <= 0 or self.n_bits <= 0 or self.hidden <= 0:
            raise ValueError(f"dim, n_bits and hidden must be positive; got {self.dim}, {self.n_bits}, {self.hidden}")


def _mlp(i: int, h: int, o: int) -> nn.Module:
    return nn.Sequential(nn.Linear(i, h), nn.GELU(), nn.Linear(h, h), nn.GELU(), nn.Linear(h, o))


def bernoulli_kl_bits(q: Tensor, p: Tensor) -> Tensor:
    """KL(Bern(q) || Bern(p)) in bits, elementwise (0·log 0 = 0)."""
    t1 = torch.where(q > 0, q * (torch.log(q.clamp_min(1e-30)) - torch.log(p)), torch.zeros_like(q))
    t0 = torch.where(q < 1, (1 - q) * (torch.log((1 - q).clamp_min(1e-30)) - torch.log1p(-p)), torch.zeros_like(q))
    return (t1 + t0) / LOG2


def shannon_distortion(rate_bits: float | Tensor, variance: float = 1.0):
    """D(R) = σ² 2^{-2R} for an i.i.d. Gaussian source (bits per sample)."""
    return variance * 2.0 ** (-2.0 * rate_bits)


def ecsq_gaussian(step: float, span: float = 12.0) -> tuple[float, float]:
    """(rate H(Q) in bits, MSE) of uniform scalar quantization with step Δ (cells centred on 0, midpoint
    reconstruction replaced by the cell's conditional mean) of N(0, 1), by exact integration of the cells."""
    if step <= 0:
        raise ValueError(f"step must be positive; got {step}")
    k = torch.arange(-math.ceil(span / step), math.ceil(span / step) + 1, dtype=torch.float64)
    lo, hi = (k - 0.5) * step, (k + 0.5) * step
    phi = lambda z: torch.exp(-0.5 * z**2) / math.sqrt(2 * math.pi)  # noqa: E731
    Phi = lambda z: 0.5 * (1 + torch.erf(z / math.sqrt(2)))  # noqa: E731
    P = Phi(hi) - Phi(lo)
    keep = P > 1e-300
    P, lo, hi = P[keep], lo[keep], hi[keep]
    m1 = phi(lo) - phi(hi)  # ∫ z φ over the cell
    m2 = P + lo * phi(lo) - hi * phi(hi)  # ∫ z² φ over the cell
    mse = float((m2 - m1**2 / P).sum())
    rate = float(-(P * torch.log2(P)).sum())
    return rate, mse


def pfr_select(logq: Tensor, logp: Tensor, n_candidates: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """Poisson functional representation for B blocks of m independent bits.

    logq / logp: [B, m, 2] log-probabilities of bit = 0 / 1 under the posterior q and prior p.
    Candidates b_k ~ p (shared randomness: the decoder regenerates them from the seed), arrival times
    τ_k = cumsum(Exp(1)); chosen k* = argmin τ_k / (q(b_k)/p(b_k)), whose b_{k*} is an exact sample of q when
    n_candidates is unbounded (here: truncated). Returns (bits [B, m], 1-based index k* [B])."""
    if logq.shape != logp.shape or logq.ndim != 3 or logq.shape[-1] != 2:
        raise ValueError(f"logq and logp must both be [B, m, 2]; got {tuple(logq.shape)}, {tuple(logp.shape)}")
    if n_candidates <= 0:
        raise ValueError(f"n_candidates must be positive; got {n_candidates}")
    B, m, _ = logq.shape
    p1 = logp[..., 1].exp()  # [B, m]
    u = torch.rand(B, n_candidates, m, generator=gen, dtype=p1.dtype)
    cand = (u < p1.unsqueeze(1)).long()  # [B, K, m] ~ p
    lr = (logq - logp).unsqueeze(1).expand(B, n_candidates, m, 2).gather(3, cand.unsqueeze(3)).squeeze(3).sum(2)
    tau = torch.cumsum(-torch.log(torch.rand(B, n_candidates, generator=gen, dtype=p1.dtype)), 1)
    k = torch.argmin(torch.log(tau) - lr, 1)
    return cand[torch.arange(B), k].to(logq.dtype), k + 1


def index_code_bits(k: Tensor) -> Tensor:
    """Length in bits of the Elias-delta code of positive integers k (what sending the PFR index costs)."""
    if (k < 1).any():
        raise ValueError("indices must be >= 1")
    n = torch.floor(torch.log2(k.double())) + 1  # bits of k
    return n - 1 + 2 * torch.floor(torch.log2(n)) + 1


class SBC(nn.Module):
    """Encoder x -> Bernoulli logits of m bits; decoder bits -> x̂; learned factorised Bernoulli prior."""

    def __init__(self, cfg: SBCConfig):
        super().__init__()
        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.enc = _mlp(cfg.dim, cfg.hidden, cfg.n_bits)
        self.dec = _mlp(cfg.n_bits, cfg.hidden, cfg.dim)
        self.prior_logit = nn.Parameter(torch.zeros(cfg.n_bits))

    def _check(self, x: Tensor) -> None:
        if x.ndim != 2 or x.shape[1] != self.cfg.dim or len(x) == 0:
            raise ValueError(f"x must be [batch, {self.cfg.dim}] with batch >= 1; got {tuple(x.shape)}")

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(x̂ from one straight-through sample of q, KL rate in bits per block)."""
        self._check(x)
        logits = self.enc(x)
        q = torch.sigmoid(logits)
        hard = (torch.rand_like(q) < q).float()
        b = hard + q - q.detach()  # straight-through: forward a true sample
        rate = bernoulli_kl_bits(q, torch.sigmoid(self.prior_logit).expand_as(q)).sum(1)
        return self.dec(b), rate

    @torch.no_grad()
    def evaluate(self, x: Tensor, n_samples: int = 4) -> tuple[float, float]:
        """(MSE per sample, ideal KL rate in bits per sample), averaged over posterior samples."""
        d = r = 0.0
        for _ in range(n_samples):
            xh, rate = self(x)
            d += float(((xh - x) ** 2).mean()) / n_samples
            r += float(rate.mean()) / self.cfg.dim / n_samples
        return d, r

    @torch.no_grad()
    def evaluate_channel_sim(self, x: Tensor, seed: int = 0, n_candidates: int = 4096) -> tuple[float, float]:
        """(MSE per sample, PFR index bits per sample) of an actual channel-simulation code of each block."""
        self._check(x)
        q1 = torch.sigmoid(self.enc(x)).double().clamp(1e-12, 1 - 1e-12)
        p1 = torch.sigmoid(self.prior_logit).double().expand_as(q1)
        logq = torch.stack([torch.log1p(-q1), torch.log(q1)], -1)
        logp = torch.stack([torch.log1p(-p1), torch.log(p1)], -1)
        b, k = pfr_select(logq, logp, n_candidates, torch.Generator().manual_seed(seed))
        xh = self.dec(b.float())
        return float(((xh - x) ** 2).mean()), float(index_code_bits(k).mean()) / self.cfg.dim


class NTC(nn.Module):
    """Scalar-quantized nonlinear transform coding baseline with a factorised logistic entropy model."""

    def __init__(self, cfg: SBCConfig):
        super().__init__()
        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.enc = _mlp(cfg.dim, cfg.hidden, cfg.dim)
        self.dec = _mlp(cfg.dim, cfg.hidden, cfg.dim)
        self.loc = nn.Parameter(torch.zeros(cfg.dim))
        self.log_scale = nn.Parameter(torch.zeros(cfg.dim))

    def _likelihood(self, y: Tensor) -> Tensor:
        s = self.log_scale.exp()
        up = torch.sigmoid((y + 0.5 - self.loc) / s)
        lo = torch.sigmoid((y - 0.5 - self.loc) / s)
        return (up - lo).clamp_min(1e-9)

    def forward(self, x: Tensor, quantize: bool = False) -> tuple[Tensor, Tensor]:
        """(x̂, rate in bits per block): uniform noise in training, rounding when `quantize`."""
        if x.ndim != 2 or x.shape[1] != self.cfg.dim or len(x) == 0:
            raise ValueError(f"x must be [batch, {self.cfg.dim}] with batch >= 1; got {tuple(x.shape)}")
        y = self.enc(x)
        y = torch.round(y) if quantize else y + torch.rand_like(y) - 0.5
        rate = -torch.log2(self._likelihood(y)).sum(1)
        return self.dec(y), rate

    @torch.no_grad()
    def evaluate(self, x: Tensor) -> tuple[float, float]:
        xh, rate = self(x, quantize=True)
        return float(((xh - x) ** 2).mean()), float(rate.mean()) / self.cfg.dim


def train_codec(
    model: nn.Module,
    lam: float,
    steps: int,
    batch: int = 512,
    lr: float = 2e-3,
    seed: int = 0,
    data: Tensor | None = None,
) -> list[float]:
    """Minimise MSE + lam · rate (bits per sample) on fresh N(0, I) blocks, or, with `data` [n, dim], on
    blocks drawn from its rows (uniformly, with replacement); returns the loss trace."""
    if lam <= 0 or steps <= 0 or batch <= 0:
        raise ValueError(f"lam, steps and batch must be positive; got {lam}, {steps}, {batch}")
    dim = model.cfg.dim
    if data is not None and (data.ndim != 2 or data.shape[1] != dim or len(data) == 0):
        raise ValueError(f"data must be a non-empty [n, {dim}] tensor of blocks; got shape {tuple(data.shape)}")
    g = torch.Generator().manual_seed(seed + 1000)

    def loss_fn(_) -> Tensor:
        if data is None:
            x = torch.randn(batch, dim, generator=g)
        else:
            x = data[torch.randint(len(data), (batch,), generator=g)].float()
        xh, rate = model(x)
        return ((xh - x) ** 2).mean() + lam * rate.mean() / dim

    return fit(
        make_optimizer(model.parameters(), lr=lr),
        loss_fn,
        range(steps),
        schedule="cosine",
        total_steps=steps,
        record_losses=True,
    ).losses
