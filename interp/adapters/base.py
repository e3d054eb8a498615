"""The declarative description of one architecture family: where each hook point lives in the HF module tree.

An adapter names module paths; it holds no forward logic. `interp.hooked` turns these paths into torch
hooks on the real HuggingFace modules, so the numbers are the model's own.

Paths are relative to the causal-LM model (`model.hf_model`); paths inside a block are relative to the
block module `{layers}.{l}`. Every sub-layer's *contribution* is the module whose output is added to the
residual stream: the attention module for Llama, the post-attention norm for Gemma 3's sandwich norms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

QKVLayout = Literal["separate", "neox", "gpt2"]


@dataclass(frozen=True)
class Adapter:
    """Where the TransformerLens-named hook points live in one HF architecture family."""

    model_types: tuple[str, ...]
    """`config.model_type` values this adapter serves (e.g. ("llama", "mistral"))."""
    layers: str
    """Path of the `nn.ModuleList` of blocks, e.g. "model.layers"."""
    embed: str
    """Token embedding module; its output is `hook_embed`."""
    final_norm: str
    """Final norm; its output is `ln_final.hook_normalized`."""
    attn: str
    """Attention module inside a block; it calls the attention function that gives scores and pattern."""
    attn_contrib: str
    """Module whose output the block adds to the residual after attention (`hook_attn_out`)."""
    mlp_contrib: str
    """Module whose output the block adds to the residual after the MLP (`hook_mlp_out`)."""
    out_proj: str
    """Attention output projection; its input, split into heads, is `attn.hook_z`."""
    mlp_norm: str
    """Norm in front of the MLP; its input is `hook_resid_mid` in a sequential block."""
    mlp_pre: str
    """Module whose output is the MLP pre-activation (`mlp.hook_pre`; the gate projection when gated)."""
    mlp_down: str
    """MLP output projection; its input is `mlp.hook_post` (after the activation, times `up` when gated)."""
    qkv: tuple[str, ...]
    """Projection module(s): three paths for q, k, v when separate, one fused path otherwise."""
    qkv_layout: QKVLayout = "separate"
    """How a fused projection packs q, k, v: "neox" (per head: q|k|v), "gpt2" (q | k | v blocks)."""
    mlp_pre_linear: str | None = None
    """Gated MLPs: the up projection (`mlp.hook_pre_linear`)."""
    pos_embed: str | None = None
    """Learned position embedding (`hook_pos_embed`), GPT-2 style."""
    parallel_residual: str | None = None
    """Config attribute that, when true, makes attention and MLP read the same input (no `hook_resid_mid`)."""
    attn_norm: str | None = None
    """Norm in front of attention (`blocks.{l}.ln1.hook_scale|hook_normalized`); `mlp_norm` is `ln2`."""
    sandwich_norms: bool = False
    """Whether `attn_contrib` / `mlp_contrib` are norms after each sub-layer (Gemma 2/3): `ln1_post`, `ln2_post`."""

    def is_parallel(self, config) -> bool:
        """Whether this model adds attention and MLP to the same residual (GPT-NeoX's parallel residual)."""
        return bool(self.parallel_residual and getattr(config, self.parallel_residual, False))
