"""Module paths of 0.1 that moved in 0.2, kept importable for one version with a `DeprecationWarning`.

`import interp.jobs` gives the very module `interp.infra.jobs` (one object, one state), so code written for
0.1 keeps working while it moves to the new path. The table is the whole mechanism: nothing else is aliased.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

MOVED = {
    "interp.hooked_model": "interp.wrapper.hooked_model",
    "interp.tokens": "interp.wrapper.tokens",
    "interp.weights": "interp.wrapper.weights",
    "interp.generate": "interp.wrapper.generate",
    "interp.cache_analysis": "interp.cache.analysis",
    "interp.caching": "interp.cache.caching",
    "interp.rows": "interp.cache.rows",
    **{
        f"interp.{name}": f"interp.infra.{name}"
        for name in ("checks", "oom", "devices", "portable", "tensor_file", "safe_state", "jobs")
    },
}
"""Old dotted path -> new dotted path (see CHANGELOG.md, 0.2.0)."""


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new} in interp 0.2; import it from there (the old path goes in 0.3)",
            DeprecationWarning,
            stacklevel=3,
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the module was executed under its new name


def install() -> None:
    """Put the alias finder at the end of `sys.meta_path` (once): real modules are always found first."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.append(_Alias())
