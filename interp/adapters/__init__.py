"""Architecture adapters, registered in one place: `config.model_type` -> `Adapter`."""

from __future__ import annotations

from interp.adapters import gemma3, gpt2, gpt_neox, llama
from interp.adapters.base import Adapter

ADAPTERS: dict[str, Adapter] = {}


def register_adapter(adapter: Adapter) -> None:
    """Make an architecture family hookable; refuses a model type that is already registered."""
    for model_type in adapter.model_types:
        if model_type in ADAPTERS:
            raise ValueError(f"model type {model_type!r} already has an adapter")
        ADAPTERS[model_type] = adapter


for _module in (llama, gemma3, gpt_neox, gpt2):
    register_adapter(_module.ADAPTER)


def adapter_for(config) -> Adapter:
    """The adapter of a HF config, or a clear error listing the supported model types."""
    model_type = getattr(config, "model_type", None)
    if model_type not in ADAPTERS:
        raise ValueError(
            f"no hook adapter for model type {model_type!r}; supported: {', '.join(sorted(ADAPTERS))}. "
            "Add one with interp.adapters.register_adapter(Adapter(...))."
        )
    return ADAPTERS[model_type]


__all__ = ["ADAPTERS", "Adapter", "adapter_for", "register_adapter"]
