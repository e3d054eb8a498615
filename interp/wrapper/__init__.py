"""The model face: `HookedModel` (`hooked_model`) and what it offers beside the forward pass, each in its own file:
TransformerLens-named tokens helpers (`tokens`), weights (`weights`) and KV-cached generation (`generate`).

Import `HookedModel` from `interp` (`interp.HookedModel`); this package loads nothing by itself.
"""
