"""interp: one hooked wrapper over real HF models, one activation-cache format, the methods on top.

    import interp
    model = interp.load_model("smollm2-135m")
    logits, cache = model.run_with_cache("Hello", names="blocks.*.hook_resid_post")

The public names below load on first use (PEP 562), so `import interp.cli.main` or `interp.store`
does not pay for torch and transformers until a command needs a model.
"""

from importlib import import_module

from interp import moved

# No HF_HUB_OFFLINE default here: only hub ids (`interp.models.hub`) reach the hub, and they honour the user's
# HF_HUB_OFFLINE; every other model, tokenizer and data spec is a local file.
moved.install()  # 0.1's module paths (interp.jobs, interp.hooked_model, ...) for one more version

__version__ = "0.2.0"

_LAZY = {
    "ActivationCache": "interp.cache",
    "HookedModel": "interp.wrapper.hooked_model",
    "StopForward": "interp.wrapper.hooked_model",
    "HookPoint": "interp.hooks.points",
    "UnknownHookError": "interp.hooks.points",
    "DEFAULT_MODEL": "interp.models",
    "list_models": "interp.models",
    "load_model": "interp.models",
}
"""Public name -> the module that defines it."""

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'interp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
