"""InfoGlobe: Fisher-Rao-preserving reduction of count (or probability) data on the square-root sphere.

Paper: information-preserving statistical manifold learning for single-cell counts (ICML 2026; title
and code not found, so the objective below is our reading of the catalog's abstract-level summary).
Each row (a cell's gene counts, or a next-token distribution) is a multinomial p on the simplex. The
map p -> sqrt(p) puts it on the unit sphere, where the Fisher-Rao distance is a great-circle distance:

    d_FR(p, q) = 2 arccos( Σ_i sqrt(p_i q_i) ).

InfoGlobe learns a soft assignment of the G features to K groups, A [G, K] with rows on the simplex
(softmax of free logits); a row's group proportions q = p A are again a multinomial, so sqrt(q) lies on
a K-dimensional sphere. Aggregation is a Markov morphism, so distances can only shrink (Chentsov); the
assignment is trained (Adam, random row pairs per step) to keep them: the stress
Σ (d_FR(p_i, p_j) - d_FR(q_i, q_j))² over sampled pairs. `hard_groups` reads the groups off A.

    model = InfoGlobe(n_features=2000, n_groups=20).fit(P)      # P: [n, G] rows of proportions
    Q = model.embed(P)                                          # [n, K] group proportions
    fisher_rao(Q[:5], Q[:5])                                    # pairwise FR distances
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from interp.contrib.common.fit import fit, make_optimizer


def to_proportions(counts: Tensor) -> Tensor:
    """Rows of non-negative counts -> rows of proportions (each sums to one)."""
    if counts.ndim != 2 or (counts < 0).any():
        raise ValueError("counts must be a 2-D tensor of non-negative values")
    tot = counts.sum(1, keepdim=True)
    if (tot == 0).any():
        raise ValueError("a row has zero total count; drop empty rows first")
    return counts / tot


def fisher_rao(p: Tensor, q: Tensor) -> Tensor:
    """Pairwise Fisher-Rao distances [n, m] between rows of proportions p [n, G] and q [m, G]."""
    if p.ndim != 2 or q.ndim != 2 or p.shape[1] != q.shape[1]:
        raise ValueError(f"need p [n, G] and q [m, G]; got {tuple(p.shape)} and {tuple(q.shape)}")
    bc = p.clamp_min(0).sqrt() @ q.clamp_min(0).sqrt().T
    return 2 * torch.arccos(bc.clamp(-1 + 1e-7, 1 - 1e-7))


def _paired_fr(p: Tensor, q: Tensor) -> Tensor:
    bc = (p.clamp_min(0) * q.clamp_min(0)).sqrt().sum(-1)
    return 2 * torch.arccos(bc.clamp(-1 + 1e-7, 1 - 1e-7))


class InfoGlobe:
    """Soft feature-to-group aggregation trained to preserve pairwise Fisher-Rao distances."""

    def __init__(self, n_features: int, n_groups: int, seed: int = 0):
        if n_features < 1 or not 1 <= n_groups <= n_features:
            raise ValueError(f"need 1 <= n_groups <= n_features; got {n_groups} and {n_features}")
        g = torch.Generator().manual_seed(seed)
        self.logits = (0.01 * torch.randn(n_features, n_groups, generator=g)).requires_grad_()
        self.seed = seed
        self.history: list[float] = []

    def assignment(self) -> Tensor:
        """A [G, K]: each feature's soft membership over the groups (rows sum to one)."""
        return F.softmax(self.logits, -1)

    def embed(self, p: Tensor) -> Tensor:
        """Group proportions q = p A [n, K] (rows sum to one)."""
        if p.ndim != 2 or p.shape[1] != self.logits.shape[0]:
            raise ValueError(f"rows must be [n, {self.logits.shape[0]}]; got {tuple(p.shape)}")
        return p @ self.assignment()

    def stress(self, p: Tensor, i: Tensor, j: Tensor) -> Tensor:
        q = self.embed(p)
        return (_paired_fr(p[i], p[j]) - _paired_fr(q[i], q[j])).pow(2).mean()

    def fit(
        self, p: Tensor, steps: int = 400, pairs: int = 2048, lr: float = 0.1, temperature_decay: bool = True
    ) -> InfoGlobe:
        """Adam on the logits; each step samples `pairs` random row pairs. Returns self."""
        if steps < 1 or pairs < 1 or len(p) < 2:
            raise ValueError(f"need steps >= 1, pairs >= 1 and at least two rows; got {steps}, {pairs}, {len(p)}")
        if not torch.allclose(p.sum(1), torch.ones(len(p), dtype=p.dtype), atol=1e-4):
            raise ValueError("rows must be proportions summing to one (see to_proportions)")
        g = torch.Generator().manual_seed(self.seed + 1)

        def loss_fn(_) -> Tensor:
            i = torch.randint(len(p), (pairs,), generator=g)
            j = torch.randint(len(p), (pairs,), generator=g)
            return self.stress(p, i, j)

        self.history += fit(make_optimizer([self.logits], lr=lr), loss_fn, range(steps), record_losses=True).losses
        return self

    def hard_groups(self) -> Tensor:
        """Each feature's most likely group [G]."""
        return self.assignment().argmax(-1)


def angle_distances(x: Tensor) -> Tensor:
    """Pairwise angles arccos(cos(x_i, x_j)) [n, n]: the PCA baseline's cosine geometry."""
    z = F.normalize(x, dim=1)
    return torch.arccos((z @ z.T).clamp(-1 + 1e-7, 1 - 1e-7))


def modular_counts(
    n_cells: int, n_genes: int, n_modules: int, n_types: int, depth: int, seed: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(counts [n, G], true proportions [n, G], cell type [n], gene module [G]): cell types draw module
    activities from their own Dirichlet; genes share their module's activity by fixed weights; counts are
    multinomial with `depth` reads per cell (depth varies x0.5-1.5)."""
    if n_genes < n_modules or n_cells < 1 or depth < 1:
        raise ValueError(
            f"need n_genes >= n_modules, n_cells >= 1 and depth >= 1; got {n_genes}, {n_modules}, {n_cells}, {depth}"
        )
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # the Gamma/Dirichlet/multinomial samplers use the global stream
    module = torch.arange(n_genes) % n_modules
    w = torch.rand(n_genes, generator=g) + 0.2
    w = w / torch.zeros(n_modules).index_add_(0, module, w)[module]  # weights sum to one per module
    type_alpha = torch.distributions.Gamma(torch.full((n_types, n_modules), 0.5), 1.0).sample()
    cell_type = torch.randint(n_types, (n_cells,), generator=g)
    act = torch.distributions.Dirichlet(type_alpha[cell_type] * 20 + 0.05).sample()
    probs = act[:, module] * w
    probs = probs / probs.sum(1, keepdim=True)
    reads = (depth * (0.5 + torch.rand(n_cells, generator=g))).long().clamp_min(1)
    counts = torch.stack([torch.distributions.Multinomial(int(r), probs=pr).sample() for r, pr in zip(reads, probs)])
    return counts, probs, cell_type, module
