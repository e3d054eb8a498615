"""AttrRob: how robust are attributions to small input changes, and kernel (non-softmax) attention.

Paper: *Improving Adversarial Robustness of Attribution via Implicit Regularization* (arXiv 2605.29983;
Mehrpanah, Gamba, Azizpour; no official code found). Its claims: SGD's implicit regularisation (a larger
learning rate for the batch size, flatter minima, lower input-space curvature) makes gradient attributions
more robust; the gain does not carry over to softmax-attention attributions (entropy constraints), and
kernel attention restores it. This file gives the measuring instruments:

- similarity of two attribution maps: `topk_intersection`, `spearman`, `cosine` (row-wise, [batch, ...]);
- `saliency` (input gradient of the target logit) for any differentiable `f(x) -> logits`;
- `random_robustness` (attributions at x + uniform noise in an L-inf ball of radius eps) and
  `topk_attack` (PGD on the attribution: push the mass off the original top-k features inside the ball,
  while the predicted class stays fixed; Ghorbani et al.'s top-k attack, needs a smooth model);
- `input_hessian_norm`: Hutchinson estimate of the Frobenius norm of the input Hessian of the loss, the
  input-curvature proxy;
- `KernelAttention`: linear attention with a positive feature map (elu + 1) normalised by a sum, not a
  softmax; `softmax=True` gives the softmax head with the same parameters, for side-by-side runs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp.contrib.common.ranks import rowwise_spearman

Model = Callable[[Tensor], Tensor]


def _flat_pair(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    if a.shape != b.shape:
        raise ValueError(f"attribution maps must have the same shape; got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.ndim < 2:
        raise ValueError("attribution maps are [batch, ...]; add a batch axis (a[None]) for one map")
    return a.flatten(1).float(), b.flatten(1).float()


def topk_intersection(a: Tensor, b: Tensor, k: int, absolute: bool = True) -> Tensor:
    """Fraction of the top-k features (by |value| when `absolute`) that two maps share: [batch] in [0, 1]."""
    a, b = _flat_pair(a, b)
    if not 1 <= k <= a.shape[1]:
        raise ValueError(f"k={k} must be between 1 and the number of features {a.shape[1]}")
    if absolute:
        a, b = a.abs(), b.abs()
    ta = F.one_hot(a.topk(k, dim=1).indices, a.shape[1]).sum(1)
    tb = F.one_hot(b.topk(k, dim=1).indices, b.shape[1]).sum(1)
    return (ta * tb).sum(1).float() / k


def spearman(a: Tensor, b: Tensor, absolute: bool = False) -> Tensor:
    """Spearman rank correlation between two maps, per row: [batch] in [-1, 1]."""
    a, b = _flat_pair(a, b)
    if a.shape[1] < 2:
        raise ValueError("rank correlation needs at least two features per map")
    if absolute:
        a, b = a.abs(), b.abs()
    return rowwise_spearman(a, b)


def cosine(a: Tensor, b: Tensor) -> Tensor:
    """Cosine similarity of two maps, per row: [batch]."""
    a, b = _flat_pair(a, b)
    return F.cosine_similarity(a, b, dim=1)


def saliency(f: Model, x: Tensor, target: Tensor | None = None, create_graph: bool = False) -> Tensor:
    """Gradient of the target logit (default: the predicted class) w.r.t. the input: same shape as x."""
    if not (create_graph and x.requires_grad):  # keep the caller's graph for second derivatives
        x = x.detach().requires_grad_(True)
    logits = f(x)
    if target is None:
        target = logits.argmax(-1)
    sel = logits.gather(-1, target.view(-1, 1)).sum()
    (g,) = torch.autograd.grad(sel, x, create_graph=create_graph)
    return g


def _check_eps(eps: float) -> None:
    if eps <= 0:
        raise ValueError(f"eps={eps} must be positive (the L-inf radius of the perturbation)")


def random_robustness(
    f: Model, x: Tensor, eps: float, k: int, n_samples: int = 8, attribution: Callable = saliency, seed: int = 0
) -> dict[str, float]:
    """Mean top-k intersection, Spearman and cosine between attr(x) and attr(x + u), u ~ U[-eps, eps]."""
    _check_eps(eps)
    gen = torch.Generator().manual_seed(seed)
    target = f(x).argmax(-1).detach()
    base = attribution(f, x, target).detach()
    tk, sp, co = [], [], []
    for _ in range(n_samples):
        u = (torch.rand(x.shape, generator=gen) * 2 - 1) * eps
        other = attribution(f, x + u, target).detach()
        tk.append(topk_intersection(base, other, k)), sp.append(spearman(base, other)), co.append(cosine(base, other))
    return {
        "topk": float(torch.cat(tk).mean()),
        "spearman": float(torch.cat(sp).mean()),
        "cosine": float(torch.cat(co).mean()),
    }


def topk_attack(
    f: Model,
    x: Tensor,
    eps: float,
    k: int,
    steps: int = 10,
    step_size: float | None = None,
    attribution: Callable = saliency,
) -> tuple[Tensor, dict[str, float]]:
    """PGD in the L-inf ball that lowers the share of |attribution| on the original top-k features.

    A step is kept per example only while the predicted class is unchanged. Returns (x_adv, metrics of
    attr(x) vs attr(x_adv)). Piecewise-linear (ReLU) models have zero second derivatives, so use smooth
    activations (softplus, GELU, tanh) when attacking.
    """
    _check_eps(eps)
    step_size = step_size or 2.5 * eps / steps
    target = f(x).argmax(-1).detach()
    base = attribution(f, x, target).detach().flatten(1).abs()
    top = F.one_hot(base.topk(k, dim=1).indices, base.shape[1]).sum(1).float()
    x_adv = x.detach().clone()
    for _ in range(steps):
        xa = x_adv.clone().requires_grad_(True)
        a = attribution(f, xa, target, create_graph=True).flatten(1).abs()
        share = (a * top).sum(1) / a.sum(1).clamp_min(1e-12)
        (g,) = torch.autograd.grad(share.sum(), xa)
        cand = x_adv - step_size * g.sign()
        cand = (x + (cand - x).clamp(-eps, eps)).detach()
        with torch.no_grad():
            keep = f(cand).argmax(-1) == target
        x_adv = torch.where(keep.view(-1, *[1] * (x.ndim - 1)), cand, x_adv)
    adv = attribution(f, x_adv, target).detach()
    base_attr = attribution(f, x, target).detach()
    return x_adv, {
        "topk": float(topk_intersection(base_attr, adv, k).mean()),
        "spearman": float(spearman(base_attr, adv).mean()),
        "cosine": float(cosine(base_attr, adv).mean()),
    }


def input_hessian_norm(f: Model, x: Tensor, y: Tensor, n_probes: int = 8, seed: int = 0) -> float:
    """Hutchinson estimate of the mean per-example ||∇²_x loss||_F, with E_v ||H v||² = ||H||_F² (v ~ N(0, I))."""
    gen = torch.Generator().manual_seed(seed)
    x = x.detach().requires_grad_(True)
    loss = F.cross_entropy(f(x), y, reduction="sum")  # sum: per-example Hessians stay separate
    (g,) = torch.autograd.grad(loss, x, create_graph=True)
    sq = torch.zeros(x.shape[0], dtype=torch.float64)
    for i in range(n_probes):
        v = torch.randn(x.shape, generator=gen)
        (hv,) = torch.autograd.grad(g, x, grad_outputs=v, retain_graph=i < n_probes - 1)
        sq += hv.detach().flatten(1).double().pow(2).sum(1)
    return float((sq / n_probes).sqrt().mean())


class KernelAttention(nn.Module):
    """One attention layer, kernel (elu+1 feature map, sum-normalised) or softmax, with its weights kept.

    forward(x [batch, pos, d]) -> [batch, pos, d]; `self.last_pattern` [batch, head, query, key] rows sum
    to one in both modes. A(q, k) = φ(q)·φ(k) / Σ_k' φ(q)·φ(k') with φ(u) = elu(u) + 1 > 0.
    """

    def __init__(self, d_model: int, n_heads: int = 1, softmax: bool = False):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.n_heads, self.softmax = n_heads, softmax
        self.last_pattern: Tensor | None = None

    def pattern(self, q: Tensor, k: Tensor) -> Tensor:
        """Attention weights [batch, head, query, key] from q, k [batch, head, pos, d_head]."""
        if self.softmax:
            return torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, -1)
        fq, fk = F.elu(q) + 1, F.elu(k) + 1
        s = fq @ fk.transpose(-1, -2)
        return s / s.sum(-1, keepdim=True)

    def forward(self, x: Tensor) -> Tensor:
        b, p, d = x.shape
        q, k, v = self.qkv(x).view(b, p, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        a = self.pattern(q, k)
        self.last_pattern = a
        return self.out((a @ v).transpose(1, 2).reshape(b, p, d))
