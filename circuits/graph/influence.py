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


def influence(a: Tensor, weights: Tensor, max_iter: int = 1000) -> Tensor:
    """[n] total influence `weights (A + A^2 + ...)` for a nilpotent A (a DAG's adjacency, rows normalised)."""
    step = weights @ a
    total = step.clone()
    for _ in range(max_iter):
        if not step.any():
            return total
        step = step @ a
        total += step
    raise RuntimeError(f"influence did not converge in {max_iter} steps: is the graph acyclic?")


def partial_influence(rows: Tensor, logit_p: Tensor, row_node: Tensor, max_iter: int = 128) -> Tensor:
    """Influence of every column node from the rows computed so far (`rows[i]` is node `row_node[i]`'s
    incoming edges); used to choose which features' rows to compute next."""
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


def _threshold(scores: Tensor, share: float) -> Tensor:
    ranked = scores.sort(descending=True).values
    cum = ranked.cumsum(0) / ranked.sum()
    i = min(int(torch.searchsorted(cum, torch.tensor(share))), len(ranked) - 1)
    return ranked[i]


@dataclass
class Pruned:
    node_mask: Tensor  # [n] bool
    edge_mask: Tensor  # [n, n] bool
    cumulative: Tensor  # [n] each node's cumulative influence share (its rank's), as their frontend reads it


def prune(
    adjacency: Tensor,
    logit_p: Tensor,
    n_tokens: int,
    n_features: int,
    node_threshold: float = 0.8,
    edge_threshold: float = 0.98,
) -> Pruned:
    """circuit-tracer's pruning (module doc). `n_features` counts the feature rows/columns that come first."""
    for name, t in (("node_threshold", node_threshold), ("edge_threshold", edge_threshold)):
        if not 0.0 <= t <= 1.0:
            raise ValueError(f"{name} must be between 0 and 1, not {t}")
    n, n_logits = adjacency.shape[0], len(logit_p)
    weights = torch.zeros(n)
    weights[-n_logits:] = logit_p
    node_inf = influence(normalize_rows(adjacency), weights)
    nodes = node_inf >= _threshold(node_inf, node_threshold)
    nodes[-n_logits - n_tokens :] = True
    kept = adjacency.clone()
    kept[~nodes] = 0
    kept[:, ~nodes] = 0
    a = normalize_rows(kept)
    edge_scores = a * (influence(a, weights) + weights)[:, None]
    edges = edge_scores >= _threshold(edge_scores.flatten(), edge_threshold)
    inner = n - n_logits - n_tokens

    def drop_unconnected() -> None:
        nodes[:inner] &= edges[:, :inner].any(0)  # features and errors must feed something
        nodes[:n_features] &= edges[:n_features].any(1)  # features must be fed

    before = nodes.clone()
    drop_unconnected()
    while not torch.equal(before, nodes):  # each round may strand more nodes; at most n_layers + 1 rounds
        before = nodes.clone()
        edges[~nodes] = False
        edges[:, ~nodes] = False
        drop_unconnected()
    order = node_inf.sort(descending=True)
    cumulative = torch.zeros(n)
    cumulative[order.indices] = order.values.cumsum(0) / order.values.sum()
    return Pruned(nodes, edges, cumulative)


def graph_scores(adjacency: Tensor, logit_p: Tensor, n_features: int, n_errors: int, n_tokens: int) -> dict:
    """{"replacement": ..., "completeness": ...} (module doc); errors follow the features, tokens the errors."""
    n = adjacency.shape[0]
    weights = torch.zeros(n)
    weights[-len(logit_p) :] = logit_p
    a = normalize_rows(adjacency)
    inf = influence(a, weights)
    err = slice(n_features, n_features + n_errors)
    tok = slice(n_features + n_errors, n_features + n_errors + n_tokens)
    token_inf, error_inf = inf[tok].sum(), inf[err].sum()
    replacement = token_inf / (token_inf + error_inf)
    non_error = 1 - a[:, err].sum(-1)
    w = inf + weights
    completeness = (non_error * w).sum() / w.sum()
    total = inf[: n_features + n_errors + n_tokens].sum().clamp(min=1e-30)
    return {
        "replacement": float(replacement),
        "completeness": float(completeness),
        "error_share": float(error_inf / total),  # the error nodes' share of all nodes' influence on the logits
    }
