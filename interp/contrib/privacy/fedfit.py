"""FedFit: Fisher-guided prune/grow for federated dynamic sparse training.

Paper/code: Serena-28/Fedfit (README only; no code released), catalog spec. In federated dynamic sparse
training each client trains a sparse model and the server periodically changes the sparse structure.
Magnitude pruning with gradient growth (FedDST / RigL) is ill-suited to heterogeneous, non-converged
clients; FedFit scores weights by a second-order estimate of the loss change through the diagonal
empirical Fisher F, with no Hessian:

- prune the active weights with the smallest ½·F_ii·w_i² (the loss increase of removing w_i);
- grow the inactive weights with the largest g_i² / (F_ii + λ) (the loss decrease a Newton step on
  w_i would buy).

Clients send their masked weights and, at adjustment rounds, their gradient and Fisher diagonals; the
server averages them (weighted by client size) and updates the mask. For a linear layer the per-sample
gradient is an outer product δ_n a_nᵀ, so the empirical Fisher diagonal is exact and cheap:
F = (δ²)ᵀ(a²) / N (`layer_fisher`). The number of active weights never changes (same budget).

    cfg = FedConfig(rounds=30, sparsity=0.9, rule="fisher")
    acc, history = federated_train(clients, (x_test, y_test), dims=(64, 256, 10), cfg=cfg)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass
class FedConfig:
    """Federated sparse training settings."""

    rounds: int = 30
    """Communication rounds."""
    local_steps: int = 10
    """Local SGD steps per client per round."""
    batch: int = 32
    """Local mini-batch size."""
    lr: float = 0.1
    """Local SGD learning rate."""
    sparsity: float = 0.9
    """Fraction of zero weights in every linear layer (0: dense FedAvg)."""
    rule: Literal["fisher", "magnitude", "static"] = "fisher"
    """Prune/grow scores: FedFit's Fisher rule, magnitude prune / gradient grow, or a fixed random mask."""
    adjust_every: int = 5
    """Rounds between mask adjustments."""
    adjust_until: float = 0.75
    """Stop adjusting after this fraction of the rounds."""
    prune_frac: float = 0.3
    """Initial fraction of active weights replaced at an adjustment (cosine-decayed)."""
    damping: float = 1e-4
    """λ in the growth score g² / (F + λ)."""
    seed: int = 0

    def __post_init__(self):
        if self.rounds < 1 or self.local_steps < 1 or self.batch < 1 or self.adjust_every < 1:
            raise ValueError("rounds, local_steps, batch and adjust_every must be >= 1")
        if not 0.0 <= self.sparsity < 1.0:
            raise ValueError(f"sparsity={self.sparsity} must lie in [0, 1)")
        if self.rule not in ("fisher", "magnitude", "static"):
            raise ValueError(f"rule={self.rule!r}: choose fisher, magnitude or static")
        if not 0.0 <= self.prune_frac < 1.0 or self.lr <= 0 or self.damping <= 0:
            raise ValueError("prune_frac must lie in [0, 1), lr and damping must be positive")


def init_params(dims: tuple[int, ...], gen: torch.Generator) -> list[Tensor]:
    """[W1, b1, W2, b2, ...] of an MLP with ReLU between layers (Kaiming-uniform-like)."""
    ps = []
    for a, b in zip(dims[:-1], dims[1:]):
        bound = 1 / math.sqrt(a)
        ps += [(torch.rand(b, a, generator=gen) * 2 - 1) * bound, torch.zeros(b)]
    return ps


def forward(params: list[Tensor], x: Tensor) -> tuple[Tensor, list[Tensor]]:
    """(logits, inputs of every linear layer)."""
    acts, h = [], x
    for i in range(0, len(params), 2):
        acts.append(h)
        h = h @ params[i].T + params[i + 1]
        if i + 2 < len(params):
            h = torch.relu(h)
    return h, acts


def layer_fisher(params: list[Tensor], x: Tensor, y: Tensor) -> tuple[list[Tensor], list[Tensor]]:
    """(mean gradients, exact empirical-Fisher diagonals) of every weight matrix on (x, y):
    per-sample gradients are δ_n a_nᵀ, so F = (δ²)ᵀ(a²)/N and g = δᵀa/N."""
    ps = [p.detach() for p in params]
    # δ of each layer's pre-activation, per sample: gradient of the summed loss (no 1/N) w.r.t. it
    pre, acts = [], []
    h = x
    for i in range(0, len(ps), 2):
        acts.append(h.detach())
        z = (h @ ps[i].T + ps[i + 1]).detach().requires_grad_(True) if i == 0 else h @ ps[i].T + ps[i + 1]
        z.retain_grad()
        pre.append(z)
        h = torch.relu(z) if i + 2 < len(ps) else z
    F.cross_entropy(h, y, reduction="sum").backward()
    grads, fishers = [], []
    n = len(x)
    for z, a in zip(pre, acts):
        d = z.grad
        grads.append(d.T @ a / n)
        fishers.append((d**2).T @ (a**2) / n)
    return grads, fishers


def random_masks(params: list[Tensor], sparsity: float, gen: torch.Generator) -> list[Tensor]:
    """A random mask per weight matrix with exactly round((1 - sparsity)·size) ones (biases stay dense)."""
    masks = []
    for w in params[::2]:
        k = max(1, round((1 - sparsity) * w.numel()))
        m = torch.zeros(w.numel())
        m[torch.randperm(w.numel(), generator=gen)[:k]] = 1
        masks.append(m.view_as(w))
    return masks


def adjust_mask(
    w: Tensor, mask: Tensor, grad: Tensor, fisher: Tensor, n_swap: int, rule: str, damping: float
) -> Tensor:
    """Prune n_swap active weights and grow n_swap inactive ones by the rule's scores; the count of
    active weights is unchanged."""
    active, inactive = mask.bool().flatten(), ~mask.bool().flatten()
    n_swap = int(min(n_swap, active.sum(), inactive.sum()))
    if n_swap == 0:
        return mask
    if rule == "fisher":
        prune_s, grow_s = 0.5 * fisher * w**2, grad**2 / (fisher + damping)
    elif rule == "magnitude":
        prune_s, grow_s = w.abs(), grad.abs()
    else:
        raise ValueError(f"rule={rule!r} does not adjust masks")
    prune_s = prune_s.flatten().masked_fill(~active, math.inf)
    grow_s = grow_s.flatten().masked_fill(~inactive, -math.inf)
    new = mask.flatten().clone()
    new[torch.topk(grow_s, n_swap).indices] = 1  # grow first: only inactive weights can be chosen
    new[torch.topk(-prune_s, n_swap).indices] = 0  # prune among the weights that were active
    return new.view_as(mask)


def _local(params, masks, x, y, cfg: FedConfig, gen) -> list[Tensor]:
    ps = [p.clone().requires_grad_(True) for p in params]
    for _ in range(cfg.local_steps):
        idx = torch.randint(len(x), (min(cfg.batch, len(x)),), generator=gen)
        loss = F.cross_entropy(forward(ps, x[idx])[0], y[idx])
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            for i, (p, g) in enumerate(zip(ps, grads)):
                p -= cfg.lr * g
                if i % 2 == 0 and masks is not None:
                    p *= masks[i // 2]
    return [p.detach() for p in ps]


def accuracy(params: list[Tensor], x: Tensor, y: Tensor) -> float:
    with torch.no_grad():
        return float((forward(params, x)[0].argmax(-1) == y).float().mean())


def federated_train(
    clients: list[tuple[Tensor, Tensor]], test: tuple[Tensor, Tensor], dims: tuple[int, ...], cfg: FedConfig
) -> tuple[float, list[float]]:
    """FedAvg over `clients` [(x, y), ...] with a sparse mask managed by `cfg.rule`; returns (final test
    accuracy, accuracy after each round)."""
    if not clients or any(len(x) == 0 for x, _ in clients):
        raise ValueError("need at least one client, each with at least one example")
    if any(x.shape[1] != dims[0] for x, _ in clients):
        raise ValueError(f"client inputs must have {dims[0]} features")
    gen = torch.Generator().manual_seed(cfg.seed)
    params = init_params(dims, gen)
    masks = random_masks(params, cfg.sparsity, gen) if cfg.sparsity > 0 else None
    if masks is not None:
        params = [p * masks[i // 2] if i % 2 == 0 else p for i, p in enumerate(params)]
    sizes = torch.tensor([len(x) for x, _ in clients], dtype=torch.float32)
    wts = sizes / sizes.sum()
    hist = []
    for r in range(1, cfg.rounds + 1):
        local = [_local(params, masks, x, y, cfg, gen) for x, y in clients]
        params = [sum(w * l[i] for w, l in zip(wts, local)) for i in range(len(params))]
        adjust = (
            masks is not None
            and cfg.rule != "static"
            and r % cfg.adjust_every == 0
            and r <= cfg.adjust_until * cfg.rounds
        )
        if adjust:
            stats = [layer_fisher(params, x, y) for x, y in clients]
            frac = cfg.prune_frac * 0.5 * (1 + math.cos(math.pi * r / cfg.rounds))
            for li in range(len(masks)):
                g = sum(w * s[0][li] for w, s in zip(wts, stats))
                fi = sum(w * s[1][li] for w, s in zip(wts, stats))
                n_swap = int(frac * masks[li].sum())
                masks[li] = adjust_mask(params[2 * li], masks[li], g, fi, n_swap, cfg.rule, cfg.damping)
                params[2 * li] = params[2 * li] * masks[li]  # grown weights start at zero (RigL)
        hist.append(accuracy(params, *test))
    return hist[-1], hist


def dirichlet_split(y: Tensor, n_clients: int, alpha: float, gen: torch.Generator) -> list[Tensor]:
    """Row indices per client: each class is split over clients by Dirichlet(alpha) proportions."""
    if n_clients < 1 or alpha <= 0:
        raise ValueError(f"n_clients ({n_clients}) must be >= 1 and alpha ({alpha}) > 0")
    parts = [[] for _ in range(n_clients)]
    dist = torch.distributions.Dirichlet(torch.full((n_clients,), float(alpha)))
    for c in torch.unique(y):
        idx = torch.nonzero(y == c).flatten()
        idx = idx[torch.randperm(len(idx), generator=gen)]
        torch.manual_seed(int(torch.randint(1 << 30, (1,), generator=gen)))
        cuts = (dist.sample().cumsum(0) * len(idx)).round().long()[:-1]
        for k, chunk in enumerate(torch.tensor_split(idx, cuts.tolist())):
            parts[k].extend(chunk.tolist())
    return [torch.tensor(sorted(p), dtype=torch.long) for p in parts]
