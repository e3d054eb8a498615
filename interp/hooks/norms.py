"""The normalisation layers' scale and normalised input, read off the real HF norm modules.

HF norms return `affine(normalise(x))` in one call, so the scale never exists as a tensor of their
forward. We derive it from the module's own input with the module's own epsilon, which matches
TransformerLens's `hook_scale` / `hook_normalized`:

- LayerNorm (GPT-2, GPT-NeoX; OLMo's has no weight, Cohere's no bias): scale = sqrt(var(x) + eps);
  normalized = (x - mean(x)) / scale.
- RMSNorm (Llama family): scale = sqrt(mean(x^2) + eps); normalized = x / scale (then `w * normalized`).
- Gemma's RMSNorm: the same, then `normalized * (1 + w)`.

`normalized` is *before* the norm's weight and bias, as in TransformerLens. Reading either hook leaves
the forward untouched; a hook that returns a replacement makes the module output
`affine(centred(x) / new_scale)` or `affine(new_normalized)` instead (a frozen-scale run, for example).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

NormKind = Literal["layernorm", "rms", "rms_one_plus"]


@dataclass(frozen=True)
class NormSpec:
    """What one HF norm module computes, in the terms above."""

    kind: NormKind
    eps: float

    @property
    def centres(self) -> bool:
        """Whether the norm subtracts the mean first (LayerNorm) or not (RMSNorm)."""
        return self.kind == "layernorm"


def norm_spec(module: nn.Module) -> NormSpec:
    """Recognise a norm module by its type; a clear error for one we do not know."""
    if isinstance(module, nn.LayerNorm):
        return NormSpec("layernorm", float(module.eps))
    name = type(module).__name__
    if name in ("OlmoLayerNorm", "CohereLayerNorm"):  # F.layer_norm without parameters (OLMo, eps 1e-5 fixed)
        return NormSpec("layernorm", float(getattr(module, "variance_epsilon", 1e-5)))
    if "RMSNorm" in name:
        eps = getattr(module, "variance_epsilon", None)
        eps = getattr(module, "eps", 1e-6) if eps is None else eps
        return NormSpec("rms_one_plus" if name.startswith("Gemma") else "rms", float(eps))
    raise ValueError(f"unknown norm module {name}: hook_scale/hook_normalized support LayerNorm and RMSNorm")


def _centred(spec: NormSpec, x: torch.Tensor) -> torch.Tensor:
    x = x.float()
    return x - x.mean(-1, keepdim=True) if spec.centres else x


def scale_of(spec: NormSpec, x: torch.Tensor) -> torch.Tensor:
    """[..., 1]: the factor the norm divides its (centred) input by, in float32 like HF does."""
    return (_centred(spec, x).pow(2).mean(-1, keepdim=True) + spec.eps).sqrt()


def normalized_of(spec: NormSpec, x: torch.Tensor, scale: torch.Tensor | None = None) -> torch.Tensor:
    """[..., d]: the centred input divided by the scale (before the affine weight), float32."""
    return _centred(spec, x) / (scale_of(spec, x) if scale is None else scale)


def affine(module: nn.Module, spec: NormSpec, normalized: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The module's output computed from a (possibly edited) normalised input."""
    if spec.kind == "layernorm":
        weight, bias_ = getattr(module, "weight", None), getattr(module, "bias", None)
        if type(module).__name__ == "CohereLayerNorm":  # weight applied in float32, then cast
            return (weight.float() * normalized).to(dtype)
        out = normalized.to(dtype)
        if weight is not None:
            out = out * weight
        return out + bias_ if bias_ is not None else out
    if spec.kind == "rms":
        return module.weight * normalized.to(dtype)
    return (normalized * (1.0 + module.weight.float())).to(dtype)


def gain(module: nn.Module, spec: NormSpec) -> torch.Tensor:
    """[d]: the per-channel multiplier the norm applies after normalising (1 + w for Gemma)."""
    w = getattr(module, "weight", None)
    if w is None:  # a norm without parameters (OLMo)
        return torch.ones(module.normalized_shape)
    w = w.detach()
    return 1.0 + w.float() if spec.kind == "rms_one_plus" else w.float()


def bias(module: nn.Module) -> torch.Tensor | None:
    """[d] or None: the norm's additive bias (LayerNorm only)."""
    b = getattr(module, "bias", None)
    return None if b is None else b.detach().float()
