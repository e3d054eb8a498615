"""The HF key/value cache under either of its names: `cache=` from transformers 5.24, `past_key_values=` before
(kept as a deprecated alias until 5.40)."""

from __future__ import annotations

import inspect


def cache_kwarg(hf_model) -> str:
    """The keyword `hf_model.forward` takes its key/value cache by."""
    return "cache" if "cache" in inspect.signature(hf_model.forward).parameters else "past_key_values"


def returned_cache(output):
    """The key/value cache an HF forward returned (`use_cache=True`)."""
    got = getattr(output, "cache", None)
    return got if got is not None else output.past_key_values
