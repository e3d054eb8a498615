"""The SafeSeek spec's control: the units whose activations differ most between the task's two prompt sets.

A mask search earns its keep only if it beats this cheap baseline at the same budget: rank every unit
by |mean activation on the task prompts - mean activation on the contrasting prompts| at the last
prompt position (triggered vs clean for backdoor/refusal tasks; clean vs corrupted for paired tasks),
standardised within each kind (heads by the norm of their output difference, neurons by their value),
and keep the top `budget` units. Evaluate it with `circuits.evaluation.ablation.ablation_report` like any circuit.

    control = activation_difference(model, get_task("backdoor"), budget=len(safeseek_circuit.nodes))
"""

from __future__ import annotations

import torch

from circuits.finders.masks import sites_of
from circuits.format.circuit import Circuit, Node


@torch.no_grad()
def _last_means(model, ids, mask, pos, hooks: list[str]) -> dict:
    _, cache = model.run_with_cache(
        {"input_ids": ids.to(model.device), "attention_mask": mask.to(model.device)}, names=hooks, return_logits=False
    )
    rows = torch.arange(ids.shape[0], device=model.device)
    return {h: cache[h][rows, pos.to(model.device)].float().mean(0) for h in hooks}


def unit_differences(model, task, kinds=("head", "neuron"), n: int = 100, seed: int = 0) -> dict[str, torch.Tensor]:
    """|mean difference| per unit of each site (site key -> [size])."""
    if task.generate_clean is not None:
        a, b = task.make(n, seed, model.tokenizer), task.make_clean(n, seed, model.tokenizer)
        A, B = (a.ids, a.mask, a.pos), (b.ids, b.mask, b.pos)
    else:
        p = task.make_pairs(n, seed, model.tokenizer, align=False)
        if p.corrupt is None:
            raise ValueError(
                f"task {task.name!r} has no contrasting prompts (no clean split, no corrupted prompts); "
                "the activation-difference control needs two prompt sets"
            )
        A, B = (p.clean, p.clean_mask, p.clean_pos), (p.corrupt, p.corrupt_mask, p.corrupt_pos)
    sites = sites_of(model, kinds)
    hooks = sorted({s.hook for s in sites})
    ma, mb = _last_means(model, *A, hooks), _last_means(model, *B, hooks)
    out = {}
    for s in sites:
        d = (ma[s.hook] - mb[s.hook]).abs() if s.kind != "head" else (ma[s.hook] - mb[s.hook]).norm(dim=-1)
        out[s.key] = d.reshape(-1)[: s.size].cpu()
    return out


def activation_difference(model, task, budget: int, kinds=("head", "neuron"), n: int = 100, seed: int = 0) -> Circuit:
    """The `budget` units of largest standardised |activation difference|, as a circuit (no edges)."""
    diffs = unit_differences(model, task, kinds, n, seed)
    by_kind: dict[str, list[torch.Tensor]] = {}
    for key, d in diffs.items():
        by_kind.setdefault(key.rsplit("_", 1)[0], []).append(d)
    scale = {k: torch.cat(v).std().clamp(min=1e-12) for k, v in by_kind.items()}
    items = [
        (float(v) / float(scale[key.rsplit("_", 1)[0]]), key, i)
        for key, d in diffs.items()
        for i, v in enumerate(d.tolist())
    ]
    items.sort(key=lambda x: -x[0])
    nodes = sorted(Node(int(key.rsplit("_", 1)[1]), key.rsplit("_", 1)[0], i) for _, key, i in items[:budget])
    extra = {
        "node_scores": {k: [round(float(x), 5) for x in v.tolist()] for k, v in diffs.items()},
        "node_scores_meaning": "|mean activation difference| at the last prompt position (triggered vs clean, or "
        "clean vs corrupted), before standardising per kind",
    }
    return Circuit(
        nodes,
        [],
        {"n_nodes": len(nodes), "budget": budget, "n_units": len(items)},
        {"model": model.provenance, "task": task.name, "method": "activation-diff", "ablation": "zero"},
        extra,
    )
