"""Co-occurrence of massive activations and attention sinks.

- `overlap`: do the sink tokens carry the massive activations (and the reverse)?
- `spearman`: rank correlation across heads, e.g. sink score against attention distance without the sink
  (the Spike paper's "sinks bias heads toward short-range attention" predicts a negative rho).
- `key_value_stats`: Gu et al.'s key-bias picture: the first token's key has a small norm but a high cosine
  with the queries, and its value a small norm.
- `cross_ablations`: sinks when the massive activations are ablated, and massive activations when the
  sink is removed (every query t >= 1 barred from key 0 in every layer).
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp.probes.ablation import massive_ablation_hook
from interp.probes.massive import MassiveCriterion
from interp.probes.scan import probe_scan


def _rank(x: Tensor) -> Tensor:
    order = x.argsort()
    ranks = torch.empty_like(x, dtype=torch.float64)
    ranks[order] = torch.arange(len(x), dtype=torch.float64)
    for v in x.unique():  # average ranks over ties
        tie = x == v
        if tie.sum() > 1:
            ranks[tie] = ranks[tie].mean()
    return ranks


def spearman(x, y) -> float:
    """Spearman's rho of two equal-length sequences (NaN when either is constant)."""
    x, y = torch.as_tensor(x, dtype=torch.float64).flatten(), torch.as_tensor(y, dtype=torch.float64).flatten()
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"spearman needs two sequences of equal length >= 2, got {len(x)} and {len(y)}")
    rx, ry = _rank(x), _rank(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = float(rx.norm() * ry.norm())
    return float((rx * ry).sum()) / den if den > 0 else float("nan")


def overlap(massive_scanner, sink_scanner, use: str = "auto") -> dict:
    """Which (sequence, position) cells hold massive entries, which are sinks, and how much they coincide.

    Sink cells: position 0 of every sequence when some head has alpha_first > eps, plus every other key found
    as a sink. Massive cells: from entries passing both thresholds (`use="massive"`), the ratio alone
    (`"ratio"`), or the first of the two that is non-empty (`"auto"`).
    """
    entries = [e for e in massive_scanner.entries if e[5]]
    kind = "massive"
    if use == "ratio" or (use == "auto" and not entries):
        entries, kind = massive_scanner.entries, "over_ratio"
    massive_cells = {(e[1], e[2]) for e in entries}
    heads = sink_scanner.per_head()["alpha_first"]
    n_seq = sink_scanner.n_seq[0] if sink_scanner.n_seq else 0
    sink_cells = {(s, 0) for s in range(n_seq)} if bool((heads > sink_scanner.eps).any()) else set()
    sink_cells |= {(s, p) for _, _, s, p in sink_scanner.sinks_found}
    both = massive_cells & sink_cells
    return {
        "criterion": kind,
        "massive_cells": len(massive_cells),
        "sink_cells": len(sink_cells),
        "massive_cells_that_are_sinks": len(both) / len(massive_cells) if massive_cells else None,
        "sink_cells_with_massive": len(both) / len(sink_cells) if sink_cells else None,
    }


def head_correlations(sink_report: dict) -> dict:
    """Spearman rho across (layer, head) of alpha_first against attention distance (with and without the sink)."""
    a = torch.tensor(sink_report["alpha_first"]).flatten()
    return {
        "rho_alpha_vs_distance": spearman(a, torch.tensor(sink_report["distance"]).flatten()),
        "rho_alpha_vs_distance_no_sink": spearman(a, torch.tensor(sink_report["distance_no_sink"]).flatten()),
        "n_heads": int(a.numel()),
    }


@torch.no_grad()
def key_value_stats(model, tokens: Tensor, batch_size: int = 8) -> list[dict]:
    """Per layer (averaged over heads and sequences): key norm at position 0 vs the rest, cosine of the
    queries t >= 1 with key 0 vs with their other keys (causal), value norm at position 0 vs the rest."""
    groups = model.n_heads // model.n_kv_heads
    names = ["blocks.*.attn.hook_rot_q", "blocks.*.attn.hook_rot_k", "blocks.*.attn.hook_v"]
    acc = torch.zeros(model.n_layers, 6, dtype=torch.float64)
    n_batches = 0
    for i in range(0, tokens.shape[0], batch_size):
        _, cache = model.run_with_cache(tokens[i : i + batch_size].to(model.device), names=names, return_logits=False)
        n_batches += 1
        for layer in range(model.n_layers):
            q = cache["rot_q", layer].float()  # [b, pos, head, d]
            k = cache["rot_k", layer].float().repeat_interleave(groups, dim=2)
            v = cache["v", layer].float()
            kn, vn = k.norm(dim=-1), v.norm(dim=-1)
            qu = torch.nn.functional.normalize(q, dim=-1)
            ku = torch.nn.functional.normalize(k, dim=-1)
            cos = torch.einsum("bqhd,bkhd->bhqk", qu, ku)  # [b, head, q, k]
            n = cos.shape[-1]
            causal_other = torch.ones(n, n, device=cos.device).tril()  # query t, keys 1..t
            causal_other[:, 0] = 0
            causal_other[0] = 0
            cos_first = cos[:, :, 1:, 0].mean()
            cos_other = (cos * causal_other).sum() / (causal_other.sum() * cos.shape[0] * cos.shape[1])
            acc[layer] += torch.tensor(
                [
                    kn[:, 0].mean(),
                    kn[:, 1:].mean(),
                    float(cos_first),
                    float(cos_other),
                    vn[:, 0].mean(),
                    vn[:, 1:].mean(),
                ],
                dtype=torch.float64,
            )
    acc /= max(1, n_batches)
    keys = [
        "key_norm_first",
        "key_norm_other",
        "cos_q_key_first",
        "cos_q_key_other",
        "value_norm_first",
        "value_norm_other",
    ]
    return [{"layer": layer, **{k: float(x) for k, x in zip(keys, acc[layer])}} for layer in range(model.n_layers)]


def no_sink_hook(scores: Tensor, hook) -> Tensor:
    """A `hook_attn_scores` function that bars every query t >= 1 from key 0 (the sink removed)."""
    scores = scores.clone()
    scores[..., 1:, 0] = float("-inf")
    return scores


def cross_ablations(
    model,
    tokens: Tensor,
    layer: int,
    criterion: MassiveCriterion,
    means: dict | None,
    eps: float,
    batch_size: int = 8,
    progress: bool = False,
) -> dict:
    """Sinks with the massive entries at `layer` set to zero / to their mean, and massive activations with the
    sink removed. Each: Sink_1, mean alpha_first, the largest per-layer ratio and the number of massive entries."""

    def summary(res: dict) -> dict:
        layers = res["massive"]["layers"]
        return {
            "sink_fraction": res["sinks"]["sink_fraction"],
            "mean_alpha_first": res["sinks"]["mean_alpha_first"],
            "max_ratio": max(x["ratio"] for x in layers),
            "max_abs": max(x["max_abs"] for x in layers),
            "n_massive": sum(x["n_massive"] for x in layers),
            "n_over_ratio": sum(x["n_over_ratio"] for x in layers),
        }

    out = {"layer": layer}
    runs = {"none": [], "massive_zero": [(f"blocks.{layer}.hook_resid_post", massive_ablation_hook("zero", criterion))]}
    if means is not None:
        runs["massive_mean"] = [(f"blocks.{layer}.hook_resid_post", massive_ablation_hook("mean", criterion, means))]
    runs["sink_removed"] = [("blocks.*.attn.hook_attn_scores", no_sink_hook)]
    for name, hooks in runs.items():
        res = probe_scan(
            model, tokens, criterion=criterion, eps=eps, batch_size=batch_size, fwd_hooks=hooks, progress=progress
        )
        out[name] = summary(res)
    return out
