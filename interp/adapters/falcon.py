"""Falcon (7B-style blocks): fused q|k|v (multi-query: q | k | v blocks with one key/value head; otherwise per
head, GPT-NeoX's layout), parallel attention and MLP on one `input_layernorm` (`parallel_attn`), optional ALiBi.
Its attention computes scores itself, not through transformers' attention functions, so `hook_attn_scores` /
`hook_pattern` / `hook_rot_*` are not hook points. The parallel block adds attention into the MLP's output in
place, so `hook_mlp_out` hands the block a copy. The 40B/180B layout (`new_decoder_architecture`: two norms and
grouped q|k|v) is refused by name."""

from interp.adapters.base import Adapter


def _variant(config) -> dict:
    if config.new_decoder_architecture:
        raise ValueError(
            "falcon with new_decoder_architecture (Falcon-40B/180B: grouped q|k|v, ln_attn/ln_mlp) has no adapter "
            "yet; interp/adapters/falcon.py is the one file to extend"
        )
    kv_heads, layout = (1, "split") if config.multi_query else (config.num_attention_heads, "neox")
    fused = {"kv_heads": kv_heads, "qkv_layout": layout}
    if config.parallel_attn:
        return {**fused, "mlp_norm": "input_layernorm", "parallel_residual": True, "mlp_out_mutated": True}
    return {**fused, "mlp_norm": "post_attention_layernorm"}


ADAPTER = Adapter(
    model_types=("falcon",),
    layers="transformer.h",
    embed="transformer.word_embeddings",
    final_norm="transformer.ln_f",
    attn="self_attention",
    attn_contrib="self_attention",
    mlp_contrib="mlp",
    out_proj="self_attention.dense",
    qkv=("self_attention.query_key_value",),
    attn_norm="input_layernorm",
    mlp_pre="mlp.dense_h_to_4h",
    mlp_down="mlp.dense_4h_to_h",
    attn_function=False,
    variant=_variant,
)
