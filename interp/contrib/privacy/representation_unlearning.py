"""RepUnl: unlearning by a learned transform on one layer's representations (an information bottleneck).

Paper: *Representation Unlearning: Forgetting through Information Compression* (arXiv 2601.21564;
Almudévar, Ortega; no official code found; the paper's derivations were not available offline, so the
variational surrogates below are our instantiation of the abstract's objective, named as such).

The model stays frozen. A stochastic transform T: z -> t = mu(z) + sigma(z) * eps, with
mu(z) = z + MLP(z) (starts as the identity), is applied to one layer's states through a hook. Objective:

- keep information about retained data: a variational lower bound on I(t; y) is -CE(head(t), y) with the
  frozen rest of the model as the decoder (Barber-Agakov), on retain data;
- compress information about forget data: a variational upper bound on I(t; z_forget) is
  E KL(q(t | z) || r(t)) with a fixed Gaussian r (fitted to retain states when there are any, else
  zero-mean with the forget states' per-dimension scale).

Two regimes (`UnlearnConfig.regime`):
- "retain_forget": loss = CE_retain + beta * KL_forget (+ beta_retain * KL_retain, the usual IB term);
- "forget_only" (zero-shot): no retain data. Utility is kept by distilling, on the forget inputs, the
  frozen model's distribution over every class except the forgotten label (renormalised), plus an L2
  penalty on mu(z) - z; loss = beta * KL_forget + distill + l2 * ||mu(z) - z||².

In a `HookedModel`: `with model.hooks(fwd_hooks=[(f"blocks.{l}.hook_resid_post", transform.hook())]): ...`.
`transform.hook(positions=...)` edits only the chosen positions (e.g. the last token).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp.contrib.common.fit import fit, make_optimizer


class RepresentationTransform(nn.Module):
    """t = z + MLP(z) + sigma(z) * eps (eps only while training and `stochastic`); the identity at init."""

    def __init__(self, d_model: int, d_hidden: int = 64, init_log_sigma: float = -4.0):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d_model, d_hidden), nn.GELU(), nn.Linear(d_hidden, 2 * d_model))
        nn.init.zeros_(self.mlp[2].weight)
        with torch.no_grad():
            self.mlp[2].bias.zero_()
            self.mlp[2].bias[d_model:] = init_log_sigma
        self.d_model = d_model
        self.stochastic = True

    def stats(self, z: Tensor) -> tuple[Tensor, Tensor]:
        """(mu, log_sigma) of q(t | z), both [..., d_model]."""
        if z.shape[-1] != self.d_model:
            raise ValueError(f"states have width {z.shape[-1]}, this transform was built for {self.d_model}")
        delta, log_sigma = self.mlp(z).chunk(2, -1)
        return z + delta, log_sigma.clamp(-10, 4)

    def forward(self, z: Tensor) -> Tensor:
        mu, log_sigma = self.stats(z)
        if self.training and self.stochastic:
            return mu + log_sigma.exp() * torch.randn_like(mu)
        return mu

    def hook(self, positions: Tensor | int | None = None) -> Callable:
        """A hook fn(tensor [batch, pos, d], hook) applying T at `positions` (None: every position)."""

        def fn(t: Tensor, point) -> Tensor:
            if positions is None:
                return self(t)
            out = t.clone()
            out[:, positions] = self(t[:, positions])
            return out

        return fn


def gaussian_kl(mu: Tensor, log_sigma: Tensor, prior_mu: Tensor, prior_log_sigma: Tensor) -> Tensor:
    """KL(N(mu, sigma²) || N(prior_mu, prior_sigma²)), diagonal, summed over the last axis: [...]."""
    var, pvar = (2 * log_sigma).exp(), (2 * prior_log_sigma).exp()
    return 0.5 * (((var + (mu - prior_mu) ** 2) / pvar) - 1 + 2 * (prior_log_sigma - log_sigma)).sum(-1)


@dataclass
class UnlearnConfig:
    regime: Literal["retain_forget", "forget_only"] = "retain_forget"
    """Which data the unlearning sees: retain and forget sets, or the forget set only (zero-shot)."""
    beta: float = 1.0
    """Weight of the compression term on forget data (per state dimension, see `fit_transform`)."""
    beta_retain: float = 0.0
    """Weight of the IB compression term on retain data (retain_forget only)."""
    l2: float = 1.0
    """forget_only: weight of ||mu(z) - z||² (keeps T near the identity)."""
    steps: int = 300
    """Optimiser steps."""
    lr: float = 3e-3
    """Adam learning rate."""
    batch_size: int = 128
    """Examples per step from each set."""
    seed: int = 0
    """Seed for batches and the reparameterisation noise."""

    def __post_init__(self):
        if self.regime not in ("retain_forget", "forget_only"):
            raise ValueError(f"regime must be 'retain_forget' or 'forget_only', not {self.regime!r}")
        if self.steps < 1 or self.batch_size < 1 or self.lr <= 0 or self.beta < 0:
            raise ValueError("steps and batch_size must be >= 1, lr > 0 and beta >= 0")


def prior_from(states: Tensor) -> tuple[Tensor, Tensor]:
    """A diagonal Gaussian prior (mean, log std) fitted to states [n, d]."""
    return states.mean(0), states.std(0).clamp_min(1e-3).log()


def fit_transform(
    transform: RepresentationTransform,
    decode: Callable[[Tensor, Tensor], Tensor],
    forget_z: Tensor,
    forget_y: Tensor,
    retain_z: Tensor | None = None,
    retain_y: Tensor | None = None,
    cfg: UnlearnConfig | None = None,
    progress: bool = False,
) -> list[dict[str, float]]:
    """Train T on cached states; the rest of the model, `decode(t, idx) -> logits`, stays frozen.

    forget_z / retain_z: [n, d] states at the chosen layer (e.g. rows of an `ActivationCache`);
    forget_y / retain_y: [n] labels. `decode` gets the transformed states and the row indices of the batch
    (so a caller can re-run the layers above with each row's own context). Returns the loss history.
    KL terms are divided by d so `beta` does not scale with the width.
    """
    cfg = cfg or UnlearnConfig()
    if forget_z.ndim != 2 or len(forget_z) != len(forget_y) or len(forget_z) == 0:
        raise ValueError("forget_z must be [n, d] with one label per row in forget_y, n >= 1")
    if cfg.regime == "retain_forget" and (retain_z is None or retain_y is None or len(retain_z) == 0):
        raise ValueError("regime 'retain_forget' needs retain_z and retain_y; use regime='forget_only' without them")
    d = forget_z.shape[1]
    if cfg.regime == "retain_forget":
        p_mu, p_ls = prior_from(retain_z)
    else:
        # no retain data: a zero-mean prior with the forget states' scale (the forget mean would keep them)
        p_mu, p_ls = torch.zeros(d), forget_z.std(0).clamp_min(1e-3).log()
        forget_label_set = torch.unique(forget_y)
        with torch.no_grad():
            ref = decode(forget_z, torch.arange(len(forget_z)))
        if len(forget_label_set) >= ref.shape[-1]:
            raise ValueError(
                "forget_only distils the classes other than the forgotten labels, but the forget set "
                "covers every class; use regime='retain_forget' for random-subset forgetting"
            )
    gen = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    transform.train()
    history = []
    steps = range(cfg.steps)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc="RepUnl")

    def loss_fn(_) -> Tensor:
        """The step's loss; its terms (and the total, under "loss") go to `history`."""
        fi = torch.randint(len(forget_z), (min(cfg.batch_size, len(forget_z)),), generator=gen)
        mu_f, ls_f = transform.stats(forget_z[fi])
        kl_f = gaussian_kl(mu_f, ls_f, p_mu, p_ls).mean() / d
        log = {"kl_forget": float(kl_f.detach())}
        loss = cfg.beta * kl_f
        if cfg.regime == "retain_forget":
            ri = torch.randint(len(retain_z), (min(cfg.batch_size, len(retain_z)),), generator=gen)
            t = transform(retain_z[ri])
            ce = F.cross_entropy(decode(t, ri), retain_y[ri])
            loss = loss + ce
            log["ce_retain"] = float(ce.detach())
            if cfg.beta_retain:
                mu_r, ls_r = transform.stats(retain_z[ri])
                loss = loss + cfg.beta_retain * gaussian_kl(mu_r, ls_r, p_mu, p_ls).mean() / d
        else:
            t = transform(forget_z[fi])
            logits = decode(t, fi)
            keep = torch.ones(logits.shape[-1], dtype=torch.bool)
            keep[forget_label_set] = False
            distill = F.kl_div(
                F.log_softmax(logits[:, keep], -1),
                F.log_softmax(ref[fi][:, keep], -1),
                log_target=True,
                reduction="batchmean",
            )
            l2 = (mu_f - forget_z[fi]).pow(2).sum(-1).mean() / d
            loss = loss + distill + cfg.l2 * l2
            log.update(distill=float(distill.detach()), l2=float(l2.detach()))
        log["loss"] = float(loss.detach())
        history.append(log)
        return loss

    fit(make_optimizer(transform.parameters(), lr=cfg.lr), loss_fn, steps)
    transform.eval()
    if not all(math.isfinite(h["loss"]) for h in history[-5:]):
        raise FloatingPointError("RepUnl training diverged (non-finite loss); lower lr or beta")
    return history
