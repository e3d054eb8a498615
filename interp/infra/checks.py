"""Range checks for config dataclasses, so that a run with an impossible number never starts.

Configs call `require_numbers` from `__post_init__`; the error names the field, the value and the
allowed range (`steps must be an integer >= 1, got -5`), before anything is loaded or written. A
`bool` is never accepted as a number, and NaN/inf never as a finite one. `check_ctx_len` compares a
context length with what a model's positions allow, before a forward pass builds a mask of that size.

    >>> require_numbers(cfg, positive_int=("steps", "batch_size"), positive=("lr",), non_negative=("weight_decay",))
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def require_numbers(
    obj: Any,
    *,
    positive_int: Iterable[str] = (),
    non_negative_int: Iterable[str] = (),
    positive: Iterable[str] = (),
    non_negative: Iterable[str] = (),
    finite: Iterable[str] = (),
    fraction: Iterable[str] = (),
) -> None:
    """Raise `ValueError` naming the first field of `obj` outside its range.

    positive_int: integers >= 1; non_negative_int: integers >= 0; positive: finite numbers > 0;
    non_negative: finite numbers >= 0; finite: any finite number; fraction: numbers in [0, 1].
    A field whose value is None is skipped (None means "not set" in our configs).
    """
    rules = [
        (positive_int, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "an integer >= 1"),
        (non_negative_int, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0"),
        (positive, lambda v: _num(v) and math.isfinite(v) and v > 0, "a finite number > 0"),
        (non_negative, lambda v: _num(v) and math.isfinite(v) and v >= 0, "a finite number >= 0"),
        (finite, lambda v: _num(v) and math.isfinite(v), "a finite number"),
        (fraction, lambda v: _num(v) and 0 <= v <= 1, "a number in [0, 1]"),
    ]
    for names, ok, what in rules:
        for name in names:
            v = getattr(obj, name)
            if v is not None and not ok(v):
                raise ValueError(f"{name} must be {what}, got {v!r}")


def max_positions(hf_config: Any) -> int | None:
    """Longest sequence a model's position scheme is configured for, or None when it does not say."""
    for name in ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len"):
        v = getattr(hf_config, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def check_ctx_len(model: Any, ctx_len: int, option: str = "--ctx-len") -> None:
    """`ValueError` when `ctx_len` exceeds the model's positions (checked before any forward pass)."""
    hf = getattr(model, "hf_model", model)
    limit = max_positions(getattr(hf, "config", None))
    if limit is not None and ctx_len > limit:
        raise ValueError(
            f"{option} {ctx_len} is longer than the {limit} positions the model is configured for; "
            f"use {option} {limit} or less"
        )
