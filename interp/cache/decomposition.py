"""Per-neuron results and the full residual decomposition, with TransformerLens's names and ordering.

    cache.compute_head_results()                       # fills blocks.{l}.attn.hook_result from hook_z
    neurons, labels = cache.stack_neuron_results(-1, pos_slice=-1, return_labels=True)   # "L0N5", ...
    parts, labels = cache.get_full_resid_decomposition(return_labels=True, expand_neurons=False)
    cache.stack_activation("pattern")                  # [layer, batch, head, query, key]

`get_full_resid_decomposition` stacks, as TL does: every head's result, every neuron's result (or each
MLP's output with `expand_neurons=False`), `embed`, `pos_embed` (learned positions only) and `bias` (the
attention and MLP output biases so far). The parts sum to the residual stream at that layer's input.
Under Gemma 3's sandwich norms a neuron's result is carried through the post-MLP norm with its cached
scale (as head results are), so the sum still holds.
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp.cache.analysis import PosSlice, apply_pos
from interp.hooks import norms


class DecompositionMixin:
    """Mixin for `ActivationCache` (needs the `CacheAnalysis` helpers and `self._data`)."""

    def compute_head_results(self) -> None:
        """Put each layer's per-head results `blocks.{l}.attn.hook_result` [batch, pos, head, d_model] in the
        cache, from the cached `attn.hook_z` and the output projection (bias left out, as in TL)."""
        model = self._need_model("compute_head_results")
        for layer in self.layers_of("z"):
            name = f"blocks.{layer}.attn.hook_result"
            if name not in self._data:
                z = self["z", layer]
                self._data[name] = torch.einsum("...hd,hdm->...hm", z, model.W_O_layer(layer).to(z.dtype))

    def stack_activation(
        self, activation_name: str, layer: int | None = -1, sublayer_type: str | None = None
    ) -> Tensor:
        """[layer, ...]: one activation of every block before `layer` (-1 or None: all blocks), as in TL."""
        model = self._need_model("stack_activation")
        layer = model.n_layers if layer is None or layer == -1 else layer
        return torch.stack([self[(activation_name, li, sublayer_type)] for li in range(layer)])

    def neuron_results(self, layer: int, pos_slice: PosSlice = None, neuron_slice: PosSlice = None) -> Tensor:
        """[batch, pos, neuron, d_model]: each MLP neuron's write to the residual stream in one layer."""
        model = self._need_model("neuron_results")
        layer = self._layer(layer)
        post = apply_pos(self["post", layer], pos_slice, dim=-2)
        w_out = model.layer_weight("W_out", layer)
        post = apply_pos(post, neuron_slice, dim=-1)
        w_out = apply_pos(w_out, neuron_slice, dim=0)
        result = post[..., None] * w_out.to(post.dtype)
        if model.adapter.sandwich_norms:
            module, spec = model.norm_module(f"blocks.{layer}.ln2_post")
            scale = apply_pos(self[f"blocks.{layer}.ln2_post.hook_scale"], pos_slice)
            result = result.float() / scale.unsqueeze(-2) * norms.gain(module, spec)
        return result

    def stack_neuron_results(
        self,
        layer: int | None = -1,
        pos_slice: PosSlice = None,
        neuron_slice: PosSlice = None,
        return_labels: bool = False,
        incl_remainder: bool = False,
        apply_ln: bool = False,
    ):
        """Every neuron's result in the blocks before `layer`: [layer*neuron, batch, pos, d_model], labels
        "L0N3". Large ([n_layers * d_mlp] copies of the residual): slice positions or neurons."""
        model = self._need_model("stack_neuron_results")
        layer = self._input_layer(layer)
        d_mlp = model.cfg.d_mlp
        index = apply_pos(torch.arange(d_mlp), neuron_slice, dim=0).reshape(-1).tolist()
        labels = [f"L{li}N{n}" for li in range(layer) for n in index]
        parts = [self.neuron_results(li, pos_slice, neuron_slice) for li in range(layer)]
        if parts:
            parts = [
                p if p.ndim == apply_pos(self["hook_embed"], pos_slice).ndim + 1 else p.unsqueeze(-2) for p in parts
            ]
            stack = torch.cat(parts, dim=-2).movedim(-2, 0)
        else:
            stack = self["hook_embed"].new_zeros((0, *apply_pos(self["hook_embed"], pos_slice).shape))
        if incl_remainder:
            total = self["resid_post", layer - 1] if layer > 0 else self.decompose_resid(0).sum(0)
            stack = torch.cat([stack, (apply_pos(total, pos_slice) - stack.sum(0))[None]])
            labels.append("remainder")
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def accumulated_bias(self, layer: int, mlp_input: bool = False, include_mlp_biases: bool = True) -> Tensor:
        """[d_model]: the attention (and MLP) output biases of every block before `layer` (and the attention
        bias of `layer` itself with `mlp_input`)."""
        model = self._need_model("accumulated_bias")
        total = torch.zeros(model.d_model, dtype=torch.float32, device=model.device)
        for li in range(layer + (1 if mlp_input else 0)):
            total += model.layer_weight("b_O", li).float()
            if include_mlp_biases and li < layer:
                total += model.layer_weight("b_out", li).float()
        return total

    def get_full_resid_decomposition(
        self,
        layer: int | None = None,
        mlp_input: bool = False,
        expand_neurons: bool = True,
        apply_ln: bool = False,
        pos_slice: PosSlice = None,
        return_labels: bool = False,
    ):
        """The residual stream entering `layer` split into heads, neurons (or MLPs), embeddings and biases:
        [component, batch, pos, d_model], in TransformerLens's order and labels (see the module docstring)."""
        self._need_model("get_full_resid_decomposition")
        layer = self._input_layer(layer)
        heads, labels = self.stack_head_results(
            layer + (1 if mlp_input else 0), pos_slice=pos_slice, return_labels=True
        )
        parts = [heads]
        if layer > 0:
            if expand_neurons:
                neurons, names = self.stack_neuron_results(layer, pos_slice=pos_slice, return_labels=True)
            else:
                neurons, names = self.decompose_resid(
                    layer, pos_slice=pos_slice, incl_embeds=False, mode="mlp", return_labels=True
                )
            parts.append(neurons.to(heads.dtype))
            labels = labels + names
        ref = apply_pos(self["hook_embed"], pos_slice)
        parts.append(ref[None].to(heads.dtype))
        labels.append("embed")
        if "hook_pos_embed" in self:
            parts.append(apply_pos(self["hook_pos_embed"].expand_as(self["hook_embed"]), pos_slice)[None])
            labels.append("pos_embed")
        bias = self.accumulated_bias(layer, mlp_input, include_mlp_biases=expand_neurons)
        parts.append(bias.to(heads.dtype).expand(1, *ref.shape))
        labels.append("bias")
        stack = torch.cat(parts)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input=mlp_input, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack
