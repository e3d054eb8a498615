"""HMH (hierarchical multi-view Haar spectral GNN for heterophily; code URL in the abstract,
github.com/sazzad1008/Scalable-HMH101, not verified): filter node signals in a sparse, orthonormal,
locality-aware *Haar basis* built from a hierarchical partition tree of the graph, with learnable
per-level spectral gains, instead of averaging over neighbours (which hurts when neighbours differ).

This file holds HMH-lite, the catalog's reduction: a fixed hierarchy (a balanced tree from recursive
median splits of a spectral embedding), the Haar basis of that tree, and a learnable diagonal filter
(one gain per tree level and channel) with a skip connection.

Haar basis of a tree (Gavish-Nadler-Coifman): the root's scaling vector 1/√n, and at every internal node
with children C_1..C_k, for j = 1..k-1 the wavelet ψ_j = a·1[C_1 ∪ .. ∪ C_j] - b·1[C_{j+1}],
a = √(n_{j+1} / (N_j (N_j + n_{j+1}))), b = √(N_j / (n_{j+1} (N_j + n_{j+1}))), N_j = |C_1 ∪ .. ∪ C_j|.
Each ψ has zero mean, unit norm, support inside one tree node, and is constant on each child: the n
vectors form an orthonormal basis of R^n (tested).

    tree = spectral_tree(A, dims=8)               # nested lists of node ids
    Phi, level = haar_basis(tree, n)              # [n, n] orthonormal, level of each column
    model = HaarFilterNet(d_in, d_hidden, n_classes, Phi, level)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

Tree = list  # a leaf is an int node id, an internal node is a list of subtrees


def _leaves(t) -> list[int]:
    return [t] if isinstance(t, int) else [v for c in t for v in _leaves(c)]


def haar_basis(tree: Tree, n: int) -> tuple[Tensor, Tensor]:
    """(Φ [n, n] with orthonormal columns, level [n] of each column: 0 for the root's scaling vector and its
    wavelets, depth of the internal node for the others)."""
    leaves = _leaves(tree)
    if sorted(leaves) != list(range(n)):
        raise ValueError(f"the tree's leaves must be exactly the nodes 0..{n - 1}, each once")
    cols, levels = [torch.full((n,), 1 / math.sqrt(n), dtype=torch.float64)], [0]

    def visit(t, depth):
        if isinstance(t, int):
            return
        kids = [_leaves(c) for c in t]
        acc: list[int] = []
        for j in range(len(kids) - 1):
            acc = acc + kids[j]
            nxt = kids[j + 1]
            N, m = len(acc), len(nxt)
            v = torch.zeros(n, dtype=torch.float64)
            v[acc] = math.sqrt(m / (N * (N + m)))
            v[nxt] = -math.sqrt(N / (m * (N + m)))
            cols.append(v)
            levels.append(depth)
        for c in t:
            visit(c, depth + 1)

    visit(tree, 0)
    return torch.stack(cols, 1), torch.tensor(levels)


def spectral_embedding(A: Tensor, dims: int = 8, both_ends: bool = True) -> Tensor:
    """Eigenvectors of the symmetric normalised adjacency D^{-1/2} A D^{-1/2}: the `dims` largest (smooth
    signals), or with `both_ends` half from each end of the spectrum (the most oscillating ones carry the
    class structure of a heterophilous graph)."""
    if A.ndim != 2 or A.shape[0] != A.shape[1] or len(A) < 2:
        raise ValueError(f"A must be a square adjacency with >= 2 nodes; got {tuple(A.shape)}")
    d = A.sum(1).clamp_min(1e-12)
    S = A / d.sqrt().unsqueeze(1) / d.sqrt().unsqueeze(0)
    _, vec = torch.linalg.eigh(S.double())
    k = min(dims, len(A))
    if both_ends:
        return torch.cat([vec[:, -((k + 1) // 2) :], vec[:, : k // 2]], 1)
    return vec[:, -k:]


def median_tree(E: Tensor, idx: list[int] | None = None, leaf_size: int = 1) -> Tree:
    """Balanced binary tree over the rows of E: split at the median of the highest-variance coordinate."""
    idx = list(range(len(E))) if idx is None else idx
    if len(idx) <= leaf_size:
        return idx[0] if len(idx) == 1 else [i for i in idx]
    sub = E[idx]
    c = int(sub.var(0).argmax()) if len(idx) > 1 else 0
    order = [idx[i] for i in sub[:, c].argsort().tolist()]
    h = len(order) // 2
    return [median_tree(E, order[:h], leaf_size), median_tree(E, order[h:], leaf_size)]


def spectral_tree(A: Tensor, dims: int = 8) -> Tree:
    """The fixed hierarchy of HMH-lite: a median tree over the two-ended spectral embedding of A."""
    return median_tree(spectral_embedding(A, dims))


class HaarFilterNet(nn.Module):
    """MLP encoder -> Haar-domain filter (learnable gain per tree level and channel) + skip -> linear head."""

    def __init__(self, d_in: int, d_hidden: int, n_classes: int, Phi: Tensor, level: Tensor, dropout: float = 0.5):
        super().__init__()
        if Phi.ndim != 2 or Phi.shape[0] != Phi.shape[1] or level.shape != (Phi.shape[1],):
            raise ValueError("Phi must be [n, n] and level [n]")
        self.register_buffer("Phi", Phi.float())
        self.register_buffer("level", level.long())
        n_levels = int(level.max()) + 1
        self.enc = nn.Sequential(nn.Dropout(dropout), nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Dropout(dropout))
        self.gain = nn.Parameter(torch.ones(n_levels, d_hidden))
        self.skip = nn.Parameter(torch.ones(d_hidden))
        self.head = nn.Linear(2 * d_hidden, n_classes)

    def forward(self, X: Tensor) -> Tensor:
        H = self.enc(X)
        coef = self.Phi.T @ H  # Haar coefficients [n, c]
        filt = self.Phi @ (coef * self.gain[self.level])  # filtered signal
        return self.head(torch.cat([H * self.skip, filt], 1))
