"""HIAL (ICML 2026; arXiv 2507.20490): training-free hypergraph active learning as influence maximisation.

Graph active learning on the clique expansion of a hypergraph counts a hyperedge of size k as k(k-1)/2
pairwise links, so a node's utility grows with the size of its hyperedges ("ranking collapse"). HIAL
instead builds a high-order-interaction-aware linear diffusion: the pairwise weight a node pair gets from
a shared hyperedge e is modulated by e's cardinality (1 / (|e| - 1), so a hyperedge spreads one unit of
influence per member whatever its size) and by e's within-hyperedge feature consistency s_e (the mean
cosine similarity of its members' features, clipped at 0). On that diffusion it maximises a
dual-perspective influence, both terms monotone submodular, with lazy greedy:

    f(S) = MoI(S) + γ · EDV(S)
    MoI(S) = (1/n) Σ_v max_{s∈S} max(0, cos(h_v, h_s))        (magnitude of influence: feature coverage
                                                               of the propagated features h = P^K X)
    EDV(S) = (1/n) Σ_v [1 - Π_{s∈S} (1 - R_{sv})]              (expected diffusion value: probability that
                                                               v is reached, R = row-stochastic K-step diffusion)

Reconstructed (no code is public and the abstract gives no formulas): the exact forms of the cardinality
and consistency modulation, of MoI and EDV, and γ = 1.

    hg = Hypergraph(edges, n_nodes)
    P = hial_propagation(hg, X)                 # [n, n] row-stochastic
    S = select(hial_objective(P, X), budget)    # lazy greedy
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Hypergraph:
    """Hyperedges over nodes 0..n_nodes-1."""

    edges: Sequence[Sequence[int]]
    """Each hyperedge: the list of its (distinct) member nodes, at least 2."""
    n_nodes: int
    """Number of nodes."""

    def __post_init__(self):
        if self.n_nodes <= 0:
            raise ValueError(f"n_nodes must be positive; got {self.n_nodes}")
        if len(self.edges) == 0:
            raise ValueError("the hypergraph has no hyperedges")
        for e in self.edges:
            if len(e) < 2 or len(set(e)) != len(e):
                raise ValueError(f"each hyperedge needs >= 2 distinct nodes; got {list(e)}")
            if min(e) < 0 or max(e) >= self.n_nodes:
                raise ValueError(f"hyperedge {list(e)} names a node outside 0..{self.n_nodes - 1}")

    def incidence(self) -> Tensor:
        """H [n_nodes, n_edges], 1 where the node is in the hyperedge."""
        H = torch.zeros(self.n_nodes, len(self.edges), dtype=torch.float64)
        for j, e in enumerate(self.edges):
            H[list(e), j] = 1.0
        return H


def _row_normalise(W: Tensor) -> Tensor:
    W = W + torch.diag((W.sum(1) == 0).double())  # isolated nodes keep their own mass
    return W / W.sum(1, keepdim=True)


def clique_expansion(hg: Hypergraph) -> Tensor:
    """Row-stochastic P of the clique expansion: w_uv = number of hyperedges holding both u and v."""
    H = hg.incidence()
    W = H @ H.T
    W.fill_diagonal_(0.0)
    return _row_normalise(W)


def edge_consistency(hg: Hypergraph, X: Tensor) -> Tensor:
    """s_e = mean pairwise cosine similarity of e's members' features, clipped at 0. [n_edges]."""
    if X.ndim != 2 or X.shape[0] != hg.n_nodes:
        raise ValueError(f"X must be [n_nodes={hg.n_nodes}, d]; got {tuple(X.shape)}")
    Z = torch.nn.functional.normalize(X.double(), dim=1)
    out = torch.empty(len(hg.edges), dtype=torch.float64)
    for j, e in enumerate(hg.edges):
        z = Z[list(e)]
        k = len(e)
        out[j] = ((z.sum(0) @ z.sum(0) - k) / (k * (k - 1))).clamp_min(0.0)
    return out


def hial_propagation(hg: Hypergraph, X: Tensor | None = None) -> Tensor:
    """Row-stochastic P with w_uv = Σ_{e ∋ u,v} s_e / (|e| - 1) (s_e = 1 when X is None)."""
    H = hg.incidence()
    size = H.sum(0)
    s = torch.ones(len(hg.edges), dtype=torch.float64) if X is None else edge_consistency(hg, X)
    W = (H * (s / (size - 1))) @ H.T
    W.fill_diagonal_(0.0)
    return _row_normalise(W)


def diffusion(P: Tensor, steps: int = 2, alpha: float = 0.85) -> Tensor:
    """R = (1-α) Σ_{k=0}^{K} α^k P^k, renormalised to rows summing to 1: the K-step reach of each node."""
    if steps < 0 or not 0 < alpha < 1:
        raise ValueError(f"steps must be >= 0 and alpha in (0, 1); got {steps}, {alpha}")
    R = torch.eye(len(P), dtype=P.dtype)
    acc, Pk = R.clone(), R
    for k in range(1, steps + 1):
        Pk = Pk @ P
        acc = acc + alpha**k * Pk
    return acc / acc.sum(1, keepdim=True)


def hial_objective(P: Tensor, X: Tensor, steps: int = 2, gamma: float = 1.0) -> Callable[[list[int]], float]:
    """f(S) = MoI(S) + γ·EDV(S) on diffusion P (see the module docstring)."""
    if X.ndim != 2 or X.shape[0] != P.shape[0]:
        raise ValueError(f"X must be [n={P.shape[0]}, d]; got {tuple(X.shape)}")
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0; got {gamma}")
    h = X.double()
    for _ in range(steps):
        h = P @ h
    Z = torch.nn.functional.normalize(h, dim=1)
    K = (Z @ Z.T).clamp_min(0.0)
    R = diffusion(P, steps)
    n = P.shape[0]

    def f(S: list[int]) -> float:
        if not S:
            return 0.0
        moi = K[S].max(0).values.sum() / n
        edv = (1 - torch.prod(1 - R[S], 0)).sum() / n
        return float(moi + gamma * edv)

    return f


def lazy_greedy(f: Callable[[list[int]], float], n: int, budget: int) -> list[int]:
    """Maximise a monotone submodular f over subsets of 0..n-1 of size `budget` with lazy greedy (Minoux):
    stale upper bounds in a heap, re-evaluated only when they reach the top."""
    if not 0 < budget <= n:
        raise ValueError(f"budget must be in 1..{n}; got {budget}")
    S: list[int] = []
    cur = 0.0
    heap = [(-f([v]), v, 0) for v in range(n)]
    heapq.heapify(heap)
    while len(S) < budget:
        neg, v, it = heapq.heappop(heap)
        if it == len(S):
            S.append(v)
            cur = f(S)
        else:
            heapq.heappush(heap, (-(f(S + [v]) - cur), v, len(S)))
    return S


def greedy(f: Callable[[list[int]], float], n: int, budget: int) -> list[int]:
    """Plain greedy (the reference lazy greedy must match)."""
    if not 0 < budget <= n:
        raise ValueError(f"budget must be in 1..{n}; got {budget}")
    S: list[int] = []
    for _ in range(budget):
        best = max((v for v in range(n) if v not in S), key=lambda v: (f(S + [v]), -v))
        S.append(best)
    return S
