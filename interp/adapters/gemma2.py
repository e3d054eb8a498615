"""Gemma 2: Gemma 3's sandwich norms (the post-norms are each sub-layer's contribution); attention scores are
soft-capped (`hook_attn_scores` is after the cap, as the softmax reads it) and so are the final logits."""

from dataclasses import replace

from interp.adapters import gemma3

ADAPTER = replace(gemma3.ADAPTER, model_types=("gemma2",))
