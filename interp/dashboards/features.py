"""From the pass's accumulators to one plain-data record per feature: what a page shows and the JSON holds.

A record is a dict of lists and numbers (no tensors), so the HTML page, the JSON file and the
SAEDashboard/Neuronpedia export are three views of the same data. Its fields:

    feature, name, density (class), signed, n_rows, count, freq, max, min, mean_active,
    histogram {edges, counts}                        exact, active values only (all non-zero ones if signed)
    top [context], bottom [context]                  distinct text windows, best first (bottom: signed only)
    buckets [{lo, hi, fraction, examples [context]}] quantiles of the active values, random examples in each
    positions {rows [P], fires [P]}                  kept rows and firing rows per position in the sequence
    coact [[feature, jaccard, pearson, cosine]]      most co-firing features (Jaccard of firing sets), with the
    coact_rows                                       correlations of their activations, over the first coact_rows rows
    neighbours [[feature, cosine]]                   nearest decoder directions (SAE latents), or []
    logits {top [[id, v]], bottom [[id, v]], edges, counts} or None
    tokens {id: [shown text, decoded text, hover title]}   every token id the record uses

A context is {value, row, seq, pos, target, tokens [ids], values [activation per token, None = no value],
count [rows with this same window among those kept: "×N"], ablation [next-token loss change per token when the
feature is ablated there, None = not computed; only with a model, `interp.dashboards.ablation`]}.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from interp.dashboards.stats import FeatureStats
from interp.dashboards.tokens import Vocab

DENSITY_CLASSES = ("dead", "rare", "sparse", "common", "dense")
"""Firing-frequency classes: dead = never; rare < 1e-4 <= sparse < 1e-2 <= common <= dense threshold < dense."""


def density_class(freq: float, dense: float = 0.1) -> str:
    if freq <= 0:
        return "dead"
    if freq > dense:
        return "dense"
    return "rare" if freq < 1e-4 else "sparse" if freq < 1e-2 else "common"


ORDERS = ("interpretable", "max", "freq", "mean", "index")
"""Orders for `--order`: interpretable = live and not dense first, by max activation; then dense; then dead."""


def feature_order(stats: FeatureStats, order: str = "interpretable", dense: float = 0.1) -> list[int]:
    """All features, in the order the index lists them and `--top N` picks pages."""
    if order not in ORDERS:
        raise ValueError(f"--order must be one of {', '.join(ORDERS)}, got {order!r}")
    F = stats.n_features
    freq, mx, mean = stats.freq, stats.max_value.double(), stats.mean_active
    idx = torch.arange(F)
    if order == "index":
        return idx.tolist()
    if order == "freq":
        return sorted(range(F), key=lambda f: (-float(freq[f]), f))
    if order == "mean":
        return sorted(range(F), key=lambda f: (-float(mean[f]), f))
    if order == "max":
        return sorted(range(F), key=lambda f: (-float(mx[f]), f))
    group = torch.where(freq <= 0, 2, torch.where(freq > dense, 1, 0))
    return sorted(range(F), key=lambda f: (int(group[f]), -float(mx[f]), f))


class ContextFetcher:
    """Token ids around rows, fetched in one batch from the source (a store read of index columns only)."""

    def __init__(self, source: Any, before: int, after: int):
        self.source, self.before, self.after = source, before, after
        self._cache: dict[int, tuple[int, int, int]] = {}

    def prefetch(self, rows: list[int]) -> None:
        r = torch.tensor(sorted(set(rows)), dtype=torch.long)
        if not len(r):
            return
        want = (r[:, None] + torch.arange(-self.before, self.after + 1)[None]).flatten().unique()
        want = [w for w in want[want >= 0].tolist() if w not in self._cache]
        limit = len(self.source.store) if hasattr(self.source, "store") else self.source.n_rows
        want = [w for w in want if w < limit]
        if not want:
            return
        got = self.source.tokens_of(torch.tensor(want))
        for w, t, s, p in zip(want, got["tokens"].tolist(), got["seq"].tolist(), got["pos"].tolist()):
            self._cache[w] = (t, s, p)

    def context(self, value: float, row: int, win: list[float]) -> dict[str, Any]:
        cache = self._cache
        _, s0, p0 = cache[row]
        toks, vals, target = [], [], None
        for k, o in enumerate(range(-self.before, self.after + 1)):
            got = cache.get(row + o)
            w = win[k]
            if got is None or w != w or got[1] != s0 or got[2] != p0 + o:  # w != w: NaN, no token there
                continue
            if o == 0:
                target = len(toks)
            toks.append(got[0])
            vals.append(round(w, 4))
        return {
            "value": round(value, 4),
            "row": row,
            "seq": s0,
            "pos": p0,
            "target": target,
            "tokens": toks,
            "values": vals,
        }


def distinct(contexts: Iterable[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The first `n` contexts whose text windows (token ids, and which of them is the active one) differ from
    every earlier one, in the given order (best first). Each gets `count`: how many of `contexts` show that
    same window (e.g. one boilerplate line repeated across the corpus), shown as "×N" on the page; so
    `contexts` is read to the end (the tracker's kept rows: a few times `n`)."""
    first: dict[tuple, dict[str, Any]] = {}
    for c in contexts:
        key = (c["target"], tuple(c["tokens"]))
        if key in first:
            first[key]["count"] += 1
        else:
            first[key] = {**c, "count": 1}
    return list(first.values())[:n]


def feature_record(
    stats: FeatureStats,
    f: int,
    fetch: ContextFetcher,
    vocab: Vocab,
    *,
    name: str | None = None,
    n_top: int = 20,
    n_groups: int = 5,
    per_group: int = 4,
    n_coact: int = 8,
    dense: float = 0.1,
    neighbours: list[tuple[int, float]] | None = None,
    logits: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of feature `f` (see the module docstring); `fetch.prefetch` must cover its rows."""
    count = int(stats.count[f])
    freq = count / max(stats.n_rows, 1)
    rec: dict[str, Any] = {
        "feature": f,
        "name": name or f"feature {f}",
        "density": density_class(freq, dense),
        "signed": bool(stats.signed),
        "n_rows": stats.n_rows,
        "count": count,
        "freq": freq,
        "max": float(stats.max_value[f]),
        "min": float(stats.min[f]) if math.isfinite(float(stats.min[f])) else 0.0,
        "mean_active": float(stats.mean_active[f]),
    }
    edges, counts = stats.hist.trimmed(f) if stats.hist is not None else (torch.zeros(2), torch.zeros(1))
    rec["histogram"] = {"edges": [round(float(e), 5) for e in edges], "counts": counts.tolist()}
    rec["top"] = distinct((fetch.context(v, r, w) for v, r, w in stats.top.entries(f)), n_top)
    rec["bottom"] = (
        distinct((fetch.context(v, r, w) for v, r, w in stats.bottom.entries(f)), n_top)
        if stats.bottom is not None
        else []
    )
    rec["buckets"] = _buckets(stats, f, fetch, n_groups, per_group)
    rec["positions"] = {"rows": stats.pos_rows.tolist(), "fires": stats.pos_counts[f].tolist()}
    jac = stats.jaccard(f).clone()
    jac[f] = -1
    k = min(n_coact, stats.n_features - 1)
    top = jac.topk(k) if k > 0 else None
    cos, pear = stats.correlations(f)
    rec["coact"] = (
        []
        if top is None
        else [
            [int(g), round(float(j), 4), round(float(pear[g]), 4), round(float(cos[g]), 4)]
            for j, g in zip(top.values, top.indices)
            if j > 0
        ]
    )
    rec["coact_rows"] = stats.coact_rows
    rec["neighbours"] = [[int(g), round(float(c), 4)] for g, c in (neighbours or [])]
    rec["logits"] = logits
    ids = {
        t for c in rec["top"] + rec["bottom"] + [e for b in rec["buckets"] for e in b["examples"]] for t in c["tokens"]
    }
    if logits:
        ids |= {t for t, _ in logits["top"]} | {t for t, _ in logits["bottom"]}
    rec["tokens"] = {str(i): [vocab.show(i), vocab.text(i), vocab.title(i)] for i in sorted(ids)}
    return rec


def _buckets(stats: FeatureStats, f: int, fetch: ContextFetcher, n_groups: int, per_group: int) -> list[dict[str, Any]]:
    """Quantile buckets of the active values (from the exact histogram), highest first, each with up to
    `per_group` distinct random examples from the feature's uniform sample."""
    sample = [(v, r, w) for v, r, w in stats.sample.entries(f) if v > 0]
    if not sample or stats.hist is None or n_groups < 1:
        return []
    if stats.signed:  # quantiles of the positive part: the sample holds active (> 0) rows only
        vals = torch.tensor([v for v, _, _ in sample])
        qs = torch.quantile(vals.double(), torch.linspace(0, 1, n_groups + 1, dtype=torch.float64))
    else:
        qs = stats.hist.quantile(f, torch.linspace(0, 1, n_groups + 1))
    lo_v, hi_v = float(stats.min_active[f]), float(stats.max_value[f])
    qs = qs.clamp(min=lo_v, max=hi_v)  # interpolation inside a bin may step outside the data's range
    qs[0], qs[-1] = lo_v, hi_v
    out = []
    for g in range(n_groups - 1, -1, -1):
        lo, hi = float(qs[g]), float(qs[g + 1])
        inside = [s for s in sample if lo <= s[0] <= hi] if g == 0 else [s for s in sample if lo < s[0] <= hi]
        ex = distinct((fetch.context(v, r, w) for v, r, w in inside), per_group)
        out.append({"lo": round(lo, 5), "hi": round(hi, 5), "fraction": round(1 / n_groups, 4), "examples": ex})
    return out


def decoder_neighbours(
    directions: Tensor, features: list[int], k: int = 8, batch: int = 512
) -> dict[int, list[tuple[int, float]]]:
    """The k latents whose decoder directions have the highest cosine with each feature's (itself excluded)."""
    D = directions.float() / directions.float().norm(dim=-1, keepdim=True).clamp_min(1e-12)
    out = {}
    for i in range(0, len(features), batch):
        fs = features[i : i + batch]
        cos = D[fs] @ D.T
        cos[torch.arange(len(fs)), torch.tensor(fs)] = -2
        top = cos.topk(min(k, D.shape[0] - 1), dim=1)
        for j, f in enumerate(fs):
            out[f] = [(int(g), float(c)) for c, g in zip(top.values[j], top.indices[j])]
    return out
