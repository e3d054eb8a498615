"""Mixtures of experts with Llama's attention: Mixtral, Qwen 3 MoE (q/k norms), OLMoE (q/k norms over all heads).

The MLP is `mlp` (a sparse MoE block); its router `mlp.gate` gives the hook points `mlp.hook_router_logits`
[batch, pos, expert], `mlp.hook_expert_weights` and `mlp.hook_expert_indices` [batch, pos, top_k] (editing the
weights or indices changes the mixture; the logits are read only for the choice). `hook_mlp_out` is the weighted
sum of the chosen experts, what the block adds. There is no single `mlp.hook_pre`/`hook_post`: asking for them
says so.
"""

from dataclasses import replace

from interp.adapters import llama

ADAPTER = replace(
    llama.ADAPTER,
    model_types=("mixtral", "qwen3_moe", "olmoe"),
    mlp_pre=None,
    mlp_pre_linear=None,
    mlp_down=None,
    moe_router="mlp.gate",
)
