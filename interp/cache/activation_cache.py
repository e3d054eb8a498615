"""`ActivationCache`: hook name -> tensor, in memory, with the helpers analyses reach for.

Analyses are plain functions over this mapping. Keys are full hook names; `cache["resid_post", 3]` is a
TransformerLens-style shorthand for `cache["blocks.3.hook_resid_post"]`; negative layers count from the
end (`cache["resid_post", -1]`), and `cache["scale", 2, "ln1"]` is `blocks.2.ln1.hook_scale`. The
residual-stream analyses (logit lens, decomposition, direct logit attribution) live in
`interp.cache.analysis` and are methods of the cache.

Axis glossary used across the toolkit: batch, pos (token position), layer, head, d_model, d_head, d_mlp,
query_pos / key_pos (attention), row (one token of one sequence, in stores).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

import torch
from torch import Tensor

from interp.cache.analysis import CacheAnalysis
from interp.cache.decomposition import DecompositionMixin

_LAYER = re.compile(r"^blocks\.(\d+)\.(.+)$")
_SHORT = {
    "resid_pre": "hook_resid_pre",
    "resid_mid": "hook_resid_mid",
    "resid_post": "hook_resid_post",
    "attn_out": "hook_attn_out",
    "mlp_out": "hook_mlp_out",
    "q": "attn.hook_q",
    "k": "attn.hook_k",
    "v": "attn.hook_v",
    "z": "attn.hook_z",
    "rot_q": "attn.hook_rot_q",
    "rot_k": "attn.hook_rot_k",
    "attn_scores": "attn.hook_attn_scores",
    "pattern": "attn.hook_pattern",
    "attn": "attn.hook_pattern",  # TransformerLens's alias: cache["attn", l] is the pattern
    "pre": "mlp.hook_pre",
    "pre_linear": "mlp.hook_pre_linear",
    "post": "mlp.hook_post",
    "result": "attn.hook_result",
}
_NORMS = ("ln1", "ln2", "ln1_post", "ln2_post", "ln_final")


def full_name(kind: str, layer: int | None = None, sub: str | None = None) -> str:
    """`full_name("resid_post", 3)` -> "blocks.3.hook_resid_post"; full names pass through.

    A third part names a norm, as in TransformerLens: `full_name("scale", 2, "ln1")` ->
    "blocks.2.ln1.hook_scale"; `full_name("scale", None, "ln_final")` -> "ln_final.hook_scale".
    """
    if sub in _NORMS:
        hook = f"{sub}.hook_{kind}"
        return hook if layer is None else f"blocks.{layer}.{hook}"
    if layer is None:
        return kind
    return f"blocks.{layer}.{_SHORT.get(kind, kind)}"


class ActivationCache(DecompositionMixin, CacheAnalysis, Mapping[str, Tensor]):
    """Activations of one forward pass.

    Besides the tensors it keeps the `tokens` [batch, pos] and `attention_mask` [batch, pos] of the run,
    so padded positions can be dropped (`rows`), and the `model` that produced them (None for a cache
    built by hand), which the analyses need for layer counts, norms and the unembedding.
    """

    def __init__(
        self,
        data: dict[str, Tensor],
        tokens: Tensor | None = None,
        attention_mask: Tensor | None = None,
        model=None,
    ):
        self._data = dict(data)
        self.tokens = tokens
        self.attention_mask = attention_mask
        self.model = model
        self.has_batch_dim = True

    def _layer(self, layer: int) -> int:
        """A layer index with negative values counted from the end (needs the model's layer count)."""
        if layer >= 0:
            return layer
        if self.model is None:
            raise KeyError(f"layer {layer}: negative layers need the model's layer count; this cache has no model")
        if layer < -self.model.n_layers:
            raise KeyError(f"layer {layer} is out of range for a model with {self.model.n_layers} layers")
        return layer + self.model.n_layers

    def __getitem__(self, key: str | tuple) -> Tensor:
        if isinstance(key, tuple):
            kind, layer, *sub = key
            name = full_name(kind, None if layer is None else self._layer(layer), *sub)
        else:
            name = key
        try:
            return self._data[name]
        except KeyError:
            raise KeyError(f"{name!r} is not in this cache; it holds: {', '.join(self._data) or '(nothing)'}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {tuple(v.shape)}" for k, v in list(self._data.items())[:4])
        more = f", ... ({len(self)} in all)" if len(self) > 4 else ""
        return f"ActivationCache({shapes}{more})"

    def layers_of(self, kind: str) -> list[int]:
        """Layers for which `kind` (e.g. "resid_post" or "hook_resid_post") is cached, ascending."""
        suffix = _SHORT.get(kind, kind)
        found = [(int(m[1]), m[2]) for m in map(_LAYER.match, self._data) if m]
        return sorted(layer for layer, rest in found if rest == suffix)

    def stack(self, kind: str, layers: list[int] | None = None) -> Tensor:
        """Stack one hook kind over layers: [layer, ...]. `kind` as in `full_name`."""
        layers = self.layers_of(kind) if layers is None else layers
        if not layers:
            raise KeyError(f"no cached layers of {kind!r}; cached hooks: {', '.join(self._data)}")
        return torch.stack([self[kind, self._layer(layer)] for layer in layers])

    def rows(self, name: str) -> Tensor:
        """Tensor of one hook flattened over (batch, pos) with padded positions dropped: [row, ...]."""
        t = self[name]
        if self.attention_mask is None:
            return t.flatten(0, 1)
        return t[self.attention_mask.to(torch.bool)]

    def to(self, device: str | torch.device) -> ActivationCache:
        """A copy with every tensor moved to `device`."""
        move = {k: v.to(device) for k, v in self._data.items()}
        out = ActivationCache(move, self.tokens, self.attention_mask, self.model)
        out.has_batch_dim = self.has_batch_dim
        return out

    def remove_batch_dim(self) -> ActivationCache:
        """Drop the batch axis of a batch-of-one cache, in place (returns self), as TransformerLens does.

        `tokens` and `attention_mask` keep theirs. The residual analyses (`accumulated_resid`, ...) expect
        the batch axis: run them on a cache that has it.
        """
        if not self.has_batch_dim:
            return self
        sizes = {v.shape[0] for v in self._data.values() if v.ndim > 0}
        if sizes - {1}:
            raise ValueError(f"remove_batch_dim needs a batch of one; this cache has batch sizes {sorted(sizes)}")
        self._data = {k: (v[0] if v.ndim > 0 else v) for k, v in self._data.items()}
        self.has_batch_dim = False
        return self


def split_heads(t: Tensor, n_heads: int) -> Tensor:
    """[..., n_heads * d_head] -> [..., n_heads, d_head]."""
    return t.unflatten(-1, (n_heads, -1))


def merge_heads(t: Tensor) -> Tensor:
    """[..., n_heads, d_head] -> [..., n_heads * d_head]."""
    return t.flatten(-2)
