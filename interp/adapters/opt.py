"""OPT: learned positions (`embed_positions` adds OPT's offset of 2 itself; `hook_pos_embed` is its output), the
MLP's `fc1` / `fc2` directly in the block (no MLP module: `hook_mlp_out` is `fc2`'s output). The pre-norm
models (`do_layer_norm_before`, every size but 350m) follow TransformerLens's order; 350m's post-norm blocks
are refused by the parity test rather than described wrongly."""

from interp.adapters.base import Adapter

ADAPTER = Adapter(
    model_types=("opt",),
    layers="model.decoder.layers",
    embed="model.decoder.embed_tokens",
    pos_embed="model.decoder.embed_positions",
    final_norm="model.decoder.final_layer_norm",
    attn="self_attn",
    attn_contrib="self_attn",
    mlp_contrib="fc2",
    out_proj="self_attn.out_proj",
    qkv=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    attn_norm="self_attn_layer_norm",
    mlp_norm="final_layer_norm",
    mlp_pre="fc1",
    mlp_down="fc2",
    mlp="fc1",
    mlp_tokens_flat=True,
)
