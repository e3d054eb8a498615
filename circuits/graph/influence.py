"""Influence, pruning and the replacement / completeness scores of an attribution graph, as circuit-tracer 0.5
defines them (`circuit_tracer/graph.py`; Ameisen et al. 2025, "Circuit tracing", methods: "graph pruning").

The adjacency `A[target, source]` holds direct effects. Normalise each row by its absolute sum; a node's
influence is its weight in `w (Â + Â² + ...)`, where `w` puts each logit's probability on its row. Nodes are kept
until their influence reaches a cumulative share (`node_threshold`, 0.8), edges likewise by `edge_threshold`
(0.98), then nodes left without an outgoing edge (features, errors) or an incoming one (features) go, until nothing
changes. Tokens and logits always stay.

- replacement score: the share of the tokens' and errors' influence that comes from tokens (1: no path through
  an error node);
- completeness score: the share of each node's input that is not from error nodes, averaged with the nodes'
  influence (plus the logits' weights) as weights;
- error share (ours): the error nodes' share of the influence of all feature, error and token nodes, said beside
  the two scores as a feature circuit states its error nodes' share.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def normalize_rows(a: Tensor) -> Tensor:
    """|A| with each row divided by its sum (rows summing to zero stay zero)."""
    a = a.abs()
    return a / a.sum(1, keepdim=True).clamp(min=1e-10)


def _rows_of(a: Tensor, row_nodes: Tensor | None) -> Tensor:
    """The node each row of `a` is: a dense adjacency's rows are every node in order."""
    return torch.arange(a.shape[0]) if row_nodes is None else row_nodes


def influence(a: Tensor, weights: Tensor, max_iter: int = 1000, row_nodes: Tensor | None = None) -> Tensor:
    """[n] total influence `weights (A + A^2 + ...)` for a nilpotent A (a DAG's adjacency, rows normalised).
    With `row_nodes`, `a` holds only the rows [R, n] of those nodes (the others are zero: errors, tokens)."""
    rows = _rows_of(a, row_nodes)
    step = weights[rows] @ a
    total = step.clone()
    for _ in range(max_iter):
        if not step.any():
            return total
        step = step[rows] @ a
        total += step
    raise RuntimeError(f"influence did not converge in {max_iter} steps: is the graph acyclic?")


def partial_influence(rows, logit_p: Tensor, row_node: Tensor | None, max_iter: int = 128) -> Tensor:
    """Influence of every column node from the rows computed so far (`rows[i]` is node `row_node[i]`'s
    incoming edges); used to choose which features' rows to compute next. `rows` may also be a `RowStore` (its
    own nodes): then two passes over it, not one per step (`_partial_influence_store`)."""
    if not isinstance(rows, Tensor):
        return _partial_influence_store(rows, logit_p, max_iter)
    a = normalize_rows(rows)
    total = torch.zeros(rows.shape[1])
    weight = torch.zeros(rows.shape[1])
    weight[-len(logit_p) :] = logit_p
    for _ in range(max_iter):
        weight = weight[row_node] @ a
        if not weight.any():
            return total
        total += weight
    raise RuntimeError(f"partial influence did not converge in {max_iter} steps")


def _partial_influence_store(store, logit_p: Tensor, max_iter: int = 128) -> Tensor:
    """`partial_influence` of rows read block by block from disk. Each step `w <- w[nodes] @ Â` only ever needs
    w at the row nodes, so the steps run on the small [rows, rows] block B = Â[:, nodes] (one pass to read it):
    v <- v @ B; and the total is then (sum of the v's) @ Â (one more pass). The same sums, in another order."""
    n = store.shape[1]
    nodes = store.nodes[: store.filled]
    B = torch.cat([normalize_rows(block)[:, nodes] for block, _ in store.blocks()])
    v = torch.zeros(n)
    v[-len(logit_p) :] = logit_p
    v = v[nodes]
    summed = torch.zeros_like(v)
    for _ in range(max_iter):
        if not v.any():
            break
        summed += v
        v = v @ B
    else:
        raise RuntimeError(f"partial influence did not converge in {max_iter} steps")
    total = torch.zeros(n)
    start = 0
    for block, _ in store.blocks():
        total += summed[start : start + len(block)] @ normalize_rows(block)
        start += len(block)
    return total


def _threshold(scores: Tensor, share: float) -> Tensor:
    ranked = scores.sort(descending=True).values
    cum = ranked.cumsum(0) / ranked.sum()
    i = min(int(torch.searchsorted(cum, torch.tensor(share))), len(ranked) - 1)
    return ranked[i]


SORT_LIMIT = 1 << 26
"""Edge scores up to this many entries are thresholded by one sort, as circuit-tracer does; beyond it by
`_threshold_chunked` (a sort would copy them three times over)."""


def _threshold_chunked(chunks, share: float) -> Tensor:
    """`_threshold` of non-negative scores given as a re-iterable of chunks, without holding them at once: the
    largest score v with sum(scores >= v) >= share * sum(scores), found by bisection on the float32 bit pattern
    (ordered as the values are, for non-negative floats); sums in float64, so the cut may differ from the sort's
    float32 cumulative sum by its rounding."""
    total = sum(float(c.double().sum()) for c in chunks())
    target = share * total

    def mass_at_or_above(bits: int) -> float:
        v = torch.tensor(bits, dtype=torch.int32).view(torch.float32)
        return sum(float(c[c >= v].double().sum()) for c in chunks())

    top = max(float(c.max()) for c in chunks())
    lo, hi = 0, int(torch.tensor(top, dtype=torch.float32).view(torch.int32))  # mass(lo) = total >= target
    if mass_at_or_above(hi) >= target:
        return torch.tensor(top)
    while hi - lo > 1:  # invariant: mass(lo) >= target > mass(hi)
        mid = (lo + hi) // 2
        if mass_at_or_above(mid) >= target:
            lo = mid
        else:
            hi = mid
    v = torch.tensor(lo, dtype=torch.int32).view(torch.float32)
    return min((c[c >= v].min() for c in chunks() if (c >= v).any()), default=v)  # the score itself


@dataclass
class Pruned:
    node_mask: Tensor  # [n] bool
    edge_rows: Tensor  # [R, n] bool: row r holds the kept incoming edges of node row_nodes[r]
    row_nodes: Tensor  # [R]
    cumulative: Tensor  # [n] each node's cumulative influence share (its rank's), as their frontend reads it

    @property
    def edge_mask(self) -> Tensor:
        """[n, n] bool, edge_mask[target, source] (dense: for graphs small enough to hold it)."""
        n = len(self.node_mask)
        mask = torch.zeros(n, n, dtype=torch.bool)
        mask[self.row_nodes] = self.edge_rows
        return mask

    def edges(self) -> tuple[Tensor, Tensor, Tensor]:
        """(targets, sources, row indices) of the kept edges."""
        r, src = self.edge_rows.nonzero(as_tuple=True)
        return self.row_nodes[r], src, r


def prune(
    adjacency: Tensor,
    logit_p: Tensor,
    n_tokens: int,
    n_features: int,
    node_threshold: float = 0.8,
    edge_threshold: float = 0.98,
    row_nodes: Tensor | None = None,
) -> Pruned:
    """circuit-tracer's pruning (module doc). `n_features` counts the feature rows/columns that come first. With
    `row_nodes`, `adjacency` holds only those nodes' rows [R, n] (a long prompt's graph, `Graph.rows`)."""
    for name, t in (("node_threshold", node_threshold), ("edge_threshold", edge_threshold)):
        if not 0.0 <= t <= 1.0:
            raise ValueError(f"{name} must be between 0 and 1, not {t}")
    rows = _rows_of(adjacency, row_nodes)
    n, n_logits = adjacency.shape[1], len(logit_p)
    weights = torch.zeros(n)
    weights[-n_logits:] = logit_p
    node_inf = influence(normalize_rows(adjacency), weights, row_nodes=rows)
    nodes = node_inf >= _threshold(node_inf, node_threshold)
    nodes[-n_logits - n_tokens :] = True
    a = adjacency.clone()
    a[~nodes[rows]] = 0
    a[:, ~nodes] = 0
    a = normalize_rows(a)
    per_row = (influence(a, weights, row_nodes=rows) + weights)[rows]
    if a.numel() <= SORT_LIMIT:
        cut = _threshold((a * per_row[:, None]).flatten(), edge_threshold)
    else:
        step = max(1, SORT_LIMIT // n)
        chunks = lambda: (a[i : i + step] * per_row[i : i + step, None] for i in range(0, len(a), step))  # noqa: E731
        cut = _threshold_chunked(chunks, edge_threshold)
    edges = torch.cat([a[i : i + 4096] * per_row[i : i + 4096, None] >= cut for i in range(0, len(a), 4096)])
    a = None  # free the normalised copy before the rounds below
    inner = n - n_logits - n_tokens
    is_feature = rows < n_features

    def drop_unconnected() -> None:
        nodes[:inner] &= edges[:, :inner].any(0)  # features and errors must feed something
        fed = torch.zeros(n_features, dtype=torch.bool)
        fed[rows[is_feature]] = edges[is_feature].any(1)
        nodes[:n_features] &= fed  # features must be fed

    before = nodes.clone()
    drop_unconnected()
    while not torch.equal(before, nodes):  # each round may strand more nodes; at most n_layers + 1 rounds
        before = nodes.clone()
        edges[~nodes[rows]] = False
        edges[:, ~nodes] = False
        drop_unconnected()
    order = node_inf.sort(descending=True)
    cumulative = torch.zeros(n)
    cumulative[order.indices] = order.values.cumsum(0) / order.values.sum()
    return Pruned(nodes, edges, rows, cumulative)


def graph_scores(
    adjacency: Tensor,
    logit_p: Tensor,
    n_features: int,
    n_errors: int,
    n_tokens: int,
    row_nodes: Tensor | None = None,
) -> dict:
    """{"replacement": ..., "completeness": ...} (module doc); errors follow the features, tokens the errors.
    With `row_nodes`, `adjacency` holds only those nodes' rows [R, n]."""
    rows = _rows_of(adjacency, row_nodes)
    n = adjacency.shape[1]
    weights = torch.zeros(n)
    weights[-len(logit_p) :] = logit_p
    a = normalize_rows(adjacency)
    inf = influence(a, weights, row_nodes=rows)
    err = slice(n_features, n_features + n_errors)
    tok = slice(n_features + n_errors, n_features + n_errors + n_tokens)
    token_inf, error_inf = inf[tok].sum(), inf[err].sum()
    replacement = token_inf / (token_inf + error_inf)
    non_error = torch.ones(n)
    non_error[rows] = 1 - a[:, err].sum(-1)
    w = inf + weights
    completeness = (non_error * w).sum() / w.sum()
    total = inf[: n_features + n_errors + n_tokens].sum().clamp(min=1e-30)
    return {
        "replacement": float(replacement),
        "completeness": float(completeness),
        "error_share": float(error_inf / total),  # the error nodes' share of all nodes' influence on the logits
    }
