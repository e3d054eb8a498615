"""Gemma 3 text decoders: sandwich norms, so each sub-layer's residual contribution is its post-norm output."""

from interp.adapters.base import Adapter

ADAPTER = Adapter(
    model_types=("gemma3_text", "gemma3"),
    layers="model.layers",
    embed="model.embed_tokens",
    final_norm="model.norm",
    attn="self_attn",
    attn_contrib="post_attention_layernorm",
    mlp_contrib="post_feedforward_layernorm",
    out_proj="self_attn.o_proj",
    qkv=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    attn_norm="input_layernorm",
    sandwich_norms=True,
    mlp_norm="pre_feedforward_layernorm",
    mlp_pre="mlp.gate_proj",
    mlp_pre_linear="mlp.up_proj",
    mlp_down="mlp.down_proj",
)
