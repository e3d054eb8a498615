"""Models with no hub at run time: named specs, local folders, GGUF files. See `registry`."""

from interp.models.registry import DEFAULT_MODEL, SPECS, ModelSpec, list_models, load_model, register_model

__all__ = ["DEFAULT_MODEL", "SPECS", "ModelSpec", "list_models", "load_model", "register_model"]
