"""GPT-NeoX (Pythia): fused per-head q|k|v projection, partial rotary, usually a parallel residual."""

from interp.adapters.base import Adapter

ADAPTER = Adapter(
    model_types=("gpt_neox",),
    layers="gpt_neox.layers",
    embed="gpt_neox.embed_in",
    final_norm="gpt_neox.final_layer_norm",
    attn="attention",
    attn_contrib="attention",
    mlp_contrib="mlp",
    out_proj="attention.dense",
    qkv=("attention.query_key_value",),
    qkv_layout="neox",
    attn_norm="input_layernorm",
    mlp_norm="post_attention_layernorm",
    mlp_pre="mlp.dense_h_to_4h",
    mlp_down="mlp.dense_4h_to_h",
    parallel_residual="use_parallel_residual",
)
