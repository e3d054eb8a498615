"""A pruned attribution graph as a position-resolved circuit, so our own page (`circuits.format.graph_html`) draws
it and `interp circuits show` opens it.

- a transcoder feature: `Node(layer, "latent", feature, pos, hook="blocks.{layer}.hook_mlp_out")` (it writes there);
- an error node: `Node(layer, "sae_error", 0, pos, hook=...)`; a token: `Node(0, "embed", 0, pos)`;
- a logit target: `Node(n_layers, "logits", j, last position)`;
- edges: the kept edges (`circuits.graph.influence.prune`), weight the direct effect;
- at most `max_nodes` nodes (1,000): past that (a long prompt's graph keeps a token node per position and
  thousands of error nodes) the most influential ones, token nodes only where an edge reaches them, and the logits;
  `metrics` says how many were shown of how many kept;
- `extra.node_values`: a feature's activation, a logit's probability, 0 for errors and tokens; `extra.positions`
  the prompt's tokens (a position-resolved page); `extra.meanings` what node values and edge weights are;
  `metrics` the graph's scores and counts.
"""

from __future__ import annotations

import torch

from circuits.format.circuit import Circuit, Edge, Node
from circuits.graph.graph import Graph
from circuits.graph.influence import prune


def graph_circuit(
    g: Graph, node_threshold: float = 0.8, edge_threshold: float = 0.98, max_nodes: int = 1000
) -> Circuit:
    p = prune(g.rows, g.logit_probabilities, g.n_pos, g.n_features, node_threshold, edge_threshold, g.row_nodes)
    kept = p.node_mask.clone()
    if int(kept.sum()) > max_nodes:
        dst, src, _ = p.edges()
        linked = torch.zeros_like(kept)
        linked[dst], linked[src] = True, True
        kept &= linked
        logits = torch.arange(g.n_nodes - g.n_logits, g.n_nodes)
        kept[logits] = False
        ranked = p.cumulative.masked_fill(~kept, float("inf")).argsort()  # most influential first
        kept = torch.zeros_like(kept)
        kept[ranked[: max(0, min(max_nodes - g.n_logits, int(p.node_mask.sum())))]] = True
        kept &= p.node_mask & linked
        kept[logits] = True
    keep = kept.nonzero().squeeze(1).tolist()
    nodes, values, where = [], [], {}
    for i in keep:
        n = g.node(i)
        hook = f"blocks.{n['layer']}.hook_mlp_out"
        if n["kind"] == "feature":
            node, value = Node(n["layer"], "latent", n["feature"], n["position"], hook), n["activation"]
        elif n["kind"] == "error":
            node, value = Node(n["layer"], "sae_error", 0, n["position"], hook), 0.0
        elif n["kind"] == "token":
            node, value = Node(0, "embed", 0, n["position"]), 0.0
        else:
            j = i - (g.n_nodes - g.n_logits)
            node, value = Node(g.n_layers, "logits", j, n["position"]), n["probability"]
        where[i] = len(nodes)
        nodes.append(node)
        values.append(float(value))
    dst, src, row = p.edges()
    edges = [
        Edge(where[s], where[t], float(g.rows[r, s]))
        for t, s, r in zip(dst.tolist(), src.tolist(), row.tolist(), strict=True)
        if s in where and t in where
    ]
    strings = g.meta.get("token_strings") or [str(int(t)) for t in g.tokens]
    return Circuit(
        nodes=nodes,
        edges=edges,
        metrics={
            **g.meta.get("scores", {}),
            "n_nodes": len(nodes),
            "n_edges": len(edges),
            "pruned_nodes": int(p.node_mask.sum()),
        },
        provenance={
            "model": {"spec": g.meta.get("model")},
            "task": g.meta.get("prompt") or f"a {g.n_pos}-token prompt",
            "method": "graph",
        },
        extra={
            "node_values": values,
            "positions": {"n": g.n_pos, "tokens": strings},
            "logit_strings": g.meta.get("logit_strings"),
            "meanings": {
                "node": "feature activation (logit: probability)",
                "edge": "direct effect (frozen attention and norms)",
            },
        },
    )
