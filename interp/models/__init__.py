"""Models: named specs, local folders, GGUF files and Hugging Face hub ids (through the HF cache). See `registry`."""

from interp.models.registry import DEFAULT_MODEL, SPECS, ModelSpec, list_models, load_model, register_model

__all__ = ["DEFAULT_MODEL", "SPECS", "ModelSpec", "list_models", "load_model", "register_model"]
