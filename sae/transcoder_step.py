"""One optimisation step of a set of transcoders: codes, losses, AuxK for dead latents, Adam, decoder norms.

While training, the codes are TopK (each row's k largest pre-activations) or BatchTopK (the k·n largest over the
n rows of the batch, per layer; the default), both through sparse `Codes` so the decoder costs O(k) per row.
The loss is the mean over layers of the squared error per row (outputs scaled so E||y||² = d_model, divided by
d_model), plus AuxK: for each layer with latents that have not fired for `window` steps, those latents' top
`k_aux` pre-activations reconstruct the detached residual (a CLT's into every slot of the layer, averaged over
the slots), weighted by min(n_dead / k_aux, 1) as sae-lens does (`sae._bases.auxk_loss`, style "sae_lens").
After Adam, every latent's decoder (all its slots) is rescaled to unit norm, so the selection compares like
with like.

Everything here is a deterministic function of its inputs, which is what lets a resumed run end equal to an
uninterrupted one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from jaxtyping import Float
from torch import Tensor

from sae._bases import auxk_loss
from sae.transcoder import Codes, Transcoders

CODE_KINDS = ("batchtopk", "topk")


def select_codes(pre: Float[Tensor, "n m"], k: int, how: Literal["batchtopk", "topk"]) -> Codes:
    """The training codes of one layer from its pre-activations (values keep their gradient; only positive
    pre-activations are kept)."""
    n, m = pre.shape
    flat = pre.detach().flatten()
    if how == "batchtopk":
        idx = flat.topk(min(k * n, flat.numel()), sorted=False).indices
    elif how == "topk":
        idx = (pre.detach().topk(min(k, m), dim=-1).indices + torch.arange(n, device=pre.device)[:, None] * m).flatten()
    else:
        raise ValueError(f"codes must be one of {CODE_KINDS}, got {how!r}")
    idx = idx[flat[idx] > 0]
    return Codes.from_flat(idx, pre, n, m)


def aux_codes(pre: Float[Tensor, "n m"], dead: Tensor, k_aux: int) -> Codes | None:
    """Codes of the dead latents' top `k_aux` positive pre-activations per row (None when none is dead)."""
    dead_idx = dead.nonzero().flatten()
    if not len(dead_idx):
        return None
    n, m = pre.shape
    sub = pre.detach()[:, dead_idx]
    top = sub.topk(min(k_aux, len(dead_idx)), dim=-1)
    cols = dead_idx[top.indices]
    idx = (cols + torch.arange(n, device=pre.device)[:, None] * m).flatten()
    idx = idx[top.values.flatten() > 0]
    return Codes.from_flat(idx, pre, n, m)


def lr_at(step: int, steps: int, lr: float, warmup: int, decay: int) -> float:
    """Linear warm-up over `warmup` steps, constant, linear decay to 0 over the last `decay` steps."""
    f = 1.0
    if warmup and step < warmup:
        f = (step + 1) / warmup
    if decay and step >= steps - decay:
        f = min(f, (steps - step) / decay)
    return lr * f


@dataclass
class StepConfig:
    """What a step needs besides the data (fixed for a run)."""

    k: int
    codes: str = "batchtopk"
    k_aux: int = 256
    auxk_coefficient: float = 1.0
    dead_window: int = 1000
    max_grad_norm: float = 1.0


def train_step(
    tc: Transcoders,
    opt: torch.optim.Optimizer,
    xs: Float[Tensor, "layer n d"],
    ys: Float[Tensor, "layer n d"],
    since_fired: Tensor,
    cfg: StepConfig,
    lr: float,
) -> dict[str, float]:
    """One step on the MLP inputs `xs` and (scaled) outputs `ys` of the same rows; updates `since_fired`
    ([layer, m], steps since each latent last fired) in place. Returns the losses and the per-layer FVU of
    the training codes (mean over layers)."""
    d = tc.d_model
    codes, aux = [], []
    for i in range(tc.n_layers):
        pre = tc.pre_acts(i, xs[i])
        codes.append(select_codes(pre, cfg.k, cfg.codes))  # type: ignore[arg-type]
        aux.append(aux_codes(pre, since_fired[i] >= cfg.dead_window, cfg.k_aux) if cfg.auxk_coefficient else None)
    recon = tc.reconstruct(codes, xs)
    errs = [(ys[i] - recon[i]).pow(2).sum(-1).mean() / d for i in range(tc.n_layers)]
    mse = torch.stack(errs).mean()
    aux_total = mse.new_zeros(())
    residual = [(ys[i] - recon[i]).detach() for i in range(tc.n_layers)]
    for i, c in enumerate(aux):
        if c is None:
            continue
        slots = tc.slots(i)
        target = torch.stack([residual[s] for s in slots], 1).flatten(1)
        n_dead = int((since_fired[i] >= cfg.dead_window).sum())
        got = tc.decode_codes(i, c).flatten(1)
        # per output layer, like the main term: a CLT's layer-0 latents would otherwise weigh 30 layers' error
        aux_total = aux_total + auxk_loss("sae_lens", cfg.auxk_coefficient, target, got, n_dead, cfg.k_aux) / (
            d * len(slots)
        )
    aux_total = aux_total / tc.n_layers
    loss = mse + aux_total
    if not torch.isfinite(loss):
        return {"loss": float(loss.detach()), "mse": float(mse.detach()), "auxk": float(aux_total.detach())}
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.max_grad_norm:
        torch.nn.utils.clip_grad_norm_(tc.parameters(), cfg.max_grad_norm)
    opt.step()
    tc.normalize_decoder_()
    with torch.no_grad():
        for i, c in enumerate(codes):
            fired = torch.zeros(tc.d_transcoder, dtype=torch.bool, device=since_fired.device)
            fired[c.cols[c.vals.detach() > 0].to(fired.device)] = True
            since_fired[i] += 1
            since_fired[i][fired] = 0
        var = torch.stack([(y - y.mean(0)).pow(2).sum(-1).mean() / d for y in ys]).clamp_min(1e-12)
        fvu = float((torch.stack(errs).detach() / var).mean())
    return {"loss": float(loss.detach()), "mse": float(mse.detach()), "auxk": float(aux_total.detach()), "fvu": fvu}
