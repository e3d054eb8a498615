"""The declarative description of one architecture family: where each hook point lives in the HF module tree.

An adapter names module paths; it holds no forward logic. `interp.hooked` turns these paths into torch
hooks on the real HuggingFace modules, so the numbers are the model's own.

Paths are relative to the causal-LM model (`model.hf_model`); paths inside a block are relative to the
block module `{layers}.{l}`. Every sub-layer's *contribution* is the module whose output is added to the
residual stream: the attention module for Llama, the post-attention norm for Gemma 3's sandwich norms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

QKVLayout = Literal["separate", "neox", "gpt2", "split"]


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
    qkv: tuple[str, ...]
    """Projection module(s): three paths for q, k, v when separate, one fused path otherwise."""
    mlp_norm: str | None = None
    """Norm in front of the MLP; its input is `hook_resid_mid` in a sequential block. None where the block has
    none (OLMo 2 normalises after each sub-layer): `hook_resid_mid` is then the input of `mlp`."""
    mlp_pre: str | None = None
    """Module whose output is the MLP pre-activation (`mlp.hook_pre`; the gate projection when gated). None for
    a mixture of experts, whose experts have no single pre-activation."""
    mlp_down: str | None = None
    """MLP output projection; its input is `mlp.hook_post` (after the activation, times `up` when gated)."""
    mlp: str = "mlp"
    """The MLP (or mixture-of-experts) block inside a block."""
    qkv_layout: QKVLayout = "separate"
    """How a fused projection packs q, k, v: "neox" (per head: q|k|v), "gpt2" / "split" (q | k | v blocks, q
    `n_heads * d_head` wide, k and v `n_kv_heads * d_head` each: Phi-3's `qkv_proj` under grouped queries)."""
    mlp_pre_linear: str | None = None
    """Gated MLPs: the up projection (`mlp.hook_pre_linear`)."""
    gate_up_fused: bool = False
    """Whether `mlp_pre` packs gate | up in one projection (Phi-3, GLM): `mlp.hook_pre` is its first half and
    `mlp.hook_pre_linear` its second."""
    kv_heads: int | None = None
    """Key/value heads where the config does not say it as `num_key_value_heads` (Falcon's multi-query: 1)."""
    mlp_out_mutated: bool = False
    """Whether the block adds to the MLP's output tensor in place (Falcon's parallel blocks): `hook_mlp_out` then
    hands the block a copy, so what a cache holds is what the MLP returned."""
    mlp_tokens_flat: bool = False
    """Whether the MLP's modules see batch and position flattened into one axis (OPT reshapes before `fc1`)."""
    attn_function: bool = True
    """Whether the attention module calls transformers' attention-function interface (every family but Bloom
    and Falcon): only then are `hook_rot_q`, `hook_rot_k`, `hook_attn_scores` and `hook_pattern` there."""
    residual_multiplier: str | None = None
    """Config attribute by which the block multiplies each sub-layer's output before adding it (Granite):
    `hook_attn_out` and `hook_mlp_out` show the product, what the residual stream receives."""
    moe_router: str | None = None
    """Mixture of experts: the router module inside a block (returns logits, top-k weights, top-k indices):
    `mlp.hook_router_logits`, `mlp.hook_expert_weights`, `mlp.hook_expert_indices`."""
    variant: Callable[[object], dict] | None = None
    """config -> field overrides, for families whose module layout depends on the config (Falcon)."""
    pos_embed: str | None = None
    """Learned position embedding (`hook_pos_embed`), GPT-2 style."""
    parallel_residual: str | bool | None = None
    """Config attribute that, when true, makes attention and MLP read the same input (no `hook_resid_mid`);
    True for families whose blocks are always parallel (GPT-J, Phi, Cohere)."""
    attn_norm: str | None = None
    """Norm in front of attention (`blocks.{l}.ln1.hook_scale|hook_normalized`); `mlp_norm` is `ln2`."""
    sandwich_norms: bool = False
    """Whether `attn_contrib` / `mlp_contrib` are norms after each sub-layer (Gemma 2/3): `ln1_post`, `ln2_post`."""
    packs_suffixes: bool = True
    """Whether the HF forward takes a custom 4D attention mask with explicit position ids over a key/value cache,
    so patching sweeps may pack copies' suffixes (`interp.patching.suffix`); False where positions come from the
    mask (Bloom's ALiBi)."""

    def is_parallel(self, config) -> bool:
        """Whether this model adds attention and MLP to the same residual (GPT-NeoX's parallel residual)."""
        if isinstance(self.parallel_residual, bool):
            return self.parallel_residual
        return bool(self.parallel_residual and getattr(config, self.parallel_residual, False))

    def n_kv_heads(self, config) -> int:
        """Key/value heads of a model of this family."""
        return self.kv_heads or getattr(config, "num_key_value_heads", None) or config.num_attention_heads

    def for_config(self, config) -> Adapter:
        """This adapter with the overrides its `variant` gives for one config (itself when it has none)."""
        return replace(self, **self.variant(config)) if self.variant else self
