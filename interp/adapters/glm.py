"""GLM (GLM-4 dense): Llama's attention (separate q/k/v with biases, partial rotary) and a fused `gate_up_proj`."""

from dataclasses import replace

from interp.adapters import llama

ADAPTER = replace(
    llama.ADAPTER,
    model_types=("glm",),
    mlp_pre="mlp.gate_up_proj",
    mlp_pre_linear=None,
    gate_up_fused=True,
)
