"""Phi-3 / Phi-4-mini: Llama's order with fused projections: `qkv_proj` packs q | k | v (q n_heads x d_head
wide, k and v n_kv_heads x d_head each) and `gate_up_proj` packs gate | up."""

from interp.adapters.base import Adapter

ADAPTER = Adapter(
    model_types=("phi3",),
    layers="model.layers",
    embed="model.embed_tokens",
    final_norm="model.norm",
    attn="self_attn",
    attn_contrib="self_attn",
    mlp_contrib="mlp",
    out_proj="self_attn.o_proj",
    qkv=("self_attn.qkv_proj",),
    qkv_layout="split",
    attn_norm="input_layernorm",
    mlp_norm="post_attention_layernorm",
    mlp_pre="mlp.gate_up_proj",
    gate_up_fused=True,
    mlp_down="mlp.down_proj",
)
