"""Architecture adapters, registered in one place: `config.model_type` -> `Adapter`."""

from __future__ import annotations

from interp.adapters import (
    bloom,
    cohere,
    falcon,
    gemma,
    gemma2,
    gemma3,
    glm,
    gpt2,
    gpt_neox,
    gptj,
    granite,
    llama,
    moe,
    olmo,
    olmo2,
    opt,
    phi,
    phi3,
    qwen3,
    smollm3,
    stablelm,
    starcoder2,
)
from interp.adapters.base import Adapter

ADAPTERS: dict[str, Adapter] = {}


def register_adapter(adapter: Adapter) -> None:
    """Make an architecture family hookable; refuses a model type that is already registered."""
    for model_type in adapter.model_types:
        if model_type in ADAPTERS:
            raise ValueError(f"model type {model_type!r} already has an adapter")
        ADAPTERS[model_type] = adapter


FAMILIES = (
    llama, gemma3, gpt_neox, gpt2, qwen3, moe, gemma, gemma2, phi, phi3, olmo, olmo2, granite, stablelm, starcoder2,
    cohere, smollm3, glm, gptj, opt, bloom, falcon,
)  # fmt: skip
"""Each family's file; one `ADAPTER` each. A new family is one file here and one entry in this tuple."""

for _module in FAMILIES:
    register_adapter(_module.ADAPTER)


def adapter_for(config) -> Adapter:
    """The adapter of a HF config, or a clear error listing the supported model types."""
    model_type = getattr(config, "model_type", None)
    if model_type not in ADAPTERS:
        raise ValueError(
            f"no hook adapter for model type {model_type!r}; supported: {', '.join(sorted(ADAPTERS))}. "
            f"Add one: a file interp/adapters/{model_type}.py with ADAPTER = Adapter(...) listed in "
            "interp.adapters.FAMILIES (docs/ARCHITECTURE.md says how), or at run time "
            "interp.adapters.register_adapter(Adapter(...))."
        )
    return ADAPTERS[model_type].for_config(config)


__all__ = ["ADAPTERS", "Adapter", "adapter_for", "register_adapter"]
