"""Edge circuits in the circuit file: from an `EdgeScores` selection to a `Circuit`, and back to an edge mask.

Graph nodes map onto circuit nodes: `input` -> embed(0, 0); `a{l}.h{h}` and its query input
`a{l}.h{h}<q>` -> head(l, h); a key/value input `a{l}.kv{g}<k|v>` -> head(l, g) when the model has one
key/value head per head, kv(l, g) otherwise; `m{l}` -> mlp(l, 0); `logits` -> logits(n_layers, 0).
Edges keep their signed score as weight and the input they enter as label. Every edge score (not only
the selected ones) is kept in `extra["edge_scores"]`, in the graph's edge order, so a viewer can move
the threshold and `circuits.finders.eap.scores_from_circuit` can rebuild the `EdgeScores`.
"""

from __future__ import annotations

import re

import torch
from torch import Tensor

from circuits.format.circuit import Circuit, Edge, Node
from circuits.model.residual_graph import EdgeGraph

_UP = re.compile(r"^a(\d+)\.h(\d+)$|^m(\d+)$|^input$")
_DOWN = re.compile(r"^a(\d+)\.(h|kv)(\d+)(?:<([qkv])>)?$|^m(\d+)$|^logits$")


def up_node(graph: EdgeGraph, name: str) -> Node:
    m = _UP.match(name)
    if name == "input":
        return Node(0, "embed", 0)
    if m.group(1) is not None:
        return Node(int(m.group(1)), "head", int(m.group(2)))
    return Node(int(m.group(3)), "mlp", 0)


def down_node(graph: EdgeGraph, name: str) -> tuple[Node, str]:
    if name == "logits":
        return Node(graph.n_layers, "logits", 0), ""
    m = _DOWN.match(name)
    if m.group(5) is not None:
        return Node(int(m.group(5)), "mlp", 0), ""
    layer, which, idx, part = int(m.group(1)), m.group(2), int(m.group(3)), m.group(4) or ""
    if which == "kv" and graph.n_kv != graph.n_heads:
        return Node(layer, "kv", idx), part
    return Node(layer, "head", idx), part


class NodeTable:
    """A circuit's nodes in first-use order, each stored once: `index(node)` is its position in `nodes`."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._index: dict[Node, int] = {}

    def index(self, node: Node) -> int:
        if node not in self._index:
            self._index[node] = len(self.nodes)
            self.nodes.append(node)
        return self._index[node]


def graph_info(g: EdgeGraph) -> dict:
    """The fields that rebuild `g` (`graph_of`), as a circuit file stores them."""
    return {"n_layers": g.n_layers, "n_heads": g.n_heads, "n_kv": g.n_kv, "parallel": g.parallel, "qkv": g.qkv}


def edges_to_circuit(scores, mask: Tensor, selection: dict, provenance: dict, metrics: dict) -> Circuit:
    """A `Circuit` of the edges in `mask` (BoolTensor [n_up, n_down]) of an `EdgeScores`."""
    g = scores.graph
    pairs = torch.nonzero(mask & g.valid).tolist()
    pairs.sort(key=lambda p: -abs(float(scores.scores[p[0], p[1]])))
    table = NodeTable()
    idx, nodes = table.index, table.nodes
    edges = []
    for u, d in pairs:
        dn, label = down_node(g, g.downstream[d])
        edges.append(Edge(idx(up_node(g, g.upstream[u])), idx(dn), float(scores.scores[u, d]), label))
    valid_scores = scores.scores[g.valid]
    prov = {"method": scores.method, "metric": scores.metric, **provenance}
    extra = {
        "graph": graph_info(g),
        "selection": selection,
        "edge_scores": [float(f"{v:.6g}") for v in valid_scores.tolist()],
        "score_info": scores.info,
    }
    m = {"n_nodes": len(nodes), "n_edges": len(edges), "n_edges_graph": g.n_edges, **metrics}
    return Circuit(nodes, edges, m, prov, extra)


def graph_of(circuit: Circuit) -> EdgeGraph:
    info = circuit.extra.get("graph")
    if not isinstance(info, dict):
        raise ValueError("this circuit has no edge graph (it was not found by eap or eap-ig)")
    return EdgeGraph(**info)


def circuit_mask(circuit: Circuit) -> Tensor:
    """BoolTensor [n_up, n_down] of the circuit's edges."""
    if any(n.pos is not None for n in circuit.nodes):
        raise ValueError(
            "this circuit is position-resolved (nodes per token position): evaluate it per position with "
            "circuits.finders.eap_positions.position_mask and patched_metric, or extract it without --positions"
        )
    g = graph_of(circuit)
    ups = {up_node(g, n): i for i, n in enumerate(g.upstream)}
    downs = {down_node(g, n): i for i, n in enumerate(g.downstream)}
    mask = torch.zeros(len(g.upstream), len(g.downstream), dtype=torch.bool)
    for e in circuit.edges:
        u = ups[circuit.nodes[e.src]]
        d = downs[(circuit.nodes[e.dst], e.label)]
        mask[u, d] = True
    return mask
