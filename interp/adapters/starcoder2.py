"""StarCoder 2: Llama's attention with LayerNorms and a plain GELU MLP (`c_fc`, `c_proj`), biases on."""

from dataclasses import replace

from interp.adapters import llama

ADAPTER = replace(
    llama.ADAPTER, model_types=("starcoder2",), mlp_pre="mlp.c_fc", mlp_pre_linear=None, mlp_down="mlp.c_proj"
)
