"""StableLM: Llama's layout with LayerNorms and partial rotary; `use_parallel_residual` makes attention and
MLP read the same `input_layernorm` output (no `hook_resid_mid`, ln2 is ln1); optional per-head q/k LayerNorms
sit inside attention (`hook_q` is before them)."""

from dataclasses import replace

from interp.adapters import llama

ADAPTER = replace(
    llama.ADAPTER,
    model_types=("stablelm",),
    parallel_residual="use_parallel_residual",
    variant=lambda config: {"mlp_norm": "input_layernorm"} if config.use_parallel_residual else {},
)
