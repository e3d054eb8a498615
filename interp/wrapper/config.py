"""`model.cfg`: a read-only view of a `HookedModel`'s sizes under TransformerLens's `HookedTransformerConfig` names.

    model.cfg.n_layers, model.cfg.d_head, model.cfg.d_mlp, model.cfg.act_fn   # as in TL tutorials
    model.cfg.to_dict()

It is derived from the HF config each time it is read (frozen: assigning a field raises), so it can never
drift from the model. Only the fields whose meaning carries over are here; TL's folding and processing
flags (`fold_ln`, `use_attn_result`, ...) have no counterpart, since nothing is folded or switched here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import torch


@dataclass(frozen=True)
class TLConfigView:
    """The TransformerLens-named sizes and kinds of one model (see the module docstring)."""

    model_name: str
    """The model's spec name (or its HF class name)."""
    original_architecture: str
    """The HF class, e.g. "LlamaForCausalLM"."""
    n_layers: int
    d_model: int
    n_heads: int
    d_head: int
    n_key_value_heads: int | None
    """Key/value heads under grouped-query attention; None when every query head has its own (as TL sets it)."""
    d_mlp: int
    d_vocab: int
    d_vocab_out: int
    n_ctx: int | None
    act_fn: str | None
    """The HF activation name ("silu", "gelu_new", ...)."""
    normalization_type: Literal["LN", "RMS"]
    positional_embedding_type: Literal["standard", "rotary"]
    rotary_dim: int | None
    rotary_base: float | None
    eps: float | None
    parallel_attn_mlp: bool
    gated_mlp: bool
    attn_only: bool
    final_rms: bool
    default_prepend_bos: bool | None
    """Our BOS rule: None keeps the tokenizer's own convention (see `interp.data.tokenize_texts`)."""
    device: str
    dtype: torch.dtype

    def to_dict(self) -> dict:
        return asdict(self)


def _rope(config) -> tuple[float | None, float]:
    """(rope theta, partial rotary factor): transformers 5 keeps them in `rope_parameters`."""
    params = getattr(config, "rope_parameters", None) or {}
    if isinstance(params, dict) and "full_attention" in params:  # Gemma 3: one entry per layer type
        params = params["full_attention"]
    theta = params.get("rope_theta", getattr(config, "rope_theta", None)) if isinstance(params, dict) else None
    factor = params.get("partial_rotary_factor") if isinstance(params, dict) else None
    return theta, factor or getattr(config, "partial_rotary_factor", None) or getattr(config, "rotary_pct", 1.0)


def tl_config_view(model) -> TLConfigView:
    """Build the view from a `HookedModel` (its HF config, adapter and sizes)."""
    c, a = model.config, model.adapter
    norm = model.hf_model.get_submodule(a.final_norm)
    rms = "RMS" in type(norm).__name__ or not hasattr(norm, "bias")
    rotary = a.pos_embed is None
    theta, factor = _rope(c) if rotary else (None, 1.0)
    d_mlp = getattr(c, "intermediate_size", None) or getattr(c, "n_inner", None) or 4 * model.d_model
    eps = next((getattr(c, k) for k in ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon") if hasattr(c, k)), None)
    act = (
        getattr(c, "hidden_act", None)
        or getattr(c, "hidden_activation", None)
        or getattr(c, "activation_function", None)
    )
    return TLConfigView(
        model_name=model.name,
        original_architecture=type(model.hf_model).__name__,
        n_layers=model.n_layers,
        d_model=model.d_model,
        n_heads=model.n_heads,
        d_head=model.d_head,
        n_key_value_heads=model.n_kv_heads if model.n_kv_heads != model.n_heads else None,
        d_mlp=d_mlp,
        d_vocab=model.d_vocab,
        d_vocab_out=model.unembed_module.weight.shape[0],
        n_ctx=model.n_ctx,
        act_fn=act,
        normalization_type="RMS" if rms else "LN",
        positional_embedding_type="rotary" if rotary else "standard",
        rotary_dim=int(model.d_head * factor) if rotary else None,
        rotary_base=theta,
        eps=eps,
        parallel_attn_mlp=a.is_parallel(c),
        gated_mlp=a.mlp_pre_linear is not None,
        attn_only=False,
        final_rms=rms,
        default_prepend_bos=model.prepend_bos,
        device=str(model.device),
        dtype=model.dtype,
    )
