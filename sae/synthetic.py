"""Synthetic activations with known ground-truth features, for checking what each SAE variant claims.

Each generator returns a `Synthetic`: the data `x` [n, d], the ground-truth directions, which features
fired (`active`, [n, n_features] magnitudes), and generator-specific structure (parents/children,
split groups, compositional pairs, angles). All take a `seed` and are deterministic.

- `hierarchical_split`: parents with exclusive children (absorption-prone), features whose direction
  wobbles among sub-directions (split-prone), plain features (the C²R toy of the spec).
- `compositional_pairs`: atoms, compositional pairs that add a binding direction when both fire, and
  co-occurring pairs that do not (the PolySAE toy).
- `double_circle`: two disjoint circles embedded in R^d (the Coh toy).
- `write_store`: put any [n, d] tensor into an `interp` ActivationStore, so the CLI can train on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from interp.store import ActivationStore, StoreMeta, write_shard_file


@dataclass
class Synthetic:
    x: Tensor
    """[n, d] activations."""
    directions: Tensor
    """[n_features, d] unit ground-truth directions (the mean direction for split features)."""
    active: Tensor
    """[n, n_features] magnitude of each feature in each sample (0 when off)."""
    info: dict = field(default_factory=dict)
    """Generator-specific structure (indices of parents, children, split groups, pairs, angles...)."""


def _orthonormal(d: int, m: int, g: torch.Generator) -> Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, m, generator=g, dtype=torch.float64))
    return q.T.float().contiguous()  # [m, d]


def _unit_scale(x: Tensor) -> float:
    return math.sqrt(x.shape[1] / x.square().sum(1).mean().item())


def hierarchical_split(
    n: int = 50_000,
    d: int = 64,
    n_parents: int = 8,
    n_children: int = 3,
    n_split: int = 8,
    n_sub: int = 4,
    n_plain: int = 16,
    p_parent: float = 0.10,
    p_child: float = 0.7,
    p_split: float = 0.05,
    p_plain: float = 0.05,
    wobble: float = 0.3,
    noise: float = 0.01,
    seed: int = 0,
    dict_seed: int | None = None,
) -> Synthetic:
    """Parents (with exactly one child firing with prob. p_child when the parent fires), split features
    (direction normalize(d_g + wobble * sub_s), s uniform among n_sub random sub-directions orthogonal
    to d_g) and plain ones.
    Magnitudes U(0.5, 1.5); x is rescaled so that E||x||² = d. Needs d >= number of directions.
    `dict_seed` (default: `seed`) fixes the directions, `seed` the samples: a held-out set of the same
    features is `hierarchical_split(seed=other, dict_seed=train_seed)`."""
    gd = torch.Generator().manual_seed(seed if dict_seed is None else dict_seed)
    n_dir = n_parents * (1 + n_children) + n_split + n_plain
    if n_dir > d:
        raise ValueError(f"{n_dir} orthogonal directions do not fit in d={d}")
    D = _orthonormal(d, n_dir, gd)
    i = 0
    parents = list(range(i, i + n_parents))
    i += n_parents
    children = [list(range(i + c * n_children, i + (c + 1) * n_children)) for c in range(n_parents)]
    i += n_parents * n_children
    split = list(range(i, i + n_split))
    i += n_split
    subs = torch.randn(n_split, n_sub, d, generator=gd)  # random sub-directions orthogonal to their d_g
    subs -= (subs * D[split][:, None]).sum(-1, keepdim=True) * D[split][:, None]
    subs /= subs.norm(dim=-1, keepdim=True)
    plain = list(range(i, i + n_plain))
    feats = parents + [c for cs in children for c in cs] + split + plain
    g = torch.Generator().manual_seed(seed)
    mag = lambda *s: 0.5 + torch.rand(*s, generator=g)  # noqa: E731
    active = torch.zeros(n, n_dir)
    x = torch.zeros(n, d)
    p_on = torch.rand(n, n_parents, generator=g) < p_parent
    c_on = p_on & (torch.rand(n, n_parents, generator=g) < p_child)
    which = torch.randint(0, n_children, (n, n_parents), generator=g)
    for pi, p in enumerate(parents):
        active[:, p] = p_on[:, pi] * mag(n)
        for ci, c in enumerate(children[pi]):
            active[:, c] = (c_on[:, pi] & (which[:, pi] == ci)) * mag(n)
    s_on = torch.rand(n, n_split, generator=g) < p_split
    s_which = torch.randint(0, n_sub, (n, n_split), generator=g)
    for gi, f in enumerate(split):
        a = s_on[:, gi] * mag(n)
        active[:, f] = a
        dirs = D[f][None] + wobble * subs[gi][s_which[:, gi]]
        x += a[:, None] * dirs / dirs.norm(dim=-1, keepdim=True)
    for f in plain:
        active[:, f] = (torch.rand(n, generator=g) < p_plain) * mag(n)
    non_split = parents + [c for cs in children for c in cs] + plain
    x += active[:, non_split] @ D[non_split]
    x += noise * torch.randn(n, d, generator=g)
    s = _unit_scale(x)
    keep = torch.tensor(feats)
    return Synthetic(
        x * s,
        D[keep],
        active[:, keep] * s,
        {
            "parents": list(range(n_parents)),
            "children": [[n_parents + c * n_children + j for j in range(n_children)] for c in range(n_parents)],
            "split": list(range(n_parents * (1 + n_children), n_parents * (1 + n_children) + n_split)),
            "scale": s,
        },
    )


def compositional_pairs(
    n: int = 50_000,
    d: int = 64,
    n_atoms: int = 40,
    n_comp: int = 12,
    n_cooc: int = 12,
    binding_rank: int = 8,
    p_atom: float = 0.04,
    p_pair: float = 0.05,
    noise: float = 0.01,
    seed: int = 0,
) -> Synthetic:
    """Atoms d_i; compositional pairs P add z_i z_j e_ij with e_ij in a `binding_rank`-dim subspace
    orthogonal to the atoms; co-occurring pairs Q do not. With prob. p_pair per sample one pair of
    P ∪ Q is forced on, so P and Q pairs co-occur equally often."""
    g = torch.Generator().manual_seed(seed)
    if n_atoms + binding_rank > d or n_comp + n_cooc > n_atoms * (n_atoms - 1) // 2:
        raise ValueError("need n_atoms + binding_rank <= d and enough distinct atom pairs")
    B = _orthonormal(d, n_atoms + binding_rank, g)
    D, E = B[:n_atoms], B[n_atoms:]
    all_pairs = [(i, j) for i in range(n_atoms) for j in range(i + 1, n_atoms)]
    chosen = [all_pairs[t] for t in torch.randperm(len(all_pairs), generator=g)[: n_comp + n_cooc].tolist()]
    P, Q = chosen[:n_comp], chosen[n_comp:]
    w = torch.randn(n_comp, binding_rank, generator=g)
    e = (w / w.norm(dim=-1, keepdim=True)) @ E  # [n_comp, d]
    on = torch.rand(n, n_atoms, generator=g) < p_atom
    force = torch.rand(n, generator=g) < p_pair
    pick = torch.randint(0, n_comp + n_cooc, (n,), generator=g)
    pairs = P + Q
    for r in force.nonzero().flatten().tolist():
        i, j = pairs[pick[r]]
        on[r, i] = on[r, j] = True
    z = on * (0.5 + torch.rand(n, n_atoms, generator=g))
    x = z @ D
    for (i, j), ev in zip(P, e):
        x += (z[:, i] * z[:, j])[:, None] * ev[None]
    x += noise * torch.randn(n, d, generator=g)
    s = _unit_scale(x)
    compound = torch.zeros(n, dtype=torch.bool)
    for i, j in P:
        compound |= on[:, i] & on[:, j]
    return Synthetic(x * s, D, z * s, {"P": P, "Q": Q, "binding": e, "compound": compound, "scale": s})


def double_circle(n: int = 10_000, d: int = 128, harmonics: int = 3, noise: float = 1e-3, seed: int = 0) -> Synthetic:
    """Two disjoint circles in R^d: features [cos kθ, sin kθ]_{k<=harmonics} through a fixed random map
    per component, plus a per-component offset. info: `theta` [n], `component` [n]."""
    g = torch.Generator().manual_seed(seed)
    theta = torch.rand(n, generator=g) * 2 * math.pi
    comp = torch.randint(0, 2, (n,), generator=g)
    k = torch.arange(1, harmonics + 1)
    f = torch.cat([torch.cos(theta[:, None] * k), torch.sin(theta[:, None] * k)], dim=1)  # [n, 2h]
    A = torch.randn(2, 2 * harmonics, d, generator=g) / math.sqrt(2 * harmonics)
    off = torch.randn(2, d, generator=g) * 2.0
    x = torch.einsum("nf,nfd->nd", f, A[comp]) + off[comp] + noise * torch.randn(n, d, generator=g)
    return Synthetic(
        x,
        off / off.norm(dim=-1, keepdim=True),
        torch.nn.functional.one_hot(comp, 2).float(),
        {"theta": theta, "component": comp},
    )


def write_store(
    path: str | Path,
    x: Tensor,
    hook: str = "synthetic.hook_x",
    rows_per_shard: int = 8192,
    ctx_len: int = 1,
    tokens: Tensor | None = None,
) -> ActivationStore:
    """Write [n, d] rows as an ActivationStore (one 'sequence' per row) so `interp sae train` can read it;
    `tokens` [n] are the rows' token ids (default 0)."""
    meta = StoreMeta(
        model="synthetic",
        model_sha256="-",
        hooks={hook: [x.shape[1]]},
        dtype="float32",
        tokenizer="-",
        ctx_len=ctx_len,
        data={"name": "synthetic", "rows": int(x.shape[0])},
    )
    n_shards = math.ceil(x.shape[0] / rows_per_shard)
    store = ActivationStore.open_or_create(path, meta, n_shards_planned=n_shards)
    for i in range(n_shards):
        if store.has_shard(i):
            continue
        sl = slice(i * rows_per_shard, min((i + 1) * rows_per_shard, x.shape[0]))
        m = sl.stop - sl.start
        info = write_shard_file(
            store.path,
            i,
            {
                hook: x[sl].float().contiguous(),
                "tokens": torch.zeros(m, dtype=torch.int32) if tokens is None else tokens[sl].int(),
                "seq": torch.arange(sl.start, sl.stop, dtype=torch.int64),
                "pos": torch.zeros(m, dtype=torch.int32),
            },
        )
        store.commit_shard(info)
    return store
