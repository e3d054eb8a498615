"""OLMo 2: norms after each sub-layer, none before. The post-norms are the contributions (`hook_attn_out` is
`post_attention_layernorm`'s output; their scale is `ln1_post` / `ln2_post`); `hook_resid_mid` is the MLP's
input. q/k RMSNorms over all heads sit inside attention (`hook_q` is before them)."""

from interp.adapters.base import Adapter

ADAPTER = Adapter(
    model_types=("olmo2",),
    layers="model.layers",
    embed="model.embed_tokens",
    final_norm="model.norm",
    attn="self_attn",
    attn_contrib="post_attention_layernorm",
    mlp_contrib="post_feedforward_layernorm",
    out_proj="self_attn.o_proj",
    qkv=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    sandwich_norms=True,
    mlp_pre="mlp.gate_proj",
    mlp_pre_linear="mlp.up_proj",
    mlp_down="mlp.down_proj",
)
