"""Head-level analyses over a `HookedModel`: detectors, induction scores, composition scores, OV/QK spectra.

    from interp.analysis import detect_head, induction_scores, composition_scores, OV_eigenvalues
    detect_head(model, "Mary and John ... Mary", "duplicate_token_head")     # [layer, head], TL's numbers
    induction_scores(model, seq_len=50)                                       # repeated random tokens
    composition_scores(model, "Q")                                            # [L1, H1, L2, H2], chunked

Names and semantics follow TransformerLens (`head_detector.detect_head`, `all_composition_scores`,
`FactoredMatrix.eigenvalues` / `.S`); each is tested against TL on the same weights.
"""

from interp.analysis.composition import composition_scores
from interp.analysis.heads import (
    HEAD_NAMES,
    detect_head,
    detection_pattern,
    induction_scores,
    repeated_random_tokens,
)
from interp.analysis.spectra import (
    OV_eigenvalues,
    OV_singular_values,
    QK_eigenvalues,
    QK_singular_values,
    copying_scores,
)

__all__ = [
    "HEAD_NAMES",
    "OV_eigenvalues",
    "OV_singular_values",
    "QK_eigenvalues",
    "QK_singular_values",
    "composition_scores",
    "copying_scores",
    "detect_head",
    "detection_pattern",
    "induction_scores",
    "repeated_random_tokens",
]
