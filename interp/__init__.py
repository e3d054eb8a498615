"""interp: one hooked wrapper over real HF models, one activation-cache format, the methods on top.

    import interp
    model = interp.load_model("smollm2-135m")
    logits, cache = model.run_with_cache("Hello", names="blocks.*.hook_resid_post")
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is fetched from the hub at run time

from interp.cache import ActivationCache  # noqa: E402
from interp.hooked_model import HookedModel, StopForward  # noqa: E402
from interp.hooks.points import HookPoint, UnknownHookError  # noqa: E402
from interp.models import DEFAULT_MODEL, list_models, load_model  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MODEL",
    "ActivationCache",
    "HookPoint",
    "HookedModel",
    "StopForward",
    "UnknownHookError",
    "list_models",
    "load_model",
]
