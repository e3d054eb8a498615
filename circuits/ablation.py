"""Ablating a circuit: the task metric with its nodes removed, against random node sets of the same size.

    report = ablation_report(model, circuit.nodes, task.make(200, seed=1, tokenizer=model.tokenizer), task)
    report["circuit"]["metric"], report["random"]["metric_mean"]
"""

from __future__ import annotations

import random

import torch

from circuits.format import Node
from circuits.masks import mask_hooks, nodes_to_masks, sites_of
from circuits.tasks import TaskBatch, binary_accuracy, binary_loss


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


def ablation_report(model, nodes: list[Node], batch: TaskBatch, n_random: int = 5, seed: int = 0,
                    clean: TaskBatch | None = None, means: dict | None = None) -> dict:
    """Task loss/metric: unablated, circuit ablated, and `n_random` random ablations of the same size."""
    report = {"n_nodes": len(nodes), "original": evaluate(model, batch),
              "circuit": evaluate(model, batch, ablation_hooks(model, nodes, means))}
    rand = [evaluate(model, batch, ablation_hooks(model, random_nodes(model, nodes, seed + i), means))
            for i in range(n_random)]
    report["random"] = {
        "metric_mean": sum(r["metric"] for r in rand) / max(len(rand), 1),
        "metric_min": min((r["metric"] for r in rand), default=float("nan")),
        "loss_mean": sum(r["loss"] for r in rand) / max(len(rand), 1),
        "runs": rand,
    }
    if clean is not None:
        report["clean_original"] = evaluate(model, clean)
        report["clean_circuit_ablated"] = evaluate(model, clean, ablation_hooks(model, nodes, means))
    return report
