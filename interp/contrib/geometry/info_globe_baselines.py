"""Strong baselines for InfoGlobe (issue 42): what a referee tries before learning a grouping by gradient descent.

- **k-means groups**: cluster the G features by their profiles over the rows (each feature's column of
  proportions scaled to sum one, then square-rooted, so Euclidean k-means is Hellinger k-means), then
  aggregate exactly as InfoGlobe does (q = p summed within groups) and measure Fisher-Rao on q. No gradient
  steps, no stress; the number of groups is the method's.
- **Hellinger PCA**: PCA of sqrt(p) (the square-root sphere InfoGlobe works on) with as many components as
  groups; distances are Euclidean between the projected rows (monotone in Fisher-Rao for exact projections,
  and the metrics here are rank correlations).

    groups = kmeans_groups(P, 20, seed=0)       # [G] ints in 0..19
    Q = group_proportions(P, groups, 20)        # [n, 20], rows sum to one
    Z = hellinger_pca(P, 20)                    # [n, 20]
"""

from __future__ import annotations

import torch
from torch import Tensor


def kmeans(x: Tensor, k: int, seed: int = 0, n_init: int = 4, iters: int = 100) -> Tensor:
    """Lloyd's k-means with k-means++ seeding, best of `n_init` starts by inertia: cluster labels [n]."""
    if x.ndim != 2 or not 1 <= k <= len(x) or n_init < 1 or iters < 1:
        raise ValueError(f"need x [n, d] with 1 <= k <= n, n_init >= 1, iters >= 1; got {tuple(x.shape)}, k={k}")
    x = x.double()
    g = torch.Generator().manual_seed(seed)
    best, best_inertia = None, float("inf")
    for _ in range(n_init):
        centers = x[torch.randint(len(x), (1,), generator=g)]
        for _ in range(k - 1):  # k-means++: next centre drawn with probability ∝ squared distance to the nearest
            d2 = torch.cdist(x, centers).min(1).values.pow(2)
            nxt = torch.multinomial(d2 / d2.sum(), 1, generator=g) if d2.sum() > 0 else torch.tensor([0])
            centers = torch.cat([centers, x[nxt]])
        labels = torch.cdist(x, centers).argmin(1)
        for _ in range(iters):
            sums = torch.zeros(k, x.shape[1], dtype=x.dtype).index_add_(0, labels, x)
            sizes = torch.bincount(labels, minlength=k)
            centers = torch.where(sizes[:, None] > 0, sums / sizes.clamp_min(1)[:, None], centers)  # empty: keep
            new = torch.cdist(x, centers).argmin(1)
            if torch.equal(new, labels):
                break
            labels = new
        inertia = float((x - centers[labels]).pow(2).sum())
        if inertia < best_inertia:
            best, best_inertia = labels, inertia
    return best


def feature_profiles(p: Tensor) -> Tensor:
    """Each feature's profile over the rows [G, n]: its column of p scaled to sum one, square-rooted."""
    if p.ndim != 2 or (p < 0).any():
        raise ValueError("p must be [n, G] non-negative proportions")
    col = p.T.double()
    return (col / col.sum(1, keepdim=True).clamp_min(1e-30)).sqrt()


def kmeans_groups(p: Tensor, k: int, seed: int = 0, n_init: int = 4) -> Tensor:
    """Hard groups [G] of the features of p [n, G] by k-means on their Hellinger profiles."""
    return kmeans(feature_profiles(p), k, seed=seed, n_init=n_init)


def group_proportions(p: Tensor, groups: Tensor, k: int) -> Tensor:
    """InfoGlobe's aggregation with a hard assignment: q [n, k], q_c = Σ_{g in group c} p_g."""
    if groups.shape != (p.shape[1],) or int(groups.min()) < 0 or int(groups.max()) >= k:
        raise ValueError(f"groups must be [{p.shape[1]}] ints in 0..{k - 1}")
    return torch.zeros(len(p), k, dtype=p.dtype).index_add_(1, groups, p)


def hellinger_pca(p: Tensor, k: int) -> Tensor:
    """Coordinates [n, k] of sqrt(p) (centred) on its top-k principal directions."""
    z = p.double().clamp_min(0).sqrt()
    z = z - z.mean(0)
    _, _, vh = torch.linalg.svd(z, full_matrices=False)
    return z @ vh[:k].T
