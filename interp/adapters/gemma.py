"""Gemma (1): Llama's layout; RMSNorms multiply by (1 + w), and the embedding module scales by sqrt(d_model)
itself, so `hook_embed` is the scaled embedding."""

from dataclasses import replace

from interp.adapters import llama

ADAPTER = replace(llama.ADAPTER, model_types=("gemma",))
