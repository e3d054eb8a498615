"""Probes run on each trained variant of the decoupling experiment, and the table that compares them."""

from __future__ import annotations

import torch

from interp.probes.ablation import perplexity
from interp.probes.cooccurrence import head_correlations, overlap
from interp.probes.massive import MassiveCriterion
from interp.probes.scan import probe_scan

LOW_RATIO = 100.0
"""A looser ratio, reported beside Sun et al.'s 1000x because tiny models sit far under it."""


def measure_variant(model, eval_rows: torch.Tensor, batch_size: int = 16) -> dict:
    """Held-out perplexity, massive activations (Sun's criterion and ratio-only), Sink_1 and their overlap."""
    res, mscan, sscan = probe_scan(
        model, eval_rows, criterion=MassiveCriterion(), batch_size=batch_size, progress=False, return_scanners=True
    )
    low, mlow, slow = probe_scan(
        model,
        eval_rows,
        criterion=MassiveCriterion(0.0, LOW_RATIO),
        batch_size=batch_size,
        progress=False,
        return_scanners=True,
    )
    layers = res["massive"]["layers"]
    best = max(layers, key=lambda x: x["ratio"])
    top_pos0 = sum(1 for x in layers for t in x["top"][:1] if t["pos"] == 0) / len(layers)
    return {
        "ppl": perplexity(model, eval_rows, batch_size=batch_size)["ppl"],
        "max_abs": max(x["max_abs"] for x in layers),
        "max_ratio": best["ratio"],
        "max_ratio_layer": best["layer"],
        "ratio_per_layer": [x["ratio"] for x in layers],
        "top1_at_pos0_share": top_pos0,
        "top_channel": best["top"][0]["channel"],
        "n_massive": res["massive"]["massive"]["n_entries"],
        "n_over_1000x": res["massive"]["over_ratio"]["n_entries"],
        "n_over_100x": low["massive"]["over_ratio"]["n_entries"],
        "over_100x_at_pos0": low["massive"]["over_ratio"].get("share_at_position_0"),
        "sink_fraction": res["sinks"]["sink_fraction"],
        "sink_fraction_per_layer": res["sinks"]["sink_fraction_per_layer"],
        "mean_alpha_first": res["sinks"]["mean_alpha_first"],
        "overlap_100x": overlap(mlow, slow, use="ratio"),
        "heads": head_correlations(res["sinks"]),
    }


def co_occur(r: dict, sink_min: float = 0.1) -> str:
    """ "both" when heads sink (Sink_1 >= sink_min) and >= 100x spikes sit on the first token; else which one."""
    spikes = r["n_over_100x"] > 0 and (r["over_100x_at_pos0"] or 0) >= 0.5
    sinks = r["sink_fraction"] >= sink_min
    return {(True, True): "both", (True, False): "spikes only", (False, True): "sinks only", (False, False): "neither"}[
        (spikes, sinks)
    ]


def decoupling_table(results: dict) -> str:
    """A markdown table, one row per variant."""
    head = (
        "| variant | held-out ppl | max abs h | max ratio (layer) | entries > 100x (share at pos 0) | "
        "Sun-massive entries | Sink_1 (eps 0.3) | mean alpha_1 | rho(alpha_1, dist w/o sink) | co-occur |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for v, r in results.items():
        share = r["over_100x_at_pos0"]
        rows.append(
            f"| {v} | {r['ppl']:.3f} | {r['max_abs']:.1f} | {r['max_ratio']:.0f} ({r['max_ratio_layer']}) | "
            f"{r['n_over_100x']} ({'-' if share is None else f'{share:.2f}'}) | {r['n_massive']} | "
            f"{100 * r['sink_fraction']:.1f}% | {r['mean_alpha_first']:.3f} | "
            f"{r['heads']['rho_alpha_vs_distance_no_sink']:.2f} | {co_occur(r)} |"
        )
    return head + "\n".join(rows)
