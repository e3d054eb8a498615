"""Measurements to attribute besides a loss: what interpretability finds (an SAE latent's activation, a hook's
direction), as per-example functions `measure(hf_model, ids, mask) -> [batch]` for `GradientIndex.query_measurement`.

    index = GradientIndex("runs/grads_smollm2")
    fires = sae_latent(index.model, sae, latent=1234)           # the latent at the last position of each prompt
    top = index.query_measurement(fires, "tokens:prompts.safetensors")   # training rows that raise it most

A measurement's query vector is the gradient of `-measure` (a loss to lower), so with the store's helpfulness
sign a positive score says: one more gradient step on that training row *raises* the measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

Measure = Callable[[Any, Tensor, Tensor], Tensor]


def _at_hook(model: Any, hook: str, hf: Any, ids: Tensor, mask: Tensor) -> Tensor:
    """The hook's activation [batch, pos, ...] of one forward of `hf` (the wrapped model of `model`)."""
    seen: dict[str, Tensor] = {}

    def grab(t: Tensor, point: Any) -> None:
        seen["x"] = t

    if hf is not model.hf_model:
        raise ValueError("the measurement was made for another model than the one the index runs")
    with model.hooks(fwd_hooks=[(hook, grab)]):
        hf(input_ids=ids, attention_mask=mask)
    return seen["x"]


def _last(x: Tensor, mask: Tensor, position: int | None) -> Tensor:
    if position is not None:
        return x[:, position]
    last = mask.long().sum(1) - 1  # each row's last real token
    return x[torch.arange(len(x)), last]


def sae_latent(model: Any, sae: Any, latent: int, position: int | None = None) -> Measure:
    """Latent `latent`'s activation (the SAE's `encode`, differentiable) at `position` (None: each prompt's last
    token) of the SAE's hook."""
    hook = sae.cfg.metadata.hook_name
    if not 0 <= latent < sae.cfg.d_sae:
        raise ValueError(f"latent {latent} is not one of the SAE's 0..{sae.cfg.d_sae - 1}")

    def measure(hf: Any, ids: Tensor, mask: Tensor) -> Tensor:
        x = _last(_at_hook(model, hook, hf, ids, mask), mask, position).float()
        return sae.encode(x)[:, latent]

    return measure


def direction(model: Any, hook: str, vector: Tensor, position: int | None = None) -> Measure:
    """The hook's activation projected on `vector` (a probe, a steering or decoder direction) at `position`."""
    v = vector.detach().float()

    def measure(hf: Any, ids: Tensor, mask: Tensor) -> Tensor:
        return _last(_at_hook(model, hook, hf, ids, mask), mask, position).float() @ v.to(ids.device)

    return measure


def as_loss(measure: Measure) -> Measure:
    """`-measure`: the loss whose gradient is the measurement's query vector."""

    def loss(hf: Any, ids: Tensor, mask: Tensor) -> Tensor:
        return -measure(hf, ids, mask)

    return loss
