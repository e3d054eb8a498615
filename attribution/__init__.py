"""attribution: training-data attribution on the `interp` public API.

- `attribution.sketch`: CountSketch / TensorSketch of per-example gradients from activations and output grads.
- `attribution.tracin`, `attribution.sdi`: TracIn over checkpoints; Step-Decomposed Influence for looped models.
- `attribution.influence`, `attribution.mda`: EK-FAC influence on chosen components; MDA's head probes.
- `attribution.dra`: denoised representation attribution (unsafe-sample detection, AUPRC).
- `attribution.jobs` / `attribution.cli`: sharded, resumable scoring jobs (`interp attribute ...`);
  `attribution.report`: `interp attribute show RUN` (text and an escaped HTML page).
- `attribution.adam`: LESS-style Adam-normalised gradient features; `attribution.raywatch`: cleans a local Ray
  up when the coordinating process is killed.

Importing this package registers the looped GPT with `interp`: its hook adapter
(`interp.adapters.register_adapter`) and the model spec `looped-gpt` (`interp.models.register_model`),
so `interp.load_model("looped-gpt")` works once `attribution` is imported. That costs no torch import
(`attribution.looped_spec`); `attribution.looped`, the model classes, loads on first use.
"""

from importlib import import_module

from attribution import looped_spec

looped_spec.register()  # interp.adapters.register_adapter(...) and interp.models.register_model(...), idempotent

__all__ = ["looped"]


def __getattr__(name: str):
    if name == "looped":  # torch and transformers: only when asked for
        return import_module("attribution.looped")
    raise AttributeError(f"module 'attribution' has no attribute {name!r}")
