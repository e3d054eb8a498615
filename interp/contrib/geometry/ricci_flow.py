"""RicciFlow: layerwise feature geometry as a discrete Ricci flow on kNN graphs.

Paper: Hehl, von Renesse, Weber, *Neural Feature Geometry Evolves as Discrete Ricci Flow* (arXiv 2509.22362).
No official code; this follows the paper's description.

For each layer l a k-nearest-neighbour graph G_l is built on the hidden states of the same n points.
Edge curvature is the (augmented) Forman-Ricci curvature of the unweighted graph,

    F(u, v) = 4 - deg(u) - deg(v) + 3 * #triangles(u, v)          (augmented=True)

and the scalar curvature of a node is the sum over its edges. For the transition l -> l+1 the distance
change of node x is the mean, over its neighbours y in G_l, of d_{l+1}(x, y) - d_l(x, y), with d the
shortest-path distance in the layer's graph (`distance="geodesic"`, the paper's choice) or the Euclidean
distance divided by the layer's mean edge length (`"euclidean"`).

- local Ricci-evolution coefficient of x: Pearson correlation, over the layer transitions, between the
  scalar curvature of x at layer l and its distance change l -> l+1;
- global coefficient: the same correlation between the layer means of both quantities.
- edge coefficient of a transition: correlation over the edges of G_l between F(e) and the change of
  that edge's length (the per-layer version of the same test).

Ricci-flow-like behaviour is a negative coefficient: negatively curved (bridge) edges stretch, positively
curved (intra-community) edges shrink. Label modularity of G_l tracks class separation.

    >>> states = [x0, x1, x2]                      # [n, d_l] per layer, same points
    >>> res = ricci_flow(states, k=10, labels=y)
    >>> res.global_coefficient, res.local_coefficients.nanmean(), res.modularity
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path
from torch import Tensor


def _check_states(x: Tensor, name: str = "states") -> None:
    if not isinstance(x, Tensor) or x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D tensor [n_points, d]; got {getattr(x, 'shape', type(x))}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} holds NaN or inf values; drop those rows before building graphs")


def knn_graph(x: Tensor, k: int) -> Tensor:
    """Undirected kNN graph (union of each point's k nearest neighbours): edges [E, 2] with i < j, sorted."""
    _check_states(x)
    n = x.shape[0]
    if not 1 <= k < n:
        raise ValueError(f"k must be between 1 and n_points - 1 = {n - 1}; got k={k}")
    x = x.double()
    d = torch.cdist(x, x)
    d.fill_diagonal_(float("inf"))
    nbr = d.topk(k, dim=1, largest=False).indices  # [n, k]
    src = torch.arange(n).repeat_interleave(k)
    dst = nbr.reshape(-1)
    lo, hi = torch.minimum(src, dst), torch.maximum(src, dst)
    key = torch.unique(lo * n + hi)
    return torch.stack([key // n, key % n], dim=1)


def _adjacency(edges: Tensor, n: int) -> csr_matrix:
    e = edges.numpy()
    data = np.ones(2 * len(e))
    rows = np.concatenate([e[:, 0], e[:, 1]])
    cols = np.concatenate([e[:, 1], e[:, 0]])
    return csr_matrix((data, (rows, cols)), shape=(n, n))


def forman_curvature(edges: Tensor, n: int, augmented: bool = True) -> Tensor:
    """Forman-Ricci curvature of each edge of an unweighted graph: 4 - deg(u) - deg(v) [+ 3 * triangles]."""
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise ValueError(f"edges must be [E, 2]; got {tuple(edges.shape)}")
    a = _adjacency(edges, n)
    deg = torch.from_numpy(np.asarray(a.sum(1)).ravel())
    u, v = edges[:, 0], edges[:, 1]
    f = 4.0 - deg[u] - deg[v]
    if augmented:
        # common neighbours of u and v = triangles through the edge
        tri = np.asarray(a[u.numpy()].multiply(a[v.numpy()]).sum(1)).ravel()
        f = f + 3.0 * torch.from_numpy(tri)
    return f.double()


def scalar_curvature(edges: Tensor, curvature: Tensor, n: int) -> Tensor:
    """Node curvature: sum of the curvature of the node's edges. [n]"""
    out = torch.zeros(n, dtype=torch.float64)
    out.index_add_(0, edges[:, 0], curvature)
    out.index_add_(0, edges[:, 1], curvature)
    return out


def modularity(edges: Tensor, labels: Tensor, n: int) -> float:
    """Newman modularity of the partition given by `labels`: sum_c [e_cc / m - (d_c / 2m)^2]."""
    labels = torch.as_tensor(labels).long()
    if labels.shape != (n,):
        raise ValueError(f"labels must have shape ({n},); got {tuple(labels.shape)}")
    m = len(edges)
    if m == 0:
        return 0.0
    same = labels[edges[:, 0]] == labels[edges[:, 1]]
    deg = torch.zeros(n, dtype=torch.float64)
    deg.index_add_(0, edges[:, 0], torch.ones(m, dtype=torch.float64))
    deg.index_add_(0, edges[:, 1], torch.ones(m, dtype=torch.float64))
    d_c = torch.zeros(int(labels.max()) + 1, dtype=torch.float64).index_add_(0, labels, deg)
    return float(same.double().sum() / m - ((d_c / (2 * m)) ** 2).sum())


def graph_distances(edges: Tensor, n: int) -> Tensor:
    """All-pairs shortest-path hop counts [n, n]; unreachable pairs get (largest finite distance + 1)."""
    d = shortest_path(_adjacency(edges, n), unweighted=True, directed=False)
    finite = np.isfinite(d)
    d[~finite] = d[finite].max() + 1
    return torch.from_numpy(d)


def _pearson(a: Tensor, b: Tensor, dim: int = -1) -> Tensor:
    a = a - a.mean(dim, keepdim=True)
    b = b - b.mean(dim, keepdim=True)
    den = (a.pow(2).sum(dim) * b.pow(2).sum(dim)).sqrt()
    num = (a * b).sum(dim)
    return torch.where(den > 0, num / den.clamp_min(1e-300), torch.full_like(num, float("nan")))


@dataclass
class RicciFlowResult:
    """Per-layer curvature, distance change and the Ricci-evolution coefficients."""

    k: int
    distance: str
    mean_curvature: list[float]  # mean edge curvature of G_l
    modularity: list[float] | None  # label modularity of G_l
    edge_coefficients: list[float]  # per transition l -> l+1: corr over edges of G_l
    node_curvature: Tensor  # [layer - 1, n] scalar curvature at layer l
    node_change: Tensor  # [layer - 1, n] mean neighbour-distance change l -> l+1
    local_coefficients: Tensor = field(init=False)  # [n] correlation over transitions
    global_coefficient: float = field(init=False)

    def __post_init__(self) -> None:
        if self.node_curvature.shape[0] >= 2:
            self.local_coefficients = _pearson(self.node_curvature.T, self.node_change.T)
            self.global_coefficient = float(_pearson(self.node_curvature.mean(1), self.node_change.mean(1)))
        else:
            self.local_coefficients = torch.full((self.node_curvature.shape[1],), float("nan"))
            self.global_coefficient = float("nan")

    def summary(self) -> dict:
        return {
            "k": self.k,
            "distance": self.distance,
            "global_coefficient": self.global_coefficient,
            "mean_local_coefficient": float(self.local_coefficients.nanmean()),
            "frac_local_negative": float((self.local_coefficients < 0).double().mean()),
            "edge_coefficients": self.edge_coefficients,
            "mean_curvature": self.mean_curvature,
            "modularity": self.modularity,
        }


def ricci_flow(
    states: list[Tensor] | Tensor,
    k: int = 10,
    labels: Tensor | None = None,
    distance: str = "geodesic",
    augmented: bool = True,
) -> RicciFlowResult:
    """Ricci-evolution analysis of one point set across layers.

    states: a list of [n, d_l] tensors (or a [layer, n, d] tensor), row i being the same input at every layer.
    """
    if distance not in ("geodesic", "euclidean"):
        raise ValueError(f"distance must be 'geodesic' or 'euclidean'; got {distance!r}")
    states = list(states)
    if len(states) < 2:
        raise ValueError(f"need the states of at least 2 layers; got {len(states)}")
    for i, x in enumerate(states):
        _check_states(x, f"states[{i}]")
    n = states[0].shape[0]
    if any(x.shape[0] != n for x in states):
        raise ValueError(f"every layer must hold the same points; got row counts {[x.shape[0] for x in states]}")
    graphs = [knn_graph(x, k) for x in states]

    def dist(layer: int) -> Tensor:
        if distance == "geodesic":
            return graph_distances(graphs[layer], n)
        x = states[layer].double()
        e = graphs[layer]
        scale = (x[e[:, 0]] - x[e[:, 1]]).norm(dim=1).mean().clamp_min(1e-12)
        return torch.cdist(x, x) / scale

    curv = [forman_curvature(g, n, augmented) for g in graphs]
    mods = [modularity(g, labels, n) for g in graphs] if labels is not None else None
    node_curv, node_change, edge_coef = [], [], []
    d_prev = dist(0)
    for layer in range(len(states) - 1):
        d_next = dist(layer + 1)
        e = graphs[layer]
        change = d_next[e[:, 0], e[:, 1]] - d_prev[e[:, 0], e[:, 1]]
        edge_coef.append(float(_pearson(curv[layer], change)))
        ones = torch.ones(len(e), dtype=torch.float64)
        deg = torch.zeros(n, dtype=torch.float64).index_add_(0, e[:, 0], ones).index_add_(0, e[:, 1], ones)
        tot = torch.zeros(n, dtype=torch.float64).index_add_(0, e[:, 0], change).index_add_(0, e[:, 1], change)
        node_change.append(tot / deg.clamp_min(1))
        node_curv.append(scalar_curvature(e, curv[layer], n))
        d_prev = d_next
    return RicciFlowResult(
        k=k,
        distance=distance,
        mean_curvature=[float(c.mean()) for c in curv],
        modularity=mods,
        edge_coefficients=edge_coef,
        node_curvature=torch.stack(node_curv),
        node_change=torch.stack(node_change),
    )


def states_from_cache(
    cache,
    kind: str = "resid_post",
    layers: list[int] | None = None,
    max_points: int | None = 1000,
    seed: int = 0,
    skip_first_position: bool = True,
) -> list[Tensor]:
    """Per-layer [n, d_model] states of the same (unpadded) tokens from an `ActivationCache`.

    The first position of each sequence is dropped by default: in many LMs it carries massive
    activations that dominate every distance.
    """
    layers = cache.layers_of(kind) if layers is None else layers
    if not layers:
        raise KeyError(f"no cached layers of {kind!r}; cache holds {list(cache)}")
    ref = cache[kind, layers[0]]
    mask = (
        cache.attention_mask.bool() if cache.attention_mask is not None else torch.ones(ref.shape[:2], dtype=torch.bool)
    )
    if skip_first_position:
        mask = mask.clone()
        mask[:, 0] = False
    n = int(mask.sum())
    if n < 3:
        raise ValueError(f"only {n} usable token rows in the cache; cache more text")
    idx = torch.arange(n)
    if max_points is not None and n > max_points:
        idx = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:max_points].sort().values
    return [cache[kind, layer][mask][idx].float() for layer in layers]
