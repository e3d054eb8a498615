"""Cohere (Command R): parallel blocks on one `input_layernorm` (a LayerNorm without bias, in float32), a gated
MLP; the logits are multiplied by `logit_scale`. Optional per-head q/k LayerNorms sit inside attention."""

from dataclasses import replace

from interp.adapters import llama

ADAPTER = replace(llama.ADAPTER, model_types=("cohere",), mlp_norm="input_layernorm", parallel_residual=True)
