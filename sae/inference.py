"""Inference codes as sae-lens ships them: a trained SAE turned into the object SAEBench evaluates.

BatchTopK-family SAEs (batchtopk, c2r, coh_batchtopk, poly_batchtopk, matryoshka_batchtopk) select
the k·B largest pre-activations over a *batch* while training, so a row's code depends on the other
rows it is batched with (an 81x attention-sink row takes hundreds of latents from its neighbours).
sae-lens ships them as JumpReLU SAEs whose threshold is the running estimate of the smallest selected
activation (`topk_threshold`), and SAEBench evaluates that: a row's code is then a function of the row.
`to_inference` does the same conversion in memory:

- SAEs whose sae-lens training class has an inference class (relu/standard, topk, batchtopk -> jumprelu,
  and the loss-only variants c2r*, coh* built on them) become that inference class, through sae-lens's
  own `process_state_dict_for_saving_inference` + `get_inference_sae_cfg_dict` (so what we score is
  what `save_inference_model` would write);
- PolySAE (its decoder has no sae-lens inference class) stays its own class, in eval mode, with the
  batch-level activation replaced by the same thresholded ReLU (`ThresholdReLU`).

Batch-level top-k stays available as an explicit option: evaluate the training object itself
(`load_sae(path, inference=False)`), whose eval-mode `encode` still selects over the batch.

    >>> inf = to_inference(training_sae)          # a JumpReLUSAE for batchtopk / c2r
    >>> codes_chunk_free = inf.encode(x)
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import Tensor, nn


def is_batch_topk(sae: Any) -> bool:
    """True for SAEs that select latents over the batch in training (they carry `topk_threshold`)."""
    return hasattr(sae, "topk_threshold")


class ThresholdReLU(nn.Module):
    """JumpReLU with one global threshold θ: relu(h)·[h > θ], applied to the (possibly decoder-norm
    rescaled) pre-activation the BatchTopK selection saw, as sae-lens's JumpReLU inference SAE does."""

    def __init__(self, threshold: Tensor):
        super().__init__()
        self.register_buffer("threshold", threshold.detach().clone().reshape(()))

    def forward(self, h: Tensor) -> Tensor:
        return h.relu() * (h > self.threshold)


def _sae_lens_inference(sae: Any) -> Any | None:
    """sae-lens's inference SAE for a training SAE, or None when its architecture has none."""
    from sae_lens.registry import SAE_CLASS_REGISTRY
    from sae_lens.saes.sae import TrainingSAE

    cfg_dict = sae.cfg.get_inference_sae_cfg_dict()
    arch = cfg_dict.get("architecture")
    if arch not in SAE_CLASS_REGISTRY or issubclass(SAE_CLASS_REGISTRY[arch][0], TrainingSAE):
        return None
    cls, cfg_cls = SAE_CLASS_REGISTRY[arch]
    state = {k: v.detach().clone() for k, v in sae.state_dict().items()}
    sae.process_state_dict_for_saving_inference(state)
    inf = cls(cfg_cls.from_dict(cfg_dict))
    inf.load_state_dict(state)
    return inf


@torch.no_grad()
def to_inference(sae: Any) -> Any:
    """The inference form of a (training) SAE, in eval mode; an inference SAE is returned as is.

    Codes of the result depend only on their own row (test: one row at a time equals 8,192 at once)."""
    from sae_lens.saes.sae import TrainingSAE

    if not isinstance(sae, TrainingSAE):
        return sae.eval()
    if getattr(sae, "linear_atoms", None) is None:
        inf = _sae_lens_inference(sae)
        if inf is not None:
            inf.cfg.metadata = copy.deepcopy(sae.cfg.metadata)
            return inf.eval()
    out = copy.deepcopy(sae).eval()
    if is_batch_topk(out):
        out.activation_fn = ThresholdReLU(out.topk_threshold)
    return out


def threshold_of(sae: Any) -> float | None:
    """The global JumpReLU threshold a BatchTopK-family SAE ships with (None for others)."""
    if is_batch_topk(sae):
        return float(sae.topk_threshold)
    if isinstance(getattr(sae, "activation_fn", None), ThresholdReLU):
        return float(sae.activation_fn.threshold)
    thr = getattr(sae, "threshold", None)
    if isinstance(thr, Tensor) and thr.numel() and bool((thr == thr.flatten()[0]).all()):
        return float(thr.flatten()[0])
    return None


@torch.no_grad()
def calibrate_threshold(sae: Any, chunks: Any, k: float, slack: int = 4) -> dict[str, float]:
    """Set a BatchTopK-family SAE's shipped threshold so that its JumpReLU codes fire k times per row on
    average over the rows in `chunks` (an iterable of [n, d_in] tensors, in the SAE's input units).

    The threshold sae-lens ships is a running average (rate 0.01) of the smallest activation each batch
    selected: after a few hundred steps it still lags the encoder, and shipped L0 can be 5x k (issue 24).
    Over N rows, batch top-k keeps the k·N largest pre-activations; the threshold that keeps exactly those
    is the k·N-th largest value, which is what this sets. Each chunk contributes its `slack`·k·n largest
    values (so memory is O(k·N), not O(N·d_sae)); if any chunk's kept values all lie above the result
    (the chunk could hold more), the chunk is recomputed with no cut (exact either way).

    Returns {"threshold_trained", "threshold", "rows"}; the SAE's `topk_threshold` is updated in place."""
    if not is_batch_topk(sae):
        raise ValueError(f"{type(sae).__name__} has no batch-level threshold to calibrate")
    was_training = sae.training
    sae.eval()
    kept, floors, xs, n = [], [], [], 0
    for x in chunks:
        x = x.to(sae.W_enc.device, sae.W_enc.dtype)
        _, pre = sae.encode_with_hidden_pre(x)
        flat = pre.relu().flatten()
        m = min(flat.numel(), max(1, int(math.ceil(slack * k * len(x)))))
        top = flat.topk(m).values
        kept.append(top)
        floors.append(float(top[-1]) if m < flat.numel() else -math.inf)
        xs.append(x)
        n += len(x)
    if not n:
        raise ValueError("no rows to calibrate the threshold on")
    want = max(1, int(round(k * n)))
    vals = torch.cat(kept)
    theta = float(vals.topk(min(want, vals.numel())).values[-1])
    for i, floor in enumerate(floors):  # a chunk whose cut reaches the threshold may hold more values above it
        if floor >= theta:
            _, pre = sae.encode_with_hidden_pre(xs[i])
            kept[i] = pre.relu().flatten()
    vals = torch.cat(kept)
    theta = float(vals.topk(min(want, vals.numel())).values[-1])
    before = float(sae.topk_threshold)
    sae.topk_threshold.fill_(theta)
    sae.train(was_training)
    return {"threshold_trained": before, "threshold": theta, "rows": n}
