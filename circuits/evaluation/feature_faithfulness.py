"""Faithfulness of feature circuits: keep the top-n nodes, ablate the rest through the splice, measure the metric.

A feature circuit C is a set of nodes (latents, and error nodes) at the spliced hooks. Running "C alone":
at every hook, in hook order, the nodes in C keep the value this (patched) forward gives them and every other
node takes its ablated value:

    corrupt  its value on the corrupted prompt (aligned pairs), as the node scores assumed
    mean     its mean over the clean prompts at the same position (over the rows long enough to have it): Marks
             et al. mean-ablate; per position, because a pooled mean replaces position 0's outsized residual
             (SmolLM2's attention sink, `NOTES.md`) by an ordinary one and breaks every prompt at once

so effects propagate: a kept latent at a later hook is re-encoded from a residual that earlier ablations
changed. Faithfulness = (m(C) - m(nothing)) / (m(everything) - m(nothing)), with "nothing" every latent
and every error node ablated and "everything" the whole spliced model (= the model). Error nodes follow
one rule (`errors`): "rank" (Marks et al.: they are nodes like the latents, kept when their |score| ranks
them in), "keep" (always in the circuit: the latents are scored on top of what the dictionaries miss) or
"ablate" (never in it). Whatever the rule, the curve also reports the error nodes alone and the top latents
with every error node kept and with every error node ablated (`error_share`).

    curve = feature_curve(model, dicts, batch, scores, sizes=[10, 100, 1000], errors="rank", seeds=3)
"""

from __future__ import annotations

import torch
from torch import Tensor

from circuits.finders.feature_circuit import ERRORS, FeatureScores, check_dictionaries, run_spliced
from circuits.tasks.metrics import last, metric_rows, normalised
from circuits.tasks.pairs import PairBatch

FEATURE_ABLATIONS = ("corrupt", "mean")


def _check(ablation: str, errors: str, batch: PairBatch) -> None:
    if ablation not in FEATURE_ABLATIONS:
        raise ValueError(f"unknown ablation {ablation!r}; use {', '.join(FEATURE_ABLATIONS)}")
    if errors not in ERRORS:
        raise ValueError(f"unknown error-node rule {errors!r}; use {', '.join(ERRORS)}")
    if ablation == "corrupt" and (batch.corrupt is None or not batch.aligned):
        raise ValueError("--ablation corrupt needs aligned clean/corrupt pairs; use --ablation mean")


class Ablator:
    """The ablated node values of one evaluation batch, computed once and shared by every circuit measured on it."""

    def __init__(self, model, dicts: list, batch: PairBatch, metric: str, ablation: str, batch_size: int = 16):
        _check(ablation, "rank", batch)
        self.model, self.dicts, self.metric_name, self.ablation = (
            model,
            check_dictionaries(model, dicts),
            metric,
            ablation,
        )
        self.subs = [s.to(model.device) for s in batch.split(batch_size)]
        self.refs, self.corrupt = [], []
        self.active = {d.hook: torch.zeros(d.d_sae, dtype=torch.bool) for d in self.dicts}
        sums = {d.hook: (0.0, 0.0) for d in self.dicts}
        count = 0.0
        with torch.no_grad():
            for sub in self.subs:
                clean: dict = {}
                logits = run_spliced(model, self.dicts, sub.clean, sub.clean_mask, record=clean)
                self.refs.append(last(logits, sub.clean_pos) if metric == "kl" else None)
                keep = sub.clean_mask.bool()
                w = sub.clean_mask.float()[..., None]  # per position: mean over the rows that reach it
                count = count + w.sum(0)
                for h, (f, e) in clean.items():
                    sums[h] = (sums[h][0] + (f * w).sum(0), sums[h][1] + (e * w).sum(0))
                    self.active[h] |= (f[keep] != 0).any(0).cpu()
                rec: dict = {}
                if sub.corrupt is not None:
                    run_spliced(model, self.dicts, sub.corrupt, sub.corrupt_mask, record=rec)
                    for h, (f, _) in rec.items():
                        self.active[h] |= (f[sub.corrupt_mask.bool()] != 0).any(0).cpu()
                self.corrupt.append(rec if ablation == "corrupt" else None)
        denom = count.clamp(min=1) if isinstance(count, Tensor) else 1.0
        self.means = {h: (s[0] / denom, s[1] / denom) for h, s in sums.items()}  # [pos, d_sae], [pos, d_model]

    def metric_rows(self, keep: dict[str, Tensor]) -> Tensor:
        """[n] the metric per row with only the nodes in `keep` (hook -> BoolTensor [d_sae + 1]) intact."""
        out = []
        with torch.no_grad():
            for sub, ref, rec in zip(self.subs, self.refs, self.corrupt):

                def edit(hook, f, err, rec=rec):
                    k = keep[hook].to(f.device)
                    fa, ea = rec[hook] if rec is not None else self.means[hook]
                    f = torch.where(k[:-1], f, fa.expand_as(f))
                    return f, (err if bool(k[-1]) else ea.expand_as(err))

                logits = run_spliced(self.model, self.dicts, sub.clean, sub.clean_mask, edit=edit)
                out.append(metric_rows(logits, sub, self.metric_name, ref).cpu())
        return torch.cat(out)

    def metric(self, keep: dict[str, Tensor]) -> float:
        return float(self.metric_rows(keep).mean())

    def all_nodes(self, value: bool) -> dict[str, Tensor]:
        return {d.hook: torch.full((d.d_sae + 1,), value) for d in self.dicts}


def keep_of(dicts: list, nodes: list[tuple[str, int]], errors: str) -> dict[str, Tensor]:
    """hook -> BoolTensor [d_sae + 1] of the given nodes; the error slot set by the rule unless it ranks."""
    keep = {d.hook: torch.zeros(d.d_sae + 1, dtype=torch.bool) for d in dicts}
    for h, i in nodes:
        keep[h][i] = True
    if errors != "rank":
        for k in keep.values():
            k[-1] = errors == "keep"
    return keep


def random_nodes(pool: list[tuple[str, int]], n: int, seed: int) -> list[tuple[str, int]]:
    g = torch.Generator().manual_seed(seed)
    return [pool[int(i)] for i in torch.randperm(len(pool), generator=g)[:n]]


def feature_curve(
    model,
    dicts: list,
    batch: PairBatch,
    scores: FeatureScores,
    sizes,
    metric: str = "logit-diff",
    ablation: str = "corrupt",
    errors: str = "rank",
    seeds: int = 3,
    batch_size: int = 16,
    fraction: float = 0.8,
) -> dict:
    """Faithfulness of the top-n nodes for each n in `sizes`, against `seeds` draws of n random latents (uniform
    over all latents: `random`; over the latents that fire on the batch: `random_active`).

    Beside it, what the error nodes carry, whatever the `errors` rule: `error_only` (every error node kept, every
    latent ablated), and at each size `errors_kept` (the top-n latents plus every error node) and `latents_only`
    (the top-n latents, every error node ablated: the curve of the latents alone). A circuit whose faithfulness
    comes from its error nodes says little about the latents; these numbers say how much."""
    _check(ablation, errors, batch)
    ab = Ablator(model, dicts, batch, metric, ablation, batch_size)
    full = ab.metric(ab.all_nodes(True))
    empty = ab.metric(ab.all_nodes(False))
    pool = scores.all_nodes(errors)
    active = [(h, i) for h, i in pool if i >= scores.d_sae(h) or bool(ab.active[h][i])]
    error_only = ab.metric(keep_of(ab.dicts, [], "keep"))
    points, rand, rand_active = [], [], []
    for n in sizes:
        m = ab.metric(keep_of(ab.dicts, scores.top(n, errors), errors))
        latents = scores.top(n, "ablate")
        kept = m if errors == "keep" else ab.metric(keep_of(ab.dicts, latents, "keep"))
        alone = m if errors == "ablate" else ab.metric(keep_of(ab.dicts, latents, "ablate"))
        points.append(
            {
                "n": n,
                "metric": m,
                "faithfulness": normalised(m, full, empty),
                "errors_kept": normalised(kept, full, empty),
                "latents_only": normalised(alone, full, empty),
            }
        )
        for series, p in ((rand, pool), (rand_active, active)):
            runs = [
                normalised(ab.metric(keep_of(ab.dicts, random_nodes(p, n, s), errors)), full, empty)
                for s in range(seeds)
            ]
            series.append({"n": n, "runs": [round(r, 4) for r in runs], "mean": sum(runs) / len(runs)})
    reach = [p["n"] for p in points if p["faithfulness"] >= fraction]
    return {
        "metric": metric,
        "ablation": ablation,
        "errors": errors,
        "n_rows": len(batch),
        "full_metric": full,
        "ablated_metric": empty,
        "n_latents": sum(d.d_sae for d in ab.dicts),
        "n_active_latents": int(sum(int(a.sum()) for a in ab.active.values())),
        "error_only": {"metric": error_only, "faithfulness": normalised(error_only, full, empty)},
        "points": points,
        "random": rand,
        "random_active": rand_active,
        f"nodes_for_{fraction}": min(reach) if reach else None,
        "error_share": error_share(points, normalised(error_only, full, empty)),
    }


def error_share(points: list[dict], error_only: float) -> dict:
    """The headline of what the error nodes carry: the error nodes alone, and at the largest size the circuit
    with its errors kept and its latents alone (errors ablated), with the best latents-only value of the curve."""
    if not points:
        return {"error_only": error_only}
    last = points[-1]
    best = max(points, key=lambda p: p["latents_only"] if p["latents_only"] == p["latents_only"] else float("-inf"))
    return {
        "error_only": error_only,
        "largest_n": last["n"],
        "errors_kept": last["errors_kept"],
        "latents_only": last["latents_only"],
        "latents_only_best": best["latents_only"],
        "latents_only_best_n": best["n"],
    }


def exact_node_effect(
    model, dicts: list, batch: PairBatch, hook: str, index: int, metric: str = "logit-diff", alpha: float = 1.0
) -> float:
    """Mean over rows of m(node moved alpha of the way to its corrupted value) - m(clean): the exact counterpart of a
    node score (index d_sae: the error node). Every other node keeps the value the forward gives it."""
    dicts = check_dictionaries(model, dicts)
    d = next(x for x in dicts if x.hook == hook)
    with torch.no_grad():
        rec: dict = {}
        run_spliced(model, [d], batch.corrupt, batch.corrupt_mask, record=rec)
        fk, ek = rec[hook]
        clean = metric_rows(run_spliced(model, dicts, batch.clean, batch.clean_mask), batch, metric)

        def edit(h, f, err):
            if h != hook:
                return f, err
            if index == d.d_sae:
                return f, err + alpha * (ek - err)
            f = f.clone()
            f[..., index] += alpha * (fk[..., index] - f[..., index])
            return f, err

        patched = metric_rows(run_spliced(model, dicts, batch.clean, batch.clean_mask, edit=edit), batch, metric)
    return float((patched - clean).mean())


__all__ = ["Ablator", "FEATURE_ABLATIONS", "exact_node_effect", "feature_curve", "keep_of"]
