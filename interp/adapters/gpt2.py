"""GPT-2: learned positions, fused q | k | v projection (Conv1D), GELU MLP."""

from interp.adapters.base import Adapter

ADAPTER = Adapter(
    model_types=("gpt2",),
    layers="transformer.h",
    embed="transformer.wte",
    pos_embed="transformer.wpe",
    final_norm="transformer.ln_f",
    attn="attn",
    attn_contrib="attn",
    mlp_contrib="mlp",
    out_proj="attn.c_proj",
    qkv=("attn.c_attn",),
    qkv_layout="gpt2",
    attn_norm="ln_1",
    mlp_norm="ln_2",
    mlp_pre="mlp.c_fc",
    mlp_down="mlp.c_proj",
)
