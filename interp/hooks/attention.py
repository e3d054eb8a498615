"""The attention function behind `attn.hook_rot_q|rot_k|attn_scores|pattern`.

HF attention modules call whatever function is registered under `config._attn_implementation`. The
wrapper registers "interp" (with HF's eager mask) and points the model at it. With no attention hook
active on a module, it calls that model's own `eager_attention_forward` untouched, so logits equal the
eager HF model's exactly. With hooks active it exposes the rotated queries and keys, the scores (before
softmax, after scaling, soft-capping and the mask) and the pattern (after softmax), and recomputes the
output from whatever the hooks return.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

IMPLEMENTATION = "interp"
ATTR = "_interp_attn_hooks"
"""Attribute of an attention module: {part: [(fn, point), ...]} while hooks are installed."""


def _eager(module) -> Callable:
    """The model's own eager attention (every HF modeling file defines one)."""
    return sys.modules[type(module).__module__].eager_attention_forward


def _apply(hooks: dict, part: str, t: torch.Tensor, heads_first: bool) -> torch.Tensor:
    """Run the hook functions of one part in order; q/k are shown as [batch, pos, head, d_head]."""
    for fn, point in hooks.get(part, ()):
        seen = t.transpose(1, 2) if heads_first else t
        out = fn(seen, point)
        if out is not None:
            t = out.transpose(1, 2) if heads_first else out
    return t


def _repeat_kv(t: torch.Tensor, module) -> torch.Tensor:
    groups = getattr(module, "num_key_value_groups", 1)
    return t if groups == 1 else t.repeat_interleave(groups, dim=1)


def hooked_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Drop-in for HF's eager attention with hook points inside. Shapes: q/k/v [batch, head, pos, d_head]."""
    hooks = getattr(module, ATTR, None)
    eager = _eager(module)
    if not hooks:
        return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    query = _apply(hooks, "rot_q", query, heads_first=True)
    key = _apply(hooks, "rot_k", key, heads_first=True)
    if "scores" not in hooks:
        out, pattern = eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
        if "pattern" in hooks:
            # recompute the output even when a hook hands back the same tensor: it may have edited it in place
            # (TL's `patching` does), and the eager output was computed before the hook ran
            pattern = _apply(hooks, "pattern", pattern, heads_first=False)
            out = torch.matmul(pattern, _repeat_kv(value, module)).transpose(1, 2).contiguous()
        return out, pattern
    # Scores are requested: the same maths as HF eager, with the hooks in between.
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    scores = torch.matmul(query, _repeat_kv(key, module).transpose(2, 3)) * scaling
    softcap = kwargs.get("softcap")
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        scores = scores + attention_mask
    scores = _apply(hooks, "scores", scores, heads_first=False)
    pattern = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    pattern = torch.nn.functional.dropout(pattern, p=dropout, training=module.training)
    pattern = _apply(hooks, "pattern", pattern, heads_first=False)
    out = torch.matmul(pattern, _repeat_kv(value, module)).transpose(1, 2).contiguous()
    return out, pattern


def register() -> None:
    """Register the "interp" attention implementation with transformers (idempotent)."""
    if IMPLEMENTATION not in ALL_ATTENTION_FUNCTIONS:
        ALL_ATTENTION_FUNCTIONS.register(IMPLEMENTATION, hooked_attention)
        ALL_MASK_ATTENTION_FUNCTIONS.register(IMPLEMENTATION, eager_mask)


def use_hooked_attention(hf_model) -> None:
    """Point a HF model at the hooked attention function (eager maths, eager masks)."""
    register()
    hf_model.config._attn_implementation = IMPLEMENTATION
