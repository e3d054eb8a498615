"""PACEAttention: compression-expansion attention from the MCR² coding rate, and the coding-rate metrics.

Paper: *PACEAttention: Principled and Adaptive Feature Compression-Expansion Grounded in the Geometry of
MCR²* (ICML 2026 poster 64389; Yu, Zhang, Deng, Peng; an earlier version is "ECAttention"; no public
code). The exact update rule is not public; what is implemented is our reconstruction from the abstract:

- **Coding rates** (Yu et al. 2020, MCR²) of features Z [n, d] (rows = tokens), with α = d / (n ε²):
  R(Z) = ½ logdet(I + α ZᵀZ); for a partition Π into groups, R_c(Z, Π) = Σ_j (n_j / 2n) logdet(I + α_j Z_jᵀZ_j)
  with α_j = d / (n_j ε²); the rate reduction ΔR = R - R_c (large: groups spread apart and each compact).
- **Compression** (as CRATE's MSSA): per head k a subspace U_k [d, p]; tokens attend to each other
  inside it, softmax((U_kᵀz_i)ᵀ(U_kᵀz_j)), and are pulled towards what they attend to: the gradient step
  of the subspace coding rate that CRATE derives.
- **Expansion**: a step along the coding-rate gradient of the whole token set,
  ∇R(Z) = α Z (I + α ZᵀZ)⁻¹, which pushes tokens apart. The Gram matrix is formed from a random
  Gaussian sketch of the tokens (m sketch rows, near-linear in n; exact when `sketch=None`).
- **PACE layer**: Z + a·MSSA(Z) + b·∇R(Z), with two learnable scalars a, b per layer.

`PACEViT` stacks such layers (pre-LayerNorm, then an MLP) into a CRATE-like ViT; `attention="softmax"`
and `"mssa"` give the baselines with the same body.

    coding_rate(Z), rate_reduction(Z, labels)        # the MCR² metrics, on any cached token features
    model = PACEViT(attention="pace", patch=2, image=8, d=64, depth=4, heads=4, n_classes=10)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def coding_rate(z: Tensor, eps: float = 0.5) -> float:
    """R(Z) = ½ logdet(I + d/(n ε²) ZᵀZ) of rows z [n, d]."""
    if z.ndim != 2 or len(z) == 0:
        raise ValueError(f"features must be [n >= 1, d]; got {tuple(z.shape)}")
    if eps <= 0:
        raise ValueError(f"eps={eps} must be positive")
    n, d = z.shape
    z = z.double()
    return float(0.5 * torch.logdet(torch.eye(d, dtype=torch.float64) + d / (n * eps**2) * z.T @ z))


def rate_reduction(z: Tensor, labels: Tensor, eps: float = 0.5) -> dict[str, float]:
    """{"R", "Rc", "dR"}: the whole-set coding rate, the group-wise rate and their difference."""
    if labels.shape != (len(z),):
        raise ValueError(f"labels must be [n] = [{len(z)}]; got {tuple(labels.shape)}")
    n = len(z)
    rc = sum(float((labels == c).sum()) / n * coding_rate(z[labels == c], eps) for c in torch.unique(labels))
    r = coding_rate(z, eps)
    return {"R": r, "Rc": rc, "dR": r - rc}


def coding_rate_gradient(
    z: Tensor, eps: float = 0.5, sketch: int | None = None, generator: torch.Generator | None = None
) -> Tensor:
    """∇_Z R(Z) = α Z (I + α ZᵀZ)⁻¹ for token sets z [batch, n, d]; with `sketch` = m, ZᵀZ is estimated
    as (SZ)ᵀ(SZ) with a Gaussian S [m, n] of variance 1/m (unbiased; cost linear in n)."""
    b, n, d = z.shape
    alpha = d / (n * eps**2)
    if sketch is None:
        gram = z.transpose(1, 2) @ z
    else:
        s = torch.randn(b, sketch, n, generator=generator, device=z.device, dtype=z.dtype) / sketch**0.5
        sz = s @ z
        gram = sz.transpose(1, 2) @ sz
    eye = torch.eye(d, device=z.device, dtype=z.dtype)
    return alpha * torch.linalg.solve(eye + alpha * gram, z.transpose(1, 2)).transpose(1, 2)


class SubspaceAttention(nn.Module):
    """CRATE's MSSA: per head, q = k = v = U_kᵀz; the heads' outputs mapped back by U_k (tied weights)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        if d % heads:
            raise ValueError(f"d={d} must be divisible by heads={heads}")
        self.heads, self.p = heads, d // heads
        self.u = nn.Parameter(torch.randn(heads, d, self.p) / d**0.5)
        self.last_attn: Tensor | None = None

    def forward(self, z: Tensor) -> Tensor:
        proj = torch.einsum("bnd,hdp->bhnp", z, self.u)
        attn = F.softmax(proj @ proj.transpose(-1, -2) / self.p**0.5, -1)
        self.last_attn = attn.detach()
        return torch.einsum("bhnp,hdp->bnd", attn @ proj, self.u) / self.heads


class SoftmaxAttention(nn.Module):
    """Standard multi-head self-attention (separate q, k, v, out projections)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.mha = nn.MultiheadAttention(d, heads, batch_first=True)
        self.last_attn: Tensor | None = None

    def forward(self, z: Tensor) -> Tensor:
        out, attn = self.mha(z, z, z, need_weights=True, average_attn_weights=False)
        self.last_attn = attn.detach()
        return out


class PACEAttention(nn.Module):
    """a·MSSA(Z) + b·∇R(Z): compression along head subspaces plus coding-rate expansion, a and b learned."""

    def __init__(self, d: int, heads: int, eps: float = 0.5, sketch: int | None = 8):
        super().__init__()
        self.mssa = SubspaceAttention(d, heads)
        self.a = nn.Parameter(torch.tensor(1.0))
        self.b = nn.Parameter(torch.tensor(0.1))
        self.eps, self.sketch = eps, sketch

    @property
    def last_attn(self) -> Tensor | None:
        return self.mssa.last_attn

    def forward(self, z: Tensor) -> Tensor:
        return self.a * self.mssa(z) + self.b * coding_rate_gradient(
            z, self.eps, self.sketch if self.training else None
        )


class PACEViT(nn.Module):
    """A small ViT: patch embedding + cls token + `depth` x (LN -> attention -> residual, LN -> MLP ->
    residual) + linear head on the cls token. `attention`: "softmax", "mssa" (CRATE), "pace" (sketched
    Gram, 8 rows) or "pace_exact" (exact Gram);
    `mlp_hidden` (default 2d) lets the tied-weight attentions spend the parameters softmax MHSA uses."""

    def __init__(
        self,
        attention: str,
        patch: int,
        image: int,
        d: int,
        depth: int,
        heads: int,
        n_classes: int,
        channels: int = 1,
        mlp_hidden: int | None = None,
    ):
        super().__init__()
        makers = {
            "softmax": SoftmaxAttention,
            "mssa": SubspaceAttention,
            "pace": PACEAttention,
            "pace_exact": lambda d, h: PACEAttention(d, h, sketch=None),
        }
        if attention not in makers:
            raise ValueError(f"attention must be one of {sorted(makers)}; got {attention!r}")
        if image % patch:
            raise ValueError(f"image={image} must be divisible by patch={patch}")
        self.patch, n = patch, (image // patch) ** 2
        self.embed = nn.Linear(channels * patch * patch, d)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(0.02 * torch.randn(1, n + 1, d))
        self.attn = nn.ModuleList(makers[attention](d, heads) for _ in range(depth))
        self.ln1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        h = mlp_hidden or 2 * d
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d)) for _ in range(depth))
        self.head = nn.Linear(d, n_classes)

    def patches(self, x: Tensor) -> Tensor:
        """[b, c, H, W] -> [b, n_patches, c p p]."""
        p = self.patch
        b, c, h, w = x.shape
        return x.unfold(2, p, p).unfold(3, p, p).permute(0, 2, 3, 1, 4, 5).reshape(b, (h // p) * (w // p), c * p * p)

    def forward(self, x: Tensor, return_states: bool = False):
        z = torch.cat([self.cls.expand(len(x), -1, -1), self.embed(self.patches(x))], 1) + self.pos
        states = [z]
        for attn, ln1, ln2, mlp in zip(self.attn, self.ln1, self.ln2, self.mlp):
            z = z + attn(ln1(z))
            z = z + mlp(ln2(z))
            states.append(z)
        logits = self.head(z[:, 0])
        return (logits, states) if return_states else logits


def head_overlap(attn: Tensor) -> float:
    """Mean pairwise cosine similarity between heads' attention maps [b, heads, n, n] (lower = more distinct)."""
    h = attn.shape[1]
    if h < 2:
        raise ValueError("head_overlap needs at least two heads")
    flat = F.normalize(attn.flatten(2), dim=-1)
    sim = flat @ flat.transpose(1, 2)
    off = sim.sum((1, 2)) - sim.diagonal(dim1=1, dim2=2).sum(-1)
    return float((off / (h * (h - 1))).mean())
