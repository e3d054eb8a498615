"""SAFER: subspace fingerprints + one energy score for open-set, replay-free class-incremental learning.

Paper: *Subspace-Aware Feature Reshaping for Open-Set Graph Class-Incremental Learning* (ICML 2026 poster
64163; no public code, so the fingerprint construction below is our reading of the abstract). Tasks
arrive one after another, each with new classes; no data of old tasks is kept; at test time some inputs
belong to classes never seen. For each task t SAFER keeps:

- a fingerprint: the task's feature mean μ_t and an orthonormal basis U_t [d, r] of the top-r principal
  directions of its (centred) features, fixed once the task is learned (so it cannot drift);
- a task head (linear, trained on task t only, then frozen) on the *reshaped* features
  φ_t(x) = μ_t + U_t U_tᵀ (x - μ_t): x projected onto task t's subspace.

One energy score does both jobs: E_t(x) = -logsumexp(head_t(φ_t(x))) + γ |x - φ_t(x)|² / s_t, the logit
energy plus the residual outside task t's subspace (normalised by its mean s_t on the task's own
features; γ = 0 is the pure logit energy). Route x to argmin_t E_t; reject it as unknown when
min_t E_t > τ. The residual term is our addition to the abstract's "energy on reshaped features": the
reshaped features alone discard exactly the information that says x is not from task t.

The paper's geometric space-consistency regulariser (for a GCN backbone trained across tasks) is not
implemented: the backbone here is fixed (e.g. SGC propagation of node features, or a frozen LM layer).

    safer = SAFER(rank=8, gamma=1.0)
    for feats, labels in tasks:  safer.learn_task(feats, labels)   # global class ids
    pred, score = safer.predict(x)                                  # score = min_t E_t (high = unknown)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from interp.contrib.common.probe import train_linear_probe


def fingerprint(x: Tensor, rank: int) -> tuple[Tensor, Tensor]:
    """(μ [d], U [d, rank]): the mean and top-`rank` principal directions of task features x [n, d]."""
    if x.ndim != 2 or len(x) < 2:
        raise ValueError(f"task features must be [n >= 2, d]; got {tuple(x.shape)}")
    if not 1 <= rank <= min(x.shape):
        raise ValueError(f"rank={rank} must be between 1 and min(n, d) = {min(x.shape)}")
    mu = x.mean(0)
    _, _, vh = torch.linalg.svd(x - mu, full_matrices=False)
    return mu, vh[:rank].T


def reshape(x: Tensor, mu: Tensor, basis: Tensor) -> tuple[Tensor, Tensor]:
    """(φ(x) = μ + U Uᵀ (x - μ), squared residual |x - φ(x)|² [n])."""
    c = x - mu
    proj = (c @ basis) @ basis.T
    return mu + proj, (c - proj).pow(2).sum(-1)


@dataclass
class TaskMemory:
    """What SAFER keeps of one task: its fingerprint and its frozen head (never any of its data)."""

    mu: Tensor
    """Mean of the task's features [d]."""
    basis: Tensor
    """Orthonormal basis of the task's top principal subspace [d, r]."""
    w: Tensor
    """Head weights [C_t, d]."""
    b: Tensor
    """Head bias [C_t]."""
    classes: Tensor
    """Global class ids of the head's outputs."""
    scale: float
    """Mean squared residual of the task's own training features (normalises the residual term)."""


@dataclass
class SAFER:
    """Per-task subspace fingerprints + frozen heads; routing and rejection by one energy."""

    rank: int = 8
    """Dimension r of each task's subspace fingerprint."""
    gamma: float = 1.0
    """Weight of the normalised out-of-subspace residual in the energy (0: logit energy only)."""
    reshape_features: bool = True
    """Project onto the task subspace before the head (False: an ablation, heads on raw features)."""
    steps: int = 300
    """Full-batch Adam steps of each task head."""
    tasks: list[TaskMemory] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.rank < 1 or self.gamma < 0 or self.steps < 1:
            raise ValueError(f"need rank >= 1, gamma >= 0, steps >= 1; got {self.rank}, {self.gamma}, {self.steps}")

    def learn_task(self, x: Tensor, y: Tensor, seed: int = 0) -> None:
        """Learn one task from its features x [n, d] and global labels y [n] (nothing is kept but the
        fingerprint and the head)."""
        if y.ndim != 1 or len(y) != len(x):
            raise ValueError(f"labels must be [n] = [{len(x)}]; got {tuple(y.shape)}")
        classes = torch.unique(y)
        if len(classes) < 2:
            raise ValueError("a task needs at least two classes")
        if self.tasks and x.shape[1] != self.tasks[0].mu.shape[0]:
            raise ValueError(f"features have d={x.shape[1]}, earlier tasks d={self.tasks[0].mu.shape[0]}")
        mu, basis = fingerprint(x, min(self.rank, *x.shape))
        feats, resid = reshape(x, mu, basis) if self.reshape_features else (x, reshape(x, mu, basis)[1])
        local = torch.searchsorted(classes, y)
        w, b = train_linear_probe(feats, local, len(classes), self.steps, seed=seed)
        self.tasks.append(TaskMemory(mu, basis, w, b, classes, float(resid.mean().clamp_min(1e-8))))

    def energies(self, x: Tensor) -> tuple[Tensor, list[Tensor]]:
        """(E [n, T] per task, the per-task logits)."""
        if not self.tasks:
            raise ValueError("no task learned yet: call learn_task first")
        es, logits = [], []
        for t in self.tasks:
            feats, resid = reshape(x, t.mu, t.basis)
            lg = (feats if self.reshape_features else x) @ t.w.T + t.b
            es.append(-torch.logsumexp(lg, -1) + self.gamma * resid / t.scale)
            logits.append(lg)
        return torch.stack(es, 1), logits

    @torch.no_grad()
    def predict(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(global class prediction [n], unknown score min_t E_t [n]); reject where score > τ."""
        e, logits = self.energies(x)
        task = e.argmin(1)
        pred = torch.empty(len(x), dtype=torch.long)
        for i, t in enumerate(self.tasks):
            m = task == i
            pred[m] = t.classes[logits[i][m].argmax(-1)]
        return pred, e.min(1).values


def sbm_graph(
    n: int, n_classes: int, p_in: float, p_out: float, d: int, feat_scale: float, seed: int
) -> tuple[Tensor, Tensor, Tensor]:
    """(dense adjacency [n, n], features [n, d], labels [n]): a stochastic block model with
    class-conditional Gaussian features (class means N(0, feat_scale² I), unit noise)."""
    if n < n_classes or not 0 <= p_out <= p_in <= 1:
        raise ValueError(f"need n >= n_classes and 0 <= p_out <= p_in <= 1; got n={n}, p_in={p_in}, p_out={p_out}")
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % n_classes
    y = y[torch.randperm(n, generator=g)]
    p = torch.where(y[:, None] == y[None, :], p_in, p_out)
    a = (torch.rand(n, n, generator=g) < p).float().triu(1)
    a = a + a.T
    means = feat_scale * torch.randn(n_classes, d, generator=g)
    return a, means[y] + torch.randn(n, d, generator=g), y


def sgc_features(a: Tensor, x: Tensor, hops: int = 2) -> Tensor:
    """Â^hops x with Â = D^-1/2 (A + I) D^-1/2: a parameter-free 2-layer GCN (SGC) encoder."""
    a = a + torch.eye(len(a))
    dinv = a.sum(1).rsqrt()
    a = dinv[:, None] * a * dinv[None, :]
    for _ in range(hops):
        x = a @ x
    return x
