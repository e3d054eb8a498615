"""C²R: cross-sample consistency regularisation (Jin et al., ICML 2026; arXiv 2606.30609).

A penalty on directionally similar latents that both carry activation mass in a batch. For each latent
i, its nearest decoder neighbour j(i) by cosine (searched within random chunks of at most
`chunk_size` latents, exact when d_sae <= chunk_size), and

    L_C2R = (1/n) sum_i max(0, cos(d_i, d_j(i)))^2 * (||F[:, i]||_2 + ||F[:, j(i)]||_2)^alpha

where F [batch, n] are the codes used for decoding and the norms run over the batch. It is added every
m-th step with weight lambda * m (official code: lambda 5, alpha 1, m 5, start 0, batch 2048), on top of
any base SAE loss. The batch norms grow as sqrt(batch); `c2r_ref_batch=2048` (the paper-reproduction
setting, off by default so that a variant differs from its baseline only in the penalty) normalises the
term to the official batch, so lambda 5 then means the official lambda 5 at every batch size. The
chunking permutation comes from a generator seeded by (c2r_seed, step), not from the
global RNG, so a run killed and resumed from a checkpoint draws the same permutations as an
uninterrupted one (bitwise equal weights). Architectures: `c2r` (BatchTopK base, the paper's main setting), `c2r_topk`,
`c2r_relu`, `c2r_jumprelu`,
`c2r_matryoshka` (the bases the paper compares against).

    >>> from sae.baselines import make_sae
    >>> sae = make_sae("c2r", d_in=64, d_sae=256, k=4, c2r_lambda=1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from sae._bases import as_loss_dict, make_variant


def c2r_loss(
    feature_acts: Float[Tensor, "batch d_sae"],
    W_dec: Float[Tensor, "d_sae d_in"],
    alpha: float = 1.0,
    chunk_size: int = 8192,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The C²R penalty for one batch (a scalar). Gradients reach the decoder (through the cosine) and
    the encoder (through the batch norms); the neighbour choice itself is not differentiated."""
    n = W_dec.shape[0]
    d_hat = W_dec / W_dec.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    # vector_norm's backward is 0 at an all-zero column (sqrt would give 0 * inf = nan for dead latents)
    a = torch.linalg.vector_norm(feature_acts, dim=0).to(W_dec.dtype)
    order = torch.randperm(n, generator=generator, device="cpu").to(W_dec.device)
    total = W_dec.new_zeros(())
    for chunk in order.split(chunk_size):
        d = d_hat[chunk]
        cos = d @ d.T
        cos = cos.masked_fill(torch.eye(len(chunk), dtype=torch.bool, device=cos.device), -2.0)
        best, j = cos.max(dim=1)
        s = best.clamp_min(0.0).pow(2)
        pair = a[chunk] + a[chunk][j]
        total = total + (s * (pair if alpha == 1.0 else pair.pow(alpha))).sum()
    return total / n


def step_generator(seed: int, step: int) -> torch.Generator:
    """A CPU generator that depends only on (seed, step): what a resumed run needs to redraw the same numbers."""
    return torch.Generator().manual_seed((int(seed) * 1_000_003 + int(step)) % (1 << 63))


def c2r_weight(step: int, lam: float, interval: int, start: int) -> float:
    """Weight of the C²R term at a training step: lambda * m on every m-th step from `start`, else 0."""
    if lam == 0.0 or step < start or (step - start) % interval:
        return 0.0
    return lam * interval


@dataclass(kw_only=True)
class C2RFields:
    """C²R settings, mixed into the config of whichever base SAE carries the penalty."""

    c2r_lambda: float = 5.0
    """Weight lambda of the penalty (official default 5; 0 gives the base SAE exactly)."""
    c2r_alpha: float = 1.0
    """Power alpha on the summed batch norms of the two latents."""
    c2r_interval: int = 5
    """m: apply the penalty every m-th step, with weight lambda * m."""
    c2r_start: int = 0
    """First step at which the penalty may apply."""
    c2r_chunk_size: int = 8192
    """Latents per random chunk in the neighbour search (exact when d_sae <= this)."""
    c2r_seed: int = 0
    """Seed of the chunking permutations; step t draws from a generator seeded by (c2r_seed, t)."""
    c2r_ref_batch: int | None = None
    """The penalty's batch norms ||F_:,i|| grow as sqrt(batch). None (default): the raw term at the run's
    batch, the penalty the variant's baseline trains beside with nothing else changed. 2048 (the
    paper-reproduction setting, `--set c2r_ref_batch=2048`): the term is multiplied by
    (c2r_ref_batch / batch)^(alpha/2), so lambda means at any batch size what the official lambda means
    at the official batch of 2048 (at batch 1024 that makes the penalty 1.4x stronger)."""

    def _check_c2r(self) -> None:
        if self.c2r_ref_batch is not None and self.c2r_ref_batch < 1:
            raise ValueError(f"c2r_ref_batch must be a positive batch size or None, got {self.c2r_ref_batch}")
        if self.c2r_lambda < 0 or self.c2r_interval < 1 or self.c2r_start < 0 or self.c2r_chunk_size < 2:
            raise ValueError(
                "C²R needs c2r_lambda >= 0, c2r_interval >= 1, c2r_start >= 0 and c2r_chunk_size >= 2, got "
                f"{self.c2r_lambda}, {self.c2r_interval}, {self.c2r_start}, {self.c2r_chunk_size}"
            )


class C2RMixin:
    """Adds `c2r_loss` to the base SAE's auxiliary losses on the steps where it applies."""

    def calculate_aux_loss(self, step_input, feature_acts, hidden_pre, sae_out):  # type: ignore[no-untyped-def]
        losses = as_loss_dict(super().calculate_aux_loss(step_input, feature_acts, hidden_pre, sae_out))
        cfg = self.cfg
        w = c2r_weight(step_input.n_training_steps, cfg.c2r_lambda, cfg.c2r_interval, cfg.c2r_start)
        if w:
            g = step_generator(cfg.c2r_seed, step_input.n_training_steps)
            if cfg.c2r_ref_batch is not None:
                w = w * (cfg.c2r_ref_batch / feature_acts.shape[0]) ** (cfg.c2r_alpha / 2)
            losses["c2r_loss"] = w * c2r_loss(feature_acts, self.W_dec, cfg.c2r_alpha, cfg.c2r_chunk_size, g)
        return losses


C2RBatchTopKSAE, C2RBatchTopKConfig = make_variant("c2r", "batchtopk", C2RMixin, C2RFields, "_check_c2r", "C2R")
C2RTopKSAE, C2RTopKConfig = make_variant("c2r_topk", "topk", C2RMixin, C2RFields, "_check_c2r", "C2R")
C2RReLUSAE, C2RReLUConfig = make_variant("c2r_relu", "relu", C2RMixin, C2RFields, "_check_c2r", "C2R")
C2RJumpReLUSAE, C2RJumpReLUConfig = make_variant("c2r_jumprelu", "jumprelu", C2RMixin, C2RFields, "_check_c2r", "C2R")
C2RMatryoshkaSAE, C2RMatryoshkaConfig = make_variant(
    "c2r_matryoshka", "matryoshka_batchtopk", C2RMixin, C2RFields, "_check_c2r", "C2R"
)
