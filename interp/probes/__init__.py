"""Probes for massive activations (Sun et al. 2024) and attention sinks (Gu et al. 2025, StreamingLLM),
on any `interp.HookedModel`.

    import interp
    from interp.probes import probe_scan, ProbeConfig, run_probes
    model = interp.load_model("smollm2-135m")
    report = run_probes(model, ProbeConfig(n_seq=32))       # scan, ablations, StreamingLLM, co-occurrence

See `interp/probes/README.md` for the measured results and the commands that produce them.
"""

from interp.probes.ablation import (
    MODES,
    calibration_means,
    massive_ablation_hook,
    massive_ablations,
    perplexity,
    streaming_test,
)
from interp.probes.cooccurrence import cross_ablations, head_correlations, key_value_stats, overlap, spearman
from interp.probes.massive import MassiveCriterion, MassiveScanner, massive_mask, sequence_medians
from interp.probes.scan import PatternsNotCapturedError, probe_scan
from interp.probes.sinks import (
    DEFAULT_EPS,
    SinkScanner,
    alpha_per_key,
    attention_distance,
    head_sink_scores,
    sink_fraction,
    streaming_hook,
    window_mask,
)

__all__ = [
    "DEFAULT_EPS",
    "MODES",
    "MassiveCriterion",
    "MassiveScanner",
    "PatternsNotCapturedError",
    "SinkScanner",
    "alpha_per_key",
    "attention_distance",
    "calibration_means",
    "cross_ablations",
    "head_correlations",
    "head_sink_scores",
    "key_value_stats",
    "massive_ablation_hook",
    "massive_ablations",
    "massive_mask",
    "overlap",
    "perplexity",
    "probe_scan",
    "sequence_medians",
    "streaming_test",
    "sink_fraction",
    "spearman",
    "streaming_hook",
    "window_mask",
]
