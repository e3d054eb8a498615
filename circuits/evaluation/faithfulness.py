"""Faithfulness and minimality of circuits, measured with exact edge patching (`circuits.evaluation.edge_patching`).

Faithfulness of a circuit C = (m(C alone) - m(nothing)) / (m(whole model) - m(nothing)): the fraction of
the clean-vs-ablated metric gap that C recovers when every edge outside C is ablated (from the
corrupted run, the mean, or zero). A *faithfulness curve* sweeps the circuit size (edges kept, best
first by each method's own ranking); minimality is read off it as the smallest size reaching a given
fraction. Random circuits of the same size give the floor.

Node finders (SafeSeek masks, weight-sparse pruning) rank heads, not edges; a set of heads is turned into
the edges among them (`head_edges`): an edge is kept when its upstream end is the input, an MLP or a
kept head, and its downstream end is an MLP, the logits or an input of a kept head (a key/value head
counts as kept when any head of its group is). MLPs are never removed in that mapping, so node curves
start higher than edge curves at small sizes; the x axis is the number of edges either way.

    curve = edge_curve(model, batch, scores, sizes=[10, 100, 1000], metric="logit-diff")
"""

from __future__ import annotations

import torch
from torch import Tensor

from circuits.evaluation.edge_patching import patched_metric, upstream_means
from circuits.model.residual_graph import EdgeGraph
from circuits.tasks.metrics import normalised


def _endpoints(model, batch, graph, metric, ablation, means, batch_size, cache) -> tuple[float, float]:
    full = patched_metric(model, batch, graph.valid, metric, ablation, means, batch_size, graph, cache)["metric"].mean()
    empty = patched_metric(
        model, batch, torch.zeros_like(graph.valid), metric, ablation, means, batch_size, graph, cache
    )["metric"].mean()
    return float(full), float(empty)


def _point(model, batch, graph, mask, metric, ablation, means, batch_size, full, empty, cache) -> dict:
    r = patched_metric(model, batch, mask, metric, ablation, means, batch_size, graph, cache)
    m = float(r["metric"].mean())
    return {
        "n_edges": int((mask & graph.valid).sum()),
        "metric": m,
        "faithfulness": normalised(m, full, empty),
        "accuracy": float(r["accuracy"].mean()),
    }


def masks_curve(
    model,
    batch,
    graph: EdgeGraph,
    masks: list[Tensor],
    metric: str = "logit-diff",
    ablation: str = "corrupt",
    batch_size: int = 16,
    cache: dict | None = None,
) -> dict:
    """Faithfulness of each edge mask, with the whole-model and all-ablated endpoints.

    `cache`: pass the same dict to several curves on the same batch to share the corrupted runs, the
    means and the endpoints."""
    cache = {} if cache is None else cache  # the corrupted runs are shared by every point
    key = ("endpoints", metric, ablation)
    if ablation == "mean" and "means" not in cache:
        cache["means"] = upstream_means(model, batch, graph, batch_size)
    means = cache.get("means") if ablation == "mean" else None
    if key not in cache:
        cache[key] = _endpoints(model, batch, graph, metric, ablation, means, batch_size, cache)
    full, empty = cache[key]
    points = [_point(model, batch, graph, m, metric, ablation, means, batch_size, full, empty, cache) for m in masks]
    return {"full_metric": full, "ablated_metric": empty, "points": points}


def edge_curve(model, batch, scores, sizes, metric="logit-diff", ablation="corrupt", batch_size=16, cache=None) -> dict:
    """Faithfulness of the top-n edges of an `EdgeScores` for each n in `sizes`."""
    return masks_curve(
        model, batch, scores.graph, [scores.top_mask(n) for n in sizes], metric, ablation, batch_size, cache
    )


def head_edges(graph: EdgeGraph, heads: set[tuple[int, int]]) -> Tensor:
    """BoolTensor [n_up, n_down]: the edges among the kept heads, the input, every MLP and the logits."""
    up_ok = torch.ones(len(graph.upstream), dtype=torch.bool)
    down_ok = torch.ones(len(graph.downstream), dtype=torch.bool)
    group = graph.n_heads // graph.n_kv
    for layer in range(graph.n_layers):
        for h in range(graph.n_heads):
            up_ok[graph.head_up(layer, h)] = (layer, h) in heads
        sl = graph.attn_down(layer)
        for i in range(sl.stop - sl.start):
            if i < graph.n_heads:
                keep = (layer, i) in heads
            else:
                g = (i - graph.n_heads) % graph.n_kv
                keep = any((layer, g * group + j) in heads for j in range(group))
            down_ok[sl.start + i] = keep
    return graph.valid & up_ok[:, None] & down_ok[None, :]


def node_curve(
    model,
    batch,
    graph: EdgeGraph,
    head_order: list[tuple[int, int]],
    sizes,
    metric="logit-diff",
    ablation="corrupt",
    batch_size=16,
    cache=None,
) -> dict:
    """Faithfulness of the first k heads of `head_order` (as their induced edges) for each k in `sizes`."""
    masks = [head_edges(graph, set(head_order[:k])) for k in sizes]
    out = masks_curve(model, batch, graph, masks, metric, ablation, batch_size, cache)
    for p, k in zip(out["points"], sizes):
        p["n_heads"] = k
    return out


def random_masks(graph: EdgeGraph, n: int, draws: int, seed: int = 0) -> list[Tensor]:
    """`draws` random sets of n edges of the graph."""
    g = torch.Generator().manual_seed(seed)
    flat = torch.nonzero(graph.valid.flatten())[:, 0]
    out = []
    for _ in range(draws):
        m = torch.zeros(graph.valid.numel(), dtype=torch.bool)
        m[flat[torch.randperm(len(flat), generator=g)[:n]]] = True
        out.append(m.view_as(graph.valid))
    return out


def _component_up(graph: EdgeGraph, down: int, gen: torch.Generator) -> int | None:
    """The upstream node written by the component that downstream node `down` feeds (None: the logits).

    A head's q input leads to that head; a key/value head's k or v input to one head of its group, drawn at random;
    an MLP's input to that MLP."""
    if down == graph.logits_down:
        return None
    layer, r = divmod(down, graph.down_per_layer)
    if r == graph.n_attn_in:
        return graph.mlp_up(layer)
    if r < graph.n_heads:
        return graph.head_up(layer, r)
    group = graph.n_heads // graph.n_kv
    g = (r - graph.n_heads) % graph.n_kv
    return graph.head_up(layer, g * group + int(torch.randint(group, (1,), generator=gen)))


def random_connected_masks(graph: EdgeGraph, n: int, draws: int, seed: int = 0) -> list[Tensor]:
    """`draws` sets of n edges, each the union of random input-to-logits paths.

    A path starts at the input, takes a random edge out of the current upstream node (uniform over the
    downstream nodes it feeds), moves to the component that edge enters (`_component_up`) and goes on until
    it reaches the logits. Paths are added until n edges are kept; the last path is cut to fit. Unlike
    `random_masks` (whose edges almost never join the input to the logits, so they score ~0 whatever the
    method found), such a circuit carries signal from the input to the output: the stronger control."""
    gen = torch.Generator().manual_seed(seed)
    return [_as_mask(graph, _connected_order(graph, n, gen)) for _ in range(draws)]


def _connected_order(graph: EdgeGraph, n: int, gen: torch.Generator) -> list[tuple[int, int]]:
    """The first n distinct edges met along random input-to-logits paths, in the order they were met."""
    n = min(n, graph.n_edges)
    valid = graph.valid
    seen = torch.zeros_like(valid)
    order: list[tuple[int, int]] = []
    for _attempt in range(50 * n + 100):  # each path adds >= 1 new edge unless it repeats old ones
        if len(order) >= n:
            break
        up = 0
        while up is not None and len(order) < n:
            downs = torch.nonzero(valid[up])[:, 0]
            down = int(downs[torch.randint(len(downs), (1,), generator=gen)])
            if not seen[up, down]:
                seen[up, down] = True
                order.append((up, down))
            up = _component_up(graph, down, gen)
    return order


def _as_mask(graph: EdgeGraph, edges: list[tuple[int, int]]) -> Tensor:
    m = torch.zeros_like(graph.valid)
    if edges:
        idx = torch.tensor(edges)
        m[idx[:, 0], idx[:, 1]] = True
    return m


def nested_random_masks(graph: EdgeGraph, sizes: list[int], seed: int, connected: bool = False) -> list[Tensor]:
    """One random draw at every size, nested: one random order of edges (uniform; or, `connected`, the edges of
    random input-to-logits paths in the order `random_connected_masks` adds them), and at size n its first n
    edges. The circuit at a smaller size is a subset of the one at a larger size, so the control's curve moves
    by adding edges, not by redrawing them (fresh draws per size made the complement jump between sizes)."""
    gen = torch.Generator().manual_seed(seed)
    top = min(max(sizes, default=0), graph.n_edges)
    if connected:
        order = _connected_order(graph, top, gen)
    else:
        flat = torch.nonzero(graph.valid.flatten())[:, 0]
        pick = flat[torch.randperm(len(flat), generator=gen)[:top]]
        order = [(int(i) // graph.valid.shape[1], int(i) % graph.valid.shape[1]) for i in pick]
    return [_as_mask(graph, order[: min(n, top)]) for n in sizes]


def minimal_size(points: list[dict], fraction: float = 0.8) -> int | None:
    """The smallest n_edges on a curve whose faithfulness reaches `fraction` (None: never)."""
    ok = [p["n_edges"] for p in points if p["faithfulness"] >= fraction]
    return min(ok) if ok else None


def edge_circuit_report(
    model,
    circuit,
    task,
    n: int = 64,
    seed: int = 0,
    ablation: str = "corrupt",
    n_random: int = 5,
    metric: str | None = None,
    batch_size: int = 16,
) -> dict:
    """Sufficiency (the circuit alone) and necessity (the circuit's edges ablated, the rest kept) of a saved edge
    circuit, each against `n_random` random edge sets of the same size."""
    from circuits.format.edge_circuit import circuit_mask, graph_of

    graph = graph_of(circuit)
    mask = circuit_mask(circuit)
    metric = metric or circuit.provenance.get("metric") or task.default_metric
    batch = task.make_pairs(n, seed, model.tokenizer, align=ablation == "corrupt")
    rand = random_masks(graph, int(mask.sum()), n_random, seed)
    curve = masks_curve(
        model,
        batch,
        graph,
        [mask, graph.valid & ~mask] + rand + [graph.valid & ~r for r in rand],
        metric,
        ablation,
        batch_size,
    )
    pts = curve["points"]

    def dist(ps):
        v = torch.tensor([p["faithfulness"] for p in ps])
        return (
            {
                "faithfulness_mean": float(v.mean()),
                "faithfulness_min": float(v.min()),
                "faithfulness_max": float(v.max()),
                "runs": [round(float(x), 4) for x in v],
            }
            if len(ps)
            else {}
        )

    return {
        "n_edges": int(mask.sum()),
        "metric": metric,
        "full_metric": curve["full_metric"],
        "ablated_metric": curve["ablated_metric"],
        "sufficiency": pts[0],
        "necessity": pts[1],
        "random_sufficiency": dist(pts[2 : 2 + n_random]),
        "random_necessity": dist(pts[2 + n_random :]),
    }
