"""Position-resolved edge attribution: EAP / EAP-IG scores per edge *and token position*, for one prompt or a few
prompts of one template (one token length).

    s = eap(model, batch, positions=True)            # PositionScores, scores [p, n_up, n_down]
    summed_scores(s)                                 # (circuits.finders.eap) = eap(model, batch): the sum over p
    circuit = s.to_circuit(top_n=200)                # nodes carry `pos`; `interp circuits export` puts it in ctx_idx

Nodes are (component, token position): `input@p` (the embeddings of token p), a head's output `a{l}.h{h}@p`,
an MLP's output `m{l}@p` upstream; a head's query input `a{l}.h{h}<q>@p`, a key/value input `a{l}.kv{g}<k|v>@p`,
an MLP's input `m{l}@p` and the logits' input `logits@p` downstream.

**Which edges, and their score.** An edge is (u@p -> d.input@p): upstream component u written at position p,
entering downstream input d *at the same position p*. Its EAP score is

    s(u@p -> d@p) = (a_u(corrupt)[p] - a_u(clean)[p]) . dm/dx_d[p]        (averaged over the prompts)

with x_d[p] the residual-stream input of d at position p and the gradient taken at the clean run (EAP-IG: averaged
along the embedding path, as for the summed graph). This is the term of position p in the summed score
`circuits.finders.eap`, so the position-resolved scores sum over p to the summed graph's scores exactly, not
only approximately (tested to 1e-5), and each is first-order exact for its own patch: giving d at position p
only the input x_d[p] - a_u[p] + a'_u[p] changes the metric by s + O(|delta|^2) (tested against
`circuits.evaluation.edge_patching.patched_metric` with a position-resolved mask, which does exactly that patch).

Residual-stream writers into an MLP or the logits are same-position by construction (those components act on
each position alone). Into attention the edge is indexed by the position of the *input*: the query input of a
head at q reads position q, and its key/value inputs at p are edges (u@p -> kv@p) as well, for every p.
What moves information between positions is the attention pattern, inside the head: the head's output at q
mixes its values (and compares its keys) at every p <= q, so the path u@p -> kv@p -> head@q (q >= p) runs through
the head node; the graph lists no separate (kv@p -> head@q) edge per pattern entry. Why this one: every edge has
one definition (gradient x activation difference at the one input that is patched), and that patch is exactly
what `patched_metric` runs with a position-resolved mask, so each score can be checked against its patch. A
split of a key/value input's score over the query positions q that read it exists to first order (the gradient
through row q of the pattern), but it needs each head's pattern and per-query gradients, and its patch (a key
or value changed for one query row only) is not a change of one residual input, so the evaluator here could
not check it; it is not done.

Relation to other per-position graphs: circuit-tracer's attribution graphs (attention frozen) have edges from a
feature at p to a feature at q >= p, because with the pattern frozen the OV path is linear and its per-(p, q)
direct effect is defined; its weights are effects between activations on one prompt. Per-position variants of
ACDC's graph split every node by position and patch edges between positions. Ours keep attention live (as EAP
does), score effects on the task metric, and put influence across positions inside the head's node: the
columns (token positions) are there, edges between columns are not.

The logits node scores only at the scored position (the last token): its gradient elsewhere is zero. Every row
must have the same length with no padding (the same template); tokens that differ between rows at a position are
shown joined by "|".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from circuits.format.circuit import Circuit, Edge
from circuits.format.edge_circuit import NodeTable, down_node, graph_info, up_node
from circuits.model.residual_graph import EdgeGraph
from circuits.tasks.pairs import PairBatch


def check_one_length(batch: PairBatch) -> int:
    """The prompts' token length; ValueError naming two rows when they differ (padding) or misalign."""
    masks = [("clean", batch.clean_mask)] + (
        [("corrupted", batch.corrupt_mask)] if batch.corrupt_mask is not None else []
    )
    for name, mask in masks:
        lengths = mask.sum(1)
        if bool((lengths != mask.shape[1]).any()):
            short = int(torch.argmin(lengths))
            raise ValueError(
                f"position-resolved scores need prompts of one token length (one template): {name} row {short} has "
                f"{int(lengths[short])} tokens, another {mask.shape[1]}; give rows of one length, or drop --positions "
                "for the graph summed over positions"
            )
    if batch.corrupt is not None and batch.corrupt.shape[1] != batch.clean.shape[1]:
        raise ValueError("clean and corrupted prompts differ in length; position-resolved scores need them aligned")
    return int(batch.clean.shape[1])


def prompt_tokens(model, batch: PairBatch, limit: int = 3) -> list[str]:
    """One label per position: the clean prompts' token there (the distinct ones joined by "|" when rows differ)."""
    out = []
    for p in range(batch.clean.shape[1]):
        ids = list(dict.fromkeys(int(t) for t in batch.clean[:, p].tolist()))
        words = [model.tokenizer.decode([t]) for t in ids[:limit]]
        out.append("|".join(words) + ("|..." if len(ids) > limit else ""))
    return out


@dataclass
class PositionScores:
    """Scores [p, n_up, n_down] of every edge at every token position (0 where no edge), and how they were found."""

    graph: EdgeGraph
    scores: Tensor
    method: str
    metric: str
    info: dict = field(default_factory=dict)
    tokens: list[str] = field(default_factory=list)

    @property
    def n_positions(self) -> int:
        return int(self.scores.shape[0])

    @property
    def valid(self) -> Tensor:
        """BoolTensor [p, n_up, n_down]: every edge of the graph at every position."""
        return self.graph.valid[None].expand(self.n_positions, -1, -1)

    def score(self, up: str, down: str, pos: int) -> float:
        """The score of one edge, by node names (`graph.upstream`, `graph.downstream`) and position."""
        return float(self.scores[pos, self.graph.upstream.index(up), self.graph.downstream.index(down)])

    def order(self) -> Tensor:
        """Flat indices (pos * n_up * n_down + up * n_down + down) of all edges by decreasing |score|."""
        flat = self.scores.abs().flatten().masked_fill(~self.valid.flatten(), -1.0)
        return torch.argsort(flat, descending=True, stable=True)[: self.graph.n_edges * self.n_positions]

    def top_mask(self, n: int) -> Tensor:
        """BoolTensor [p, n_up, n_down] of the n (edge, position) pairs of largest |score|."""
        m = torch.zeros(self.scores.numel(), dtype=torch.bool)
        m[self.order()[:n]] = True
        return m.view_as(self.scores)

    def threshold_mask(self, threshold: float) -> Tensor:
        return (self.scores.abs() >= threshold) & self.valid

    def to_circuit(
        self,
        top_n: int | None = None,
        threshold: float | None = None,
        provenance: dict | None = None,
        metrics: dict | None = None,
    ) -> Circuit:
        """The chosen (edge, position) pairs as a `Circuit` whose nodes carry their token position."""
        if (top_n is None) == (threshold is None):
            raise ValueError("choose the edges with exactly one of top_n or threshold")
        mask = self.top_mask(top_n) if top_n is not None else self.threshold_mask(threshold)
        g = self.graph
        triples = torch.nonzero(mask & self.valid).tolist()
        triples.sort(key=lambda t: -abs(float(self.scores[t[0], t[1], t[2]])))
        table = NodeTable()
        idx, nodes = table.index, table.nodes
        edges = []
        for p, u, d in triples:
            dn, label = down_node(g, g.downstream[d])
            src = idx(replace(up_node(g, g.upstream[u]), pos=p))
            edges.append(Edge(src, idx(replace(dn, pos=p)), float(self.scores[p, u, d]), label))
        summed = self.scores.sum(0)[g.valid]
        extra = {
            "graph": graph_info(g),
            "positions": {"n": self.n_positions, "tokens": list(self.tokens)},
            "selection": {"top_n": top_n} if top_n is not None else {"threshold": threshold},
            # the scores summed over positions, so the summed graph can be rebuilt (`scores_from_circuit`)
            "edge_scores": [float(f"{v:.6g}") for v in summed.tolist()],
            "score_info": self.info,
        }
        m = {
            "n_nodes": len(nodes),
            "n_edges": len(edges),
            "n_edges_graph": g.n_edges * self.n_positions,
            **(metrics or {}),
        }
        prov = {"method": self.method, "metric": self.metric, "positions": True, **(provenance or {})}
        return Circuit(nodes, edges, m, prov, extra)


def is_positional(circuit: Circuit) -> bool:
    """Whether a circuit file holds a position-resolved graph."""
    return isinstance(circuit.extra.get("positions"), dict)


def position_mask(circuit: Circuit) -> Tensor:
    """BoolTensor [p, n_up, n_down] of a position-resolved circuit's edges (for `patched_metric`)."""
    from circuits.format.edge_circuit import graph_of

    g = graph_of(circuit)
    if not is_positional(circuit):
        raise ValueError("this circuit is summed over positions; use circuits.format.edge_circuit.circuit_mask")
    ups = {up_node(g, n): i for i, n in enumerate(g.upstream)}
    downs = {down_node(g, n): i for i, n in enumerate(g.downstream)}
    mask = torch.zeros(int(circuit.extra["positions"]["n"]), len(g.upstream), len(g.downstream), dtype=torch.bool)
    for e in circuit.edges:
        src, dst = circuit.nodes[e.src], circuit.nodes[e.dst]
        mask[src.pos, ups[replace(src, pos=None)], downs[(replace(dst, pos=None), e.label)]] = True
    return mask
