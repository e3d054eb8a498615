"""GPT-J: parallel blocks on one `ln_1`, separate q/k/v (rotary on the first `rotary_dim` channels, GPT-J's
interleaved pairs), a GELU MLP (`fc_in`, `fc_out`)."""

from interp.adapters.base import Adapter

ADAPTER = Adapter(
    model_types=("gptj",),
    layers="transformer.h",
    embed="transformer.wte",
    final_norm="transformer.ln_f",
    attn="attn",
    attn_contrib="attn",
    mlp_contrib="mlp",
    out_proj="attn.out_proj",
    qkv=("attn.q_proj", "attn.k_proj", "attn.v_proj"),
    attn_norm="ln_1",
    mlp_norm="ln_1",
    mlp_pre="mlp.fc_in",
    mlp_down="mlp.fc_out",
    parallel_residual=True,
)
