"""Phi (1, 1.5, 2): parallel blocks (attention and MLP both read `input_layernorm`'s output, so ln2 is ln1),
partial rotary, a GELU MLP (`fc1`, `fc2`), the output projection named `dense`."""

from interp.adapters.base import Adapter

ADAPTER = Adapter(
    model_types=("phi",),
    layers="model.layers",
    embed="model.embed_tokens",
    final_norm="model.final_layernorm",
    attn="self_attn",
    attn_contrib="self_attn",
    mlp_contrib="mlp",
    out_proj="self_attn.dense",
    qkv=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    attn_norm="input_layernorm",
    mlp_norm="input_layernorm",
    mlp_pre="mlp.fc1",
    mlp_down="mlp.fc2",
    parallel_residual=True,
)
