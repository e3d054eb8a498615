"""TransformerLens-named weights of a `HookedModel`, read from the HF parameters (nothing is folded).

    model.W_Q.shape        # [layer, head, d_model, d_head]
    model.W_K.shape        # [layer, kv_head, d_model, d_head]   (grouped-query: n_kv_heads, not n_heads)
    expand_kv(model.W_K)   # [layer, head, d_model, d_head]      each kv head repeated for its query heads
    model.OV[3]            # a TransformerLens FactoredMatrix [head, d_model, d_model] = W_V @ W_O

Per layer the arrays are views of the HF parameters rearranged (`model.layer_weight("W_Q", 3)`); the
`[layer, ...]` properties stack them, which copies (as TransformerLens does). Everything is detached.
Fused projections are split the way the model reads them: GPT-NeoX packs q|k|v per head, GPT-2 packs
q | k | v blocks. Gated MLPs follow TL: `W_gate` is the gate projection (`mlp.hook_pre`), `W_in` the up
projection (`mlp.hook_pre_linear`). `QK` is the bilinear form before rotary embeddings.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from interp.hooks import norms
from interp.hooks.install import out_proj_heads


class MissingWeightError(AttributeError):
    """A weight this architecture does not have (e.g. `W_pos` on a rotary model)."""


def _linear_t(module: nn.Module) -> Tensor:
    """[in, out] for a Linear ([out, in]) or GPT-2's Conv1D (already [in, out])."""
    w = module.weight
    return w if type(module).__name__ == "Conv1D" else w.t()


def _bias(module: nn.Module, size: int) -> Tensor:
    b = getattr(module, "bias", None)
    return b.detach() if b is not None else torch.zeros(size, dtype=module.weight.dtype, device=module.weight.device)


def expand_kv(w: Tensor, n_heads: int | None = None, head_dim: int = -3) -> Tensor:
    """Repeat grouped-query k/v heads so there is one per query head (each kv head serves
    n_heads / n_kv_heads consecutive query heads, as HF's `repeat_kv` does)."""
    n_kv = w.shape[head_dim]
    if n_heads is None or n_heads == n_kv:
        return w
    if n_heads % n_kv:
        raise ValueError(f"{n_heads} query heads do not split evenly over {n_kv} kv heads")
    return w.repeat_interleave(n_heads // n_kv, dim=head_dim)


class WeightsMixin:
    """Weights and unembedding directions for `HookedModel` (needs `hf_model`, `adapter`, sizes)."""

    # ------------------------------------------------------------------ modules
    def _block(self, layer: int, path: str) -> nn.Module:
        return self.hf_model.get_submodule(f"{self.adapter.layers}.{layer}.{path}")

    def norm_module(self, prefix: str) -> tuple[nn.Module, norms.NormSpec]:
        """The HF norm module behind `{prefix}.hook_scale` (e.g. "ln_final", "blocks.3.ln2") and its kind."""
        point = self._by_name.get(f"{prefix}.hook_scale")
        if point is None:
            raise ValueError(f"this model has no norm named {prefix!r}; norms are ln1, ln2 per block and ln_final")
        module = self.hf_model.get_submodule(point.module)
        return module, norms.norm_spec(module)

    @property
    def unembed_module(self) -> nn.Module:
        """The HF output projection (lm_head / embed_out); `model.unembed` is TL's view of it."""
        return self.hf_model.get_output_embeddings()

    # ------------------------------------------------------------------ per layer
    def _qkv(self, layer: int, part: int) -> tuple[Tensor, Tensor]:
        """(W [head, d_model, d_head], b [head, d_head]) of q (0), k (1) or v (2) in one layer."""
        layout, heads = self.adapter.qkv_layout, (self.n_heads if part == 0 else self.n_kv_heads)
        if layout == "separate":
            mod = self._block(layer, self.adapter.qkv[part])
            w = mod.weight.detach().unflatten(0, (heads, -1)).transpose(1, 2)
            return w, _bias(mod, w.shape[0] * w.shape[2]).view(heads, -1)
        mod = self._block(layer, self.adapter.qkv[0])
        if layout == "neox":  # output features per head: [q_h | k_h | v_h]
            w = mod.weight.detach().unflatten(0, (self.n_heads, 3, -1))[:, part].transpose(1, 2)
            return w, _bias(mod, mod.weight.shape[0]).view(self.n_heads, 3, -1)[:, part]
        # q | k | v blocks: q is n_heads * d_head wide, k and v n_kv_heads * d_head (GPT-2, Phi-3, Falcon's MQA)
        sizes = [h * self.d_head for h in (self.n_heads, self.n_kv_heads, self.n_kv_heads)]
        w_all = _linear_t(mod).detach()
        w = w_all.split(sizes, dim=1)[part].unflatten(1, (heads, -1)).transpose(0, 1)
        return w, _bias(mod, w_all.shape[1]).split(sizes)[part].view(heads, -1)

    def W_O_layer(self, layer: int) -> Tensor:
        """[head, d_head, d_model] of one layer (a view of the output projection's weight)."""
        return out_proj_heads(self._block(layer, self.adapter.out_proj), self.n_heads).detach()

    def layer_weight(self, name: str, layer: int) -> Tensor:
        """One layer's slice of a stacked weight (`"W_Q"`, `"b_K"`, `"W_in"`, ...), as a view where possible."""
        a = self.adapter
        qkv = {"Q": 0, "K": 1, "V": 2}
        if name[2:] in qkv and name[0] in "Wb":
            w, b = self._qkv(layer, qkv[name[2:]])
            return w if name[0] == "W" else b
        if name == "W_O":
            return self.W_O_layer(layer)
        if name == "b_O":
            return _bias(self._block(layer, a.out_proj), self.d_model)
        kind = name[2:]
        if kind in ("in", "gate", "out") and name[0] in "Wb":
            return self._mlp_weight(layer, name)
        raise MissingWeightError(f"no layer weight named {name!r}; try W_Q, W_K, W_V, W_O, W_in, W_gate, W_out or b_*")

    def _mlp_weight(self, layer: int, name: str) -> Tensor:
        """W_in / W_gate / W_out (or b_*) of one layer; a fused gate | up projection is split in two halves."""
        a, kind = self.adapter, name[2:]
        if a.moe_router:
            raise MissingWeightError(
                f"{name}: a mixture of experts has no single MLP weight; its experts live in "
                f"{a.layers}.{layer}.{a.mlp}.experts and its router in {a.moe_router}"
            )
        gated = a.mlp_pre_linear is not None or a.gate_up_fused
        if kind == "gate" and not gated:
            raise MissingWeightError(f"{name}: this model's MLP is not gated (no gate projection); use W_in")
        path = a.mlp_down if kind == "out" else (a.mlp_pre_linear or a.mlp_pre) if kind == "in" else a.mlp_pre
        mod = self._block(layer, path)
        w = _linear_t(mod).detach()
        b = _bias(mod, w.shape[1])
        if a.gate_up_fused and kind != "out":  # [gate | up] along the output features
            half = 0 if kind == "gate" else 1
            w, b = w.chunk(2, dim=1)[half], b.chunk(2)[half]
        return w if name[0] == "W" else b

    def _stacked(self, name: str) -> Tensor:
        return torch.stack([self.layer_weight(name, l) for l in range(self.n_layers)])

    # ------------------------------------------------------------------ TL names
    W_Q = property(lambda self: self._stacked("W_Q"), doc="[layer, head, d_model, d_head]")
    W_K = property(lambda self: self._stacked("W_K"), doc="[layer, kv_head, d_model, d_head]")
    W_V = property(lambda self: self._stacked("W_V"), doc="[layer, kv_head, d_model, d_head]")
    W_O = property(lambda self: self._stacked("W_O"), doc="[layer, head, d_head, d_model]")
    b_Q = property(lambda self: self._stacked("b_Q"), doc="[layer, head, d_head] (zeros without bias)")
    b_K = property(lambda self: self._stacked("b_K"), doc="[layer, kv_head, d_head]")
    b_V = property(lambda self: self._stacked("b_V"), doc="[layer, kv_head, d_head]")
    b_O = property(lambda self: self._stacked("b_O"), doc="[layer, d_model]")
    W_in = property(lambda self: self._stacked("W_in"), doc="[layer, d_model, d_mlp] (up projection when gated)")
    W_gate = property(lambda self: self._stacked("W_gate"), doc="[layer, d_model, d_mlp] (gated MLPs only)")
    W_out = property(lambda self: self._stacked("W_out"), doc="[layer, d_mlp, d_model]")
    b_in = property(lambda self: self._stacked("b_in"), doc="[layer, d_mlp]")
    b_gate = property(lambda self: self._stacked("b_gate"), doc="[layer, d_mlp] (gated MLPs only)")
    b_out = property(lambda self: self._stacked("b_out"), doc="[layer, d_model]")

    @property
    def W_E(self) -> Tensor:
        """[d_vocab, d_model] token embedding (Gemma multiplies its output by sqrt(d_model) on top)."""
        return self.hf_model.get_submodule(self.adapter.embed).weight.detach()

    @property
    def W_pos(self) -> Tensor:
        """[n_ctx, d_model] learned position embedding (GPT-2 style models only)."""
        if not self.adapter.pos_embed:
            raise MissingWeightError(
                f"W_pos: {self.config.model_type} has no learned position embedding (it uses rotary positions, "
                "applied to q and k: see hook_rot_q / hook_rot_k)"
            )
        return self.hf_model.get_submodule(self.adapter.pos_embed).weight.detach()

    @property
    def W_U(self) -> Tensor:
        """[d_model, d_vocab] unembedding (the final norm's weight is *not* folded in)."""
        return self.unembed_module.weight.detach().t()

    @property
    def b_U(self) -> Tensor:
        """[d_vocab] unembedding bias (zeros when the model has none)."""
        return _bias(self.unembed_module, self.unembed_module.weight.shape[0])

    @property
    def OV(self):
        """TransformerLens `FactoredMatrix` [layer, head, d_model, d_model] = W_V (per query head) @ W_O."""
        from transformer_lens.FactoredMatrix import FactoredMatrix

        return FactoredMatrix(expand_kv(self.W_V, self.n_heads), self.W_O)

    @property
    def QK(self):
        """TransformerLens `FactoredMatrix` [layer, head, d_model, d_model] = W_Q @ W_K^T (before rotary)."""
        from transformer_lens.FactoredMatrix import FactoredMatrix

        return FactoredMatrix(self.W_Q, expand_kv(self.W_K, self.n_heads).transpose(-2, -1))

    # ------------------------------------------------------------------ logits
    def _token_ids(self, tokens) -> Tensor:
        if isinstance(tokens, str):
            return torch.tensor(self.to_single_token(tokens))
        return torch.as_tensor(tokens, dtype=torch.long)

    def tokens_to_residual_directions(self, tokens) -> Tensor:
        """[*tokens.shape, d_model]: the direction in the (normalised) residual stream that reads out each
        token's logit, the final norm's weight folded in (so it applies to `apply_ln_to_stack` output)."""
        module, spec = self.norm_module("ln_final")
        ids = self._token_ids(tokens).to(self.device)
        return self.W_U.float()[:, ids].movedim(0, -1) * norms.gain(module, spec)

    def logit_bias_terms(self, tokens, incorrect_tokens=None) -> Tensor:
        """The logit (difference) share of the final norm's bias and of `b_U` (see `logit_attr_bias`)."""
        module, _ = self.norm_module("ln_final")
        b = norms.bias(module)

        def one(t):
            ids = self._token_ids(t).to(self.device)
            out = self.b_U.float()[ids]
            return out if b is None else out + torch.einsum("d...,d->...", self.W_U.float()[:, ids], b)

        return one(tokens) if incorrect_tokens is None else one(tokens) - one(incorrect_tokens)
