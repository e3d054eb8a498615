"""Residual-stream analyses over an `ActivationCache`: logit lens, decomposition, direct logit attribution.

Names, arguments and semantics follow TransformerLens's `ActivationCache` so that its tutorials carry
over: `accumulated_resid`, `decompose_resid`, `stack_head_results`, `apply_ln_to_stack`, `logit_attrs`.

    logits, cache = model.run_with_cache(prompt)            # names=None caches every (non on-demand) hook
    lens = cache.accumulated_resid(apply_ln=True, pos_slice=-1) @ model.W_U + model.b_U   # [layer+1, batch, vocab]
    parts, labels = cache.decompose_resid(pos_slice=-1, return_labels=True)
    dla = cache.logit_attrs(parts, " Paris", incorrect_tokens=" Rome", pos_slice=-1)      # [component, batch]

Where we differ from TransformerLens, and why:
- Our norms keep their weights (we hook the real HF modules, nothing is folded). `apply_ln_to_stack`
  therefore returns what TL returns (centred and divided by the cached scale, *before* the norm's
  weight), and `logit_attrs` folds the final norm's weight into the unembedding directions itself:
  it gives the numbers TL gives on a `fold_ln=True` model. On an unfolded TL model TL's `logit_attrs`
  leaves the weight out, which is not a decomposition of the logits.
- `logit_attr_bias` returns the part of the logit (difference) no component owns (the final norm's
  bias and `b_U`), so that `logit_attrs(decompose_resid(...)).sum(0) + logit_attr_bias(...)` equals the
  model's logit difference exactly: the cached scale is the one the forward used (frozen scale).
- Layer indices: `layer` names the input of a block, 0..n_layers, where n_layers (also None and -1) is
  the unembedding; other negative values count back from there (-2 is the input of the last block).
- Gemma 3's sandwich norms: a head's result is taken through the post-attention norm with its cached
  scale, so that per-head results still sum (with the output bias) to `hook_attn_out`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from interp.hooks import norms

PosSlice = int | tuple | slice | Sequence[int] | Tensor | None


def apply_pos(t: Tensor, pos_slice: PosSlice, dim: int = -2) -> Tensor:
    """TransformerLens's slice convention on one axis: None keeps all, an int indexes (drops the axis),
    a tuple is `slice(*tuple)`, a list or tensor gathers those positions."""
    if pos_slice is None:
        return t
    index: object = pos_slice
    if isinstance(pos_slice, tuple):
        index = slice(*pos_slice)
    elif isinstance(pos_slice, (list, Tensor)):
        index = torch.as_tensor(pos_slice, device=t.device)
    elif not isinstance(pos_slice, (int, slice)):
        raise ValueError(f"pos_slice must be None, an int, a tuple, a slice, a list or a tensor; got {pos_slice!r}")
    where = [slice(None)] * t.ndim
    where[dim] = index
    return t[tuple(where)]


class CacheAnalysis:
    """Mixin for `ActivationCache`: needs `self.model` (a `HookedModel`) and `self[...]`."""

    model: object

    # ------------------------------------------------------------------ helpers
    def _need_model(self, what: str):
        if self.model is None:
            raise ValueError(f"{what} needs the model (layer count, norms, unembedding); use model.run_with_cache")
        return self.model

    def _input_layer(self, layer: int | None) -> int:
        """A block-input index 0..n_layers (n_layers: the unembedding) from None, -1, -k or k."""
        n = self._need_model("a layer index").n_layers
        if layer is None:
            return n
        if layer < 0:
            layer += n + 1
        if not 0 <= layer <= n:
            raise ValueError(
                f"layer {layer} is out of range: use 0..{n} (n_layers is the unembedding), or -1..-{n + 1}"
            )
        return layer

    def _norm_prefix(self, layer: int, mlp_input: bool) -> str:
        if layer == self.model.n_layers:
            if mlp_input:
                raise ValueError("mlp_input=True has no meaning at the unembedding (layer = n_layers)")
            return "ln_final"
        return f"blocks.{layer}.ln{2 if mlp_input else 1}"

    def _cached_scale(self, prefix: str) -> Tensor:
        name = f"{prefix}.hook_scale"
        if name not in self:
            raise KeyError(f"{name!r} is not cached; run_with_cache(names=None) or name it to use apply_ln")
        return self[name]

    # ------------------------------------------------------------------ norms
    def apply_ln_to_stack(
        self,
        residual_stack: Tensor,
        layer: int | None = None,
        mlp_input: bool = False,
        pos_slice: PosSlice = None,
        batch_slice: PosSlice = None,
        has_batch_dim: bool = True,
        recompute_ln: bool = False,
    ) -> Tensor:
        """Treat each component of a stack [component, batch, pos, d_model] as input to one norm.

        With the cached scale of that norm (frozen): centred (LayerNorm only) and divided by it, before
        the norm's weight, as TransformerLens does. With `recompute_ln=True` at the unembedding, each
        component goes through the final norm module itself (its own statistics, its weight and bias):
        the logit lens.
        """
        model = self._need_model("apply_ln_to_stack")
        layer = self._input_layer(layer)
        prefix = self._norm_prefix(layer, mlp_input)
        module, spec = model.norm_module(prefix)
        if has_batch_dim and batch_slice is not None:
            residual_stack = apply_pos(residual_stack, batch_slice, dim=1)
        if recompute_ln and prefix == "ln_final":
            with torch.no_grad():
                return module(residual_stack.to(model.dtype)).to(residual_stack.dtype)
        scale = apply_pos(self._cached_scale(prefix), pos_slice)
        if has_batch_dim and batch_slice is not None:
            scale = apply_pos(scale, batch_slice, dim=0)
        centred = residual_stack - residual_stack.mean(-1, keepdim=True) if spec.centres else residual_stack
        return centred / scale.to(centred.dtype)

    # ------------------------------------------------------------------ stacks
    def accumulated_resid(
        self,
        layer: int | None = None,
        incl_mid: bool = False,
        apply_ln: bool = False,
        pos_slice: PosSlice = None,
        mlp_input: bool = False,
        return_labels: bool = False,
    ):
        """The residual stream at the input of every block up to `layer`: [component, batch, pos, d_model].

        Labels "0_pre", "0_mid", ..., "final_post" (the stream the final norm reads). With
        `apply_ln=True` at the unembedding each entry goes through the final norm (the logit lens:
        multiply by `model.W_U` and add `model.b_U` to read logits); at an inner layer it is divided by
        that layer's cached ln1 scale (ln2 with `mlp_input`).
        """
        model = self._need_model("accumulated_resid")
        layer = self._input_layer(layer)
        parts, labels = [], []
        for l in range(layer + 1):
            if l == model.n_layers:
                parts.append(self["resid_post", l - 1])
                labels.append("final_post")
                continue
            parts.append(self["resid_pre", l])
            labels.append(f"{l}_pre")
            if (incl_mid and l < layer) or (mlp_input and l == layer):
                parts.append(self["resid_mid", l])
                labels.append(f"{l}_mid")
        stack = torch.stack([apply_pos(p, pos_slice) for p in parts])
        if apply_ln:
            stack = self.apply_ln_to_stack(
                stack, layer, mlp_input=mlp_input, pos_slice=pos_slice, recompute_ln=layer == model.n_layers
            )
        return (stack, labels) if return_labels else stack

    def decompose_resid(
        self,
        layer: int | None = None,
        mlp_input: bool = False,
        mode: Literal["all", "mlp", "attn"] = "all",
        apply_ln: bool = False,
        pos_slice: PosSlice = None,
        incl_embeds: bool = True,
        return_labels: bool = False,
    ):
        """The residual stream at the input of `layer` split into what wrote it: embeddings, then every
        earlier block's `attn_out` and `mlp_out` ([component, batch, pos, d_model]). The components sum to
        `resid_pre` of that layer (to the final residual at the unembedding)."""
        if mode not in ("all", "mlp", "attn"):
            raise ValueError(f"mode must be 'all', 'mlp' or 'attn', not {mode!r}")
        self._need_model("decompose_resid")
        layer = self._input_layer(layer)
        parts, labels = [], []
        if incl_embeds:
            parts.append(self["hook_embed"])
            labels.append("embed")
            if "hook_pos_embed" in self:  # GPT-2's is [1, pos, d_model]: broadcast over the batch
                parts.append(self["hook_pos_embed"].expand_as(self["hook_embed"]))
                labels.append("pos_embed")
        for l in range(layer):
            if mode != "mlp":
                parts.append(self["attn_out", l])
                labels.append(f"{l}_attn_out")
            if mode != "attn":
                parts.append(self["mlp_out", l])
                labels.append(f"{l}_mlp_out")
        if mlp_input and mode != "mlp":
            parts.append(self["attn_out", layer])
            labels.append(f"{layer}_attn_out")
        stack = torch.stack([apply_pos(p, pos_slice) for p in parts])
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input=mlp_input, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def head_results(self, layer: int) -> Tensor:
        """[batch, pos, head, d_model]: what each head of one layer adds to the residual stream.

        `attn.hook_result` when it was cached, otherwise computed from the cached `attn.hook_z` and the
        output projection. With sandwich norms it is carried through the post-attention norm (its cached
        scale and weight), so `sum over heads + the projection bias's share == hook_attn_out`.
        """
        model = self._need_model("head_results")
        layer = self._layer(layer)
        name = f"blocks.{layer}.attn.hook_result"
        if name in self:
            result = self[name]
        else:
            w_o = model.W_O_layer(layer)
            result = torch.einsum("...hd,hdm->...hm", self["z", layer], w_o.to(self["z", layer].dtype))
        if model.adapter.sandwich_norms:
            module, spec = model.norm_module(f"blocks.{layer}.ln1_post")
            scale = self[f"blocks.{layer}.ln1_post.hook_scale"].unsqueeze(-2)
            result = result.float() / scale * norms.gain(module, spec)
        return result

    def stack_head_results(
        self,
        layer: int | None = -1,
        return_labels: bool = False,
        incl_remainder: bool = False,
        pos_slice: PosSlice = None,
        apply_ln: bool = False,
    ):
        """Every head's result in the blocks before `layer`: [layer*head, batch, pos, d_model], labels "L0H3".

        `incl_remainder` appends the rest of the residual stream (embeddings, MLPs, output biases).
        """
        model = self._need_model("stack_head_results")
        layer = self._input_layer(layer)
        parts, labels = [], []
        for l in range(layer):
            parts.append(apply_pos(self.head_results(l), pos_slice, dim=-3))
            labels += [f"L{l}H{h}" for h in range(model.n_heads)]
        if parts:
            heads = torch.cat(parts, dim=-2).movedim(-2, 0)
        else:
            heads = self["hook_embed"].new_zeros((0, *apply_pos(self["hook_embed"], pos_slice).shape))
        if incl_remainder:
            total = self["resid_post", layer - 1] if layer > 0 else self.decompose_resid(0).sum(0)
            heads = torch.cat([heads, (apply_pos(total, pos_slice) - heads.sum(0))[None]])
            labels.append("remainder")
        if apply_ln:
            heads = self.apply_ln_to_stack(heads, layer, pos_slice=pos_slice)
        return (heads, labels) if return_labels else heads

    # ------------------------------------------------------------------ logits
    def logit_attrs(
        self,
        residual_stack: Tensor,
        tokens,
        incorrect_tokens=None,
        pos_slice: PosSlice = None,
        batch_slice: PosSlice = None,
        has_batch_dim: bool = True,
    ) -> Tensor:
        """Direct logit attribution: each component's contribution to the logit of `tokens` (minus that
        of `incorrect_tokens`), through the final norm with its cached scale: [component, *batch_and_pos].

        `tokens`: a string (one token), an int, or a tensor of ids shaped like the stack's batch/pos axes.
        """
        model = self._need_model("logit_attrs")
        directions = model.tokens_to_residual_directions(tokens)
        if incorrect_tokens is not None:
            wrong = model.tokens_to_residual_directions(incorrect_tokens)
            if wrong.shape != directions.shape:
                raise ValueError(
                    f"tokens and incorrect_tokens have different shapes ({tuple(directions.shape[:-1])} vs "
                    f"{tuple(wrong.shape[:-1])}); pass one incorrect token per correct token"
                )
            directions = directions - wrong
        scaled = self.apply_ln_to_stack(
            residual_stack, -1, pos_slice=pos_slice, batch_slice=batch_slice, has_batch_dim=has_batch_dim
        )
        return (scaled * directions.to(scaled.dtype)).sum(-1)

    def logit_attr_bias(self, tokens, incorrect_tokens=None) -> Tensor:
        """The part of the logit (difference) of `tokens` that no residual component owns: the final norm's
        bias through the unembedding, plus `b_U`. Adding it to the summed `logit_attrs` of a full
        decomposition gives the model's logit (difference) exactly."""
        model = self._need_model("logit_attr_bias")
        return model.logit_bias_terms(tokens, incorrect_tokens)
