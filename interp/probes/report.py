"""`run_probes`: every probe on one model and corpus, as one JSON-able report (what `interp probe` writes).

Steps: the probe scan (massive activations + sinks) on natural text; Gu et al.'s Sink_1 on natural, random
and repeated-token sequences; the Sun et al. interventions at the first massive layer; the StreamingLLM
test; the co-occurrence analyses (overlap, head correlations, key/value norms, cross ablations).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import torch

from interp.data import resolve_corpus
from interp.probes.ablation import MODES, calibration_means, check_tokens, massive_ablations, streaming_test
from interp.probes.cooccurrence import cross_ablations, head_correlations, key_value_stats, overlap
from interp.probes.massive import MassiveCriterion
from interp.probes.scan import probe_scan
from interp.probes.sinks import DEFAULT_EPS


@dataclass
class ProbeConfig:
    """Settings of `run_probes` (the CLI mirrors them one to one)."""

    data: str = "stdlib-docs"
    """Corpus spec (`interp.data.resolve_corpus`): stdlib-docs, pydoc-topics, usr-share-doc (varies with the
    installed packages), file:PATH, dir:PATH, ..."""
    ctx_len: int = 128
    """Tokens per sequence for the scan and the ablations."""
    bos: bool = False
    """Put the tokenizer's BOS token at position 0 of every natural-text row (rows are cut from inside
    documents otherwise); models trained with BOS (Gemma) form their sinks on it."""
    n_seq: int = 32
    """Sequences scanned."""
    n_calib: int = 16
    """Calibration sequences for the mean ablation (disjoint from the scanned and evaluated ones)."""
    n_eval: int = 16
    """Sequences for the ablation perplexities."""
    abs_threshold: float = 100.0
    ratio_threshold: float = 1000.0
    eps: float = DEFAULT_EPS
    """Gu et al.'s sink threshold on alpha_first."""
    gu_len: int = 64
    """T of Gu et al.'s Sink_1 on natural / random / repeated-token sequences."""
    stream_ctx: int = 512
    """Sequence length of the StreamingLLM test (0 skips it)."""
    stream_window: int = 128
    stream_sinks: tuple[int, ...] = (0, 1, 4)
    n_stream: int = 4
    batch_size: int = 8
    seed: int = 0
    cross: bool = True
    """Run the cross ablations (sinks without massive activations and the reverse)."""
    ablation_layer: str = "onset"
    """Where the interventions hook: "onset" (first layer where at least half the scanned sequences have a
    massive entry: the start of the plateau), "first" (first layer with any massive entry, Sun et al.'s
    wording), or a layer number."""
    modes: tuple[str, ...] = field(default=MODES)

    def __post_init__(self):
        MassiveCriterion(self.abs_threshold, self.ratio_threshold)  # validates
        if not 0 <= self.eps <= 1:
            raise ValueError(f"eps must be in [0, 1], got {self.eps}; Gu et al. use 0.3")
        for name in ("ctx_len", "n_seq", "n_calib", "n_eval", "gu_len", "batch_size", "stream_window", "n_stream"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.ctx_len < 2 or self.gu_len < 2:
            raise ValueError("ctx_len and gu_len must be >= 2")
        if self.ablation_layer not in ("onset", "first") and not str(self.ablation_layer).isdigit():
            raise ValueError(f"ablation_layer must be 'onset', 'first' or a layer number, got {self.ablation_layer!r}")
        bad = [m for m in self.modes if m not in MODES]
        if bad:
            raise ValueError(f"unknown ablation modes {bad}; choose from {', '.join(MODES)}")

    @property
    def criterion(self) -> MassiveCriterion:
        return MassiveCriterion(self.abs_threshold, self.ratio_threshold)


def load_rows(model, spec: str, ctx_len: int, n_rows: int, seed: int, bos: bool = False):
    """`n_rows` corpus rows of `ctx_len` tokens (an error naming the source when there are none); with
    `bos`, position 0 of every row is the tokenizer's BOS token."""
    if model.tokenizer is None:
        raise ValueError("the model has no tokenizer; the probes need one to build a corpus")
    corpus = resolve_corpus(spec, model.tokenizer, ctx_len=ctx_len, max_tokens=ctx_len * n_rows, seed=seed)
    if corpus.tokens.shape[0] == 0:
        raise ValueError(
            f"empty corpus: {spec!r} gave no rows of {ctx_len} tokens; use another --data or a smaller --ctx-len"
        )
    if bos:
        bos_id = model.tokenizer.bos_token_id
        if bos_id is None:
            raise ValueError(f"{model.name}'s tokenizer has no BOS token; run without --bos")
        corpus.tokens = corpus.tokens.clone()
        corpus.tokens[:, 0] = bos_id
    return corpus


def gu_sink_fractions(model, natural, cfg: ProbeConfig) -> dict:
    """Sink_1 (and mean alpha_first) on natural text, uniform random tokens, and one token repeated T times."""
    gen = torch.Generator().manual_seed(cfg.seed)
    n, t = natural.shape[0], cfg.gu_len
    vocab = min(model.d_vocab, len(model.tokenizer)) if model.tokenizer is not None else model.d_vocab
    rand = torch.randint(0, vocab, (n, t), generator=gen)
    repeat = natural[:, :1].expand(n, t).clone()
    out = {}
    for name, rows in (("natural", natural[:, :t]), ("random", rand), ("repeat", repeat)):
        s = probe_scan(model, rows, criterion=cfg.criterion, eps=cfg.eps, batch_size=cfg.batch_size, progress=False)[
            "sinks"
        ]
        out[name] = {
            "sink_fraction": s["sink_fraction"],
            "mean_alpha_first": s["mean_alpha_first"],
            "sink_fraction_per_layer": s["sink_fraction_per_layer"],
        }
    return out


def first_massive_layer(massive: dict, which: str = "onset") -> tuple[int | None, str]:
    """The intervention layer and the criterion that found it: entries passing both thresholds, else the
    ratio alone. `which`: "first" (any entry), "onset" (entries in at least half the sequences), or a number."""
    kind = "massive" if massive["massive"]["first_layer"] is not None else "over_ratio"
    if str(which).isdigit():
        return int(which), kind
    if which == "first" or massive[kind]["first_layer"] is None:
        return massive[kind]["first_layer"], kind
    key = "n_massive" if kind == "massive" else "n_over_ratio"
    for layer in massive["layers"]:
        if layer[key] >= massive["n_seq"] / 2:
            return layer["layer"], kind
    return massive[kind]["first_layer"], kind


def run_probes(model, cfg: ProbeConfig | None = None, progress: bool = True, log=print) -> dict:
    """Every probe on `model`; returns the report (JSON-able)."""
    cfg = cfg or ProbeConfig()
    t0 = time.perf_counter()
    n_rows = cfg.n_seq + cfg.n_calib + cfg.n_eval
    if model.n_ctx and cfg.ctx_len > model.n_ctx:  # before a [ctx, ctx] mask of that size is built
        raise ValueError(
            f"ctx_len {cfg.ctx_len} exceeds the model's context of {model.n_ctx}; use --ctx-len {model.n_ctx} or less"
        )
    corpus = load_rows(model, cfg.data, cfg.ctx_len, n_rows, cfg.seed, cfg.bos)
    rows = check_tokens(corpus.tokens)
    if rows.shape[0] < 3:
        raise ValueError(
            f"{cfg.data!r} gave only {rows.shape[0]} rows; need at least 3 (scan, calibration, evaluation)"
        )
    n_scan = min(cfg.n_seq, rows.shape[0] - 2)
    scan_rows = rows[:n_scan]
    rest = rows[n_scan:]
    n_calib = max(1, min(cfg.n_calib, rest.shape[0] // 2))
    calib_rows, eval_rows = rest[:n_calib], rest[n_calib : n_calib + cfg.n_eval]
    report: dict = {
        "model": dict(
            model.provenance, name=model.name, n_layers=model.n_layers, n_heads=model.n_heads, d_model=model.d_model
        ),
        "config": dataclasses.asdict(cfg),
        "corpus": corpus.describe(),
    }
    log(f"probe scan: {tuple(scan_rows.shape)} tokens")
    scan, mscan, sscan = probe_scan(
        model,
        scan_rows,
        criterion=cfg.criterion,
        eps=cfg.eps,
        batch_size=cfg.batch_size,
        progress=progress,
        return_scanners=True,
    )
    report.update(scan)
    log("Gu et al. Sink_1: natural / random / repeated token")
    report["gu"] = gu_sink_fractions(model, scan_rows, cfg)
    layer, kind = first_massive_layer(scan["massive"], cfg.ablation_layer)
    report["first_massive_layer"] = {
        "layer": layer,
        "criterion": kind,
        "rule": cfg.ablation_layer,
        "first_any": scan["massive"][kind]["first_layer"],
    }
    channels = [int(c) for c in scan["massive"][kind]["channels"]] if layer is not None else []
    if layer is not None:
        crit = cfg.criterion if kind == "massive" else MassiveCriterion(0.0, cfg.ratio_threshold)
        log(f"interventions at layer {layer} ({kind}): {', '.join(cfg.modes)}")
        report["ablations"] = massive_ablations(
            model, eval_rows, layer, crit, calib_rows, channels, cfg.modes, cfg.batch_size, progress
        )
        report["ablations"]["criterion"] = kind
    else:
        report["ablations"] = None
    if cfg.stream_ctx:
        if model.n_ctx and cfg.stream_ctx > model.n_ctx:
            raise ValueError(f"stream_ctx {cfg.stream_ctx} exceeds the model's context {model.n_ctx}")
        stream = load_rows(model, cfg.data, cfg.stream_ctx, cfg.n_stream, cfg.seed + 1, cfg.bos).tokens
        log(f"StreamingLLM test: {tuple(stream.shape)}, window {cfg.stream_window}")
        report["streaming"] = streaming_test(
            model,
            stream,
            cfg.stream_window,
            cfg.stream_sinks,
            batch_size=max(1, cfg.batch_size // 4),
            progress=progress,
        )
    log("co-occurrence")
    co = {
        "overlap": overlap(mscan, sscan),
        "heads": head_correlations(scan["sinks"]),
        "key_value": key_value_stats(model, scan_rows[: min(8, n_scan)], cfg.batch_size),
    }
    if cfg.cross and layer is not None:
        crit = cfg.criterion if kind == "massive" else MassiveCriterion(0.0, cfg.ratio_threshold)
        means = calibration_means(model, calib_rows, layer, crit, cfg.batch_size)
        co["cross"] = cross_ablations(model, eval_rows, layer, crit, means, cfg.eps, cfg.batch_size)
    report["cooccurrence"] = co
    report["seconds"] = round(time.perf_counter() - t0, 1)
    return report


def headline(report: dict) -> dict:
    """The few numbers a reader wants first."""
    m = report["massive"]
    layer = report["first_massive_layer"]["layer"]
    abl = report.get("ablations") or {}
    top = max(m["layers"], key=lambda x: x["max_abs"])
    out = {
        "first_massive_layer": layer,
        "massive_criterion": report["first_massive_layer"]["criterion"],
        "top_abs": round(top["max_abs"], 1),
        "top_layer": top["layer"],
        "top_ratio": round(max(x["ratio"] for x in m["layers"]), 1),
        "channels": list(m[report["first_massive_layer"]["criterion"]]["channels"])[:5] if layer is not None else [],
        "sink_fraction": round(report["sinks"]["sink_fraction"], 3),
        "gu": {k: round(v["sink_fraction"], 3) for k, v in report["gu"].items()},
    }
    for mode in ("original", *MODES):
        if mode in abl:
            out[f"ppl_{mode}"] = round(abl[mode]["ppl"], 3)
    if "streaming" in report:
        out["streaming"] = {k: round(v["ppl"], 3) for k, v in report["streaming"].items() if isinstance(v, dict)}
    return out
