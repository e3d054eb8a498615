"""Ablating a circuit: necessity (its nodes removed) and sufficiency (only its nodes kept), each against
the distribution over random node sets of the same size and kinds.

One ablation vocabulary is shared by every finder, `circuits ablate` and the circuit file
(`provenance["ablation"]`): `zero` (SafeSeek's), `mean` (each unit's mean activation over the task
prompts; weight-sparse pruning's), `corrupt` (the unit's activation on the corrupted prompt; edge
circuits from EAP / EAP-IG, which need aligned pairs). `default_ablation(method)` gives each method's
paper default; a circuit is evaluated with the ablation it was found with unless asked otherwise.

    report = ablation_report(model, circuit.nodes, task.make(200, seed=1, tokenizer=model.tokenizer), n_random=20)
    report["necessity"]["metric"], report["random_necessity"]["metric_quantiles"]
"""

from __future__ import annotations

import random

import torch

from circuits.finders.masks import mask_hooks, nodes_to_masks, sites_of
from circuits.format.circuit import Node
from circuits.tasks.binary import TaskBatch, binary_accuracy, binary_loss

ABLATIONS = ("zero", "mean", "corrupt")
DEFAULT_ABLATION = {
    "safeseek": "zero",
    "prune": "mean",
    "eap": "corrupt",
    "eap-ig": "corrupt",
    "activation-diff": "zero",
}


def default_ablation(method: str) -> str:
    """The ablation each method's paper uses."""
    return DEFAULT_ABLATION.get(method, "mean")


def check_ablation(ablation: str, method: str | None = None) -> str:
    """The ablation kind, checked (and "auto" -> the method's default)."""
    if ablation == "auto":
        return default_ablation(method or "")
    if ablation not in ABLATIONS:
        raise ValueError(f"unknown ablation {ablation!r}; use {', '.join(ABLATIONS)} or auto")
    if ablation == "corrupt" and method in ("safeseek", "prune", "activation-diff"):
        raise ValueError(
            f"--ablation corrupt is for edge circuits (eap, eap-ig); {method} ablates units to zero or mean"
        )
    return ablation


@torch.no_grad()
def evaluate(model, batch: TaskBatch, fwd_hooks=(), batch_size: int = 64) -> dict:
    """Binary task loss and accuracy of `model` (with hooks) on a batch."""
    losses, accs, n = 0.0, 0.0, 0
    for sub in batch.split(batch_size):
        sub = sub.to(model.device)
        with model.hooks(fwd_hooks=list(fwd_hooks)):
            logits = model({"input_ids": sub.ids, "attention_mask": sub.mask})
        losses += float(binary_loss(logits, sub)) * len(sub)
        accs += binary_accuracy(logits, sub) * len(sub)
        n += len(sub)
    return {"loss": losses / n, "metric": accs / n}


def ablation_hooks(model, nodes: list[Node], means: dict | None = None, keep_only: bool = False) -> list:
    """fwd_hooks that zero- (or mean-) ablate the nodes; `keep_only` ablates everything else of their kinds."""
    if not nodes:
        return []
    sites, values = nodes_to_masks(model, nodes, keep=keep_only)
    return mask_hooks(sites, values, None if means is None else {s.key: means[s.key] for s in sites})


def random_nodes(model, like: list[Node], seed: int) -> list[Node]:
    """As many random nodes of each kind as `like` has, drawn uniformly over all units of that kind."""
    rng = random.Random(seed)
    out: list[Node] = []
    counts: dict[str, int] = {}
    for n in like:
        counts[n.kind] = counts.get(n.kind, 0) + 1
    for kind, count in sorted(counts.items()):
        units = [(s.layer, i) for s in sites_of(model, [kind]) for i in range(s.size)]
        out += [Node(layer, kind, i) for layer, i in rng.sample(units, count)]
    return out


def _summary(runs: list[dict]) -> dict:
    """Mean, min, max and the 5/25/50/75/95% quantiles of the metric (and mean loss) over random draws."""
    if not runs:
        return {"n": 0}
    m = torch.tensor([r["metric"] for r in runs])
    q = torch.quantile(m, torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95])).tolist()
    return {
        "n": len(runs),
        "metric_mean": float(m.mean()),
        "metric_min": float(m.min()),
        "metric_max": float(m.max()),
        "metric_quantiles": dict(zip(("5%", "25%", "50%", "75%", "95%"), q)),
        "loss_mean": sum(r["loss"] for r in runs) / len(runs),
        "runs": runs,
    }


def ablation_report(
    model,
    nodes: list[Node],
    batch: TaskBatch,
    n_random: int = 20,
    seed: int = 0,
    clean: TaskBatch | None = None,
    means: dict | None = None,
    kinds=None,
) -> dict:
    """Task loss/metric: unablated; circuit ablated (necessity); only the circuit kept, every other unit of
    `kinds` ablated (sufficiency); and both for `n_random` random node sets of the same size and kinds."""
    kinds = sorted(set(kinds or ()) | {n.kind for n in nodes})

    def keep_only(ns):
        sites, values = nodes_to_masks(model, ns, kinds=kinds, keep=True)
        return mask_hooks(sites, values, None if means is None else {s.key: means[s.key] for s in sites})

    report = {
        "n_nodes": len(nodes),
        "kinds": kinds,
        "original": evaluate(model, batch),
        "necessity": evaluate(model, batch, ablation_hooks(model, nodes, means)),
        "sufficiency": evaluate(model, batch, keep_only(nodes)) if kinds else None,
    }
    draws = [random_nodes(model, nodes, seed + i) for i in range(n_random)]
    report["random_necessity"] = _summary([evaluate(model, batch, ablation_hooks(model, d, means)) for d in draws])
    report["random_sufficiency"] = _summary([evaluate(model, batch, keep_only(d)) for d in draws]) if kinds else None
    report["circuit"] = report["necessity"]  # the name older reports used
    if clean is not None:
        report["clean_original"] = evaluate(model, clean)
        report["clean_circuit_ablated"] = evaluate(model, clean, ablation_hooks(model, nodes, means))
    return report
