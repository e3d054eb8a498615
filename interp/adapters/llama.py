"""Llama-family decoders (SmolLM2, Llama 2/3, Mistral, Qwen2): pre-norm, gated MLP, rotary, separate q/k/v."""

from interp.adapters.base import Adapter

ADAPTER = Adapter(
    model_types=("llama", "mistral", "qwen2"),
    layers="model.layers",
    embed="model.embed_tokens",
    final_norm="model.norm",
    attn="self_attn",
    attn_contrib="self_attn",
    mlp_contrib="mlp",
    out_proj="self_attn.o_proj",
    qkv=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    attn_norm="input_layernorm",
    mlp_norm="post_attention_layernorm",
    mlp_pre="mlp.gate_proj",
    mlp_pre_linear="mlp.up_proj",
    mlp_down="mlp.down_proj",
)
