"""Qwen 3 (dense): Llama's layout with an RMSNorm on each head's query and key inside attention.

`attn.hook_q` / `hook_k` are the projections' outputs, before that norm; `hook_rot_q` / `hook_rot_k` are what
the attention product reads (after the q/k norm and rotary).
"""

from dataclasses import replace

from interp.adapters import llama

ADAPTER = replace(llama.ADAPTER, model_types=("qwen3",))
