"""Granite: Llama's layout with multipliers. The block adds `residual_multiplier` x each sub-layer's output, so
`hook_attn_out` and `hook_mlp_out` show that product (what the residual receives). `embedding_multiplier` is
applied after the embedding module (`hook_embed` is before it, `blocks.0.hook_resid_pre` after);
`attention_multiplier` is the attention's scaling and `logits_scaling` divides the logits.
"""

from dataclasses import replace

from interp.adapters import llama

ADAPTER = replace(llama.ADAPTER, model_types=("granite",), residual_multiplier="residual_multiplier")
