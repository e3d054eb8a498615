"""SmolLM3: Llama's layout; every fourth layer skips rotary (NoPE), so there `hook_rot_q` equals `hook_q`."""

from dataclasses import replace

from interp.adapters import llama

ADAPTER = replace(llama.ADAPTER, model_types=("smollm3",))
