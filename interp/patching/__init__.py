"""Patching: activation patching sweeps, path patching between heads, and attribution patching.

    from interp.patching import activation_patching, attribution_patching, path_patching
    act = activation_patching(model, clean, corrupted, kind="resid_pre")            # [layer, pos]
    att = attribution_patching(model, clean, corrupted, kinds=["resid_pre", "z"])   # both, 1 fwd+bwd
    path = path_patching(model, clean, corrupted, receivers=["L9H1"], receiver_input="q")

Every result is a `PatchResult` (named axes, `.normalized()`, `.top()`, `.heatmap()`). Clean and
corrupted inputs must have the same token length; the default metric is the logit difference between
the clean and the corrupted run's answers at the last token.
"""

from interp.patching.activation import activation_patching
from interp.patching.attribution import attribution_patching
from interp.patching.path import path_patching
from interp.patching.result import PatchResult
from interp.patching.sites import HEAD_KINDS, POS_KINDS, logit_diff_metric

__all__ = [
    "HEAD_KINDS",
    "POS_KINDS",
    "PatchResult",
    "activation_patching",
    "attribution_patching",
    "logit_diff_metric",
    "path_patching",
]
