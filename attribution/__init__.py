"""attribution: training-data attribution on the `interp` public API.

- `attribution.sketch`: CountSketch / TensorSketch of per-example gradients from activations and output grads.
- `attribution.tracin`, `attribution.sdi`: TracIn over checkpoints; Step-Decomposed Influence for looped models.
- `attribution.influence`, `attribution.mda`: EK-FAC influence on chosen components; MDA's head probes.
- `attribution.dra`: denoised representation attribution (unsafe-sample detection, AUPRC).
- `attribution.jobs` / `attribution.cli`: sharded, resumable scoring jobs (`interp attribute ...`).

Importing this package registers the looped GPT with `interp`: its hook adapter
(`interp.adapters.register_adapter`) and the model spec `looped-gpt` (`interp.models.register_model`),
so `interp.load_model("looped-gpt")` works once `attribution` is imported.
"""

from interp.adapters import ADAPTERS, register_adapter
from interp.models.registry import SPECS, register_model

from attribution import looped

if looped.MODEL_TYPE not in ADAPTERS:
    register_adapter(looped.adapter())
if "looped-gpt" not in SPECS:
    register_model(looped.model_spec())

__all__ = ["looped"]
