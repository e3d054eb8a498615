"""BLOOM: ALiBi positions (no rotary, no position embedding), a LayerNorm right after the embedding (so
`blocks.0.hook_resid_pre` is `hook_embed` normalised), fused q|k|v per head (GPT-NeoX's layout). Its attention
and MLP modules add the residual themselves, so the contributions are their output projections (`dense`,
`dense_4h_to_h`). Its attention computes scores itself (`baddbmm` with ALiBi), not through transformers'
attention functions, so `hook_attn_scores` / `hook_pattern` / `hook_rot_*` are not hook points."""

from interp.adapters.base import Adapter

ADAPTER = Adapter(
    model_types=("bloom",),
    layers="transformer.h",
    embed="transformer.word_embeddings",
    final_norm="transformer.ln_f",
    attn="self_attention",
    attn_contrib="self_attention.dense",
    mlp_contrib="mlp.dense_4h_to_h",
    out_proj="self_attention.dense",
    qkv=("self_attention.query_key_value",),
    qkv_layout="neox",
    attn_norm="input_layernorm",
    mlp_norm="post_attention_layernorm",
    mlp_pre="mlp.dense_h_to_4h",
    mlp_down="mlp.dense_4h_to_h",
    attn_function=False,
    packs_suffixes=False,  # ALiBi is built from the 2D mask
)
