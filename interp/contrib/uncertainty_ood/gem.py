"""GEM: gated evidential mixtures (with a Fisher allocation regulariser) for single-pass uncertainty.

Paper: *GEM-FI: Gated Evidential Mixtures with Fisher Modulation* (arXiv 2605.03750; no public code).
Evidential deep learning (EDL; Sensoy et al. 2018) predicts Dirichlet evidence e = softplus(logits),
α = e + 1, and reads uncertainty from the total evidence (vacuity K / Σα). It is overconfident far
from the data. GEM adds, as the abstract describes:

- **GEM-CORE**: a feature-level energy E(z) = -logsumexp(U z + c) (an energy classifier trained with
  cross-entropy, as in energy-based OOD detection) mapped to a bounded gate g = σ(a - b E(z)), b >= 0,
  that multiplies the evidence: little support (high energy) -> little evidence.
- **GEM-MIX**: M evidential heads with routing weights π(z) = softmax(R z): a mixture of Dirichlets
  in one pass; predictive p = Σ_m π_m α_m / S_m, total evidence Σ_m π_m (S_m - K).
- **GEM-FI**: a regulariser on the mixture allocations that keeps heads from collapsing. The paper's
  exact form is not public; ours penalises 1 - tr F(π̄) = Σ_m π̄_m², where F(π̄) = diag(π̄) - π̄π̄ᵀ is the
  Fisher information of the batch-mean allocation π̄ (maximal when the heads share the load).

Everything here is a head on features z, so it trains on any frozen cached activations (an OOD probe
on a layer) or at the end of a backbone. `GEMHead(d, K, n_heads=1, gate=False)` is plain EDL.

    head = GEMHead(d_in=64, n_classes=7, n_heads=3, gate=True)
    out = head(z)                                   # GEMOutput(alpha [n, M, K], pi [n, M], energy_logits)
    loss = gem_loss(out, y, kl_weight=0.5, fisher_weight=0.1)
    out.prob(), out.vacuity()                       # predictive probabilities, K / total strength
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class GEMOutput:
    alpha: Tensor
    """Dirichlet parameters of every head [n, M, K] (evidence + 1, after the gate)."""
    pi: Tensor
    """Mixture weights [n, M] (all ones for a single head)."""
    energy_logits: Tensor | None
    """Logits of the energy classifier [n, K] (None without a gate)."""

    def prob(self) -> Tensor:
        """Predictive class probabilities [n, K] = Σ_m π_m α_m / S_m."""
        return (self.pi.unsqueeze(-1) * self.alpha / self.alpha.sum(-1, keepdim=True)).sum(1)

    def strength(self) -> Tensor:
        """Mixture Dirichlet strength Σ_m π_m S_m [n]."""
        return (self.pi * self.alpha.sum(-1)).sum(1)

    def vacuity(self) -> Tensor:
        """K / strength in (0, 1]: 1 = no evidence at all (the OOD score)."""
        return self.alpha.shape[-1] / self.strength()


class GEMHead(nn.Module):
    """Evidential head(s) on features [n, d_in]; gate and mixture as configured (see module doc)."""

    def __init__(self, d_in: int, n_classes: int, n_heads: int = 1, gate: bool = False):
        super().__init__()
        if d_in < 1 or n_classes < 2 or n_heads < 1:
            raise ValueError(f"need d_in >= 1, n_classes >= 2, n_heads >= 1; got {d_in}, {n_classes}, {n_heads}")
        self.k, self.m = n_classes, n_heads
        self.evidence = nn.Linear(d_in, n_heads * n_classes)
        self.router = nn.Linear(d_in, n_heads) if n_heads > 1 else None
        self.energy = nn.Linear(d_in, n_classes) if gate else None
        self.gate_a = nn.Parameter(torch.tensor(2.0)) if gate else None
        self.gate_b = nn.Parameter(torch.tensor(0.0)) if gate else None  # b = softplus(gate_b) >= 0

    def gate(self, z: Tensor) -> tuple[Tensor, Tensor]:
        """(gate [n] in (0, 1), energy-classifier logits [n, K])."""
        logits = self.energy(z)
        energy = -torch.logsumexp(logits, -1)
        return torch.sigmoid(self.gate_a - F.softplus(self.gate_b) * energy), logits

    def forward(self, z: Tensor) -> GEMOutput:
        if z.ndim != 2 or z.shape[1] != self.evidence.in_features:
            raise ValueError(f"features must be [n, {self.evidence.in_features}]; got {tuple(z.shape)}")
        ev = F.softplus(self.evidence(z)).view(len(z), self.m, self.k)
        logits = None
        if self.energy is not None:
            g, logits = self.gate(z)
            ev = ev * g.view(-1, 1, 1)
        pi = F.softmax(self.router(z), -1) if self.router is not None else z.new_ones(len(z), 1)
        return GEMOutput(ev + 1.0, pi, logits)


def edl_loss(alpha: Tensor, y: Tensor, kl_weight: float) -> Tensor:
    """Per-row EDL loss [n] (Sensoy et al.): Σ_k y_k (ψ(S) - ψ(α_k)) + w KL(Dir(α̃) || Dir(1)),
    α̃ = y + (1 - y) α (the misleading evidence only)."""
    k = alpha.shape[-1]
    onehot = F.one_hot(y, k).to(alpha.dtype)
    s = alpha.sum(-1, keepdim=True)
    nll = (onehot * (torch.digamma(s) - torch.digamma(alpha))).sum(-1)
    at = onehot + (1 - onehot) * alpha
    st = at.sum(-1)
    kl = (
        torch.lgamma(st)
        - torch.lgamma(torch.tensor(float(k), dtype=alpha.dtype))
        - torch.lgamma(at).sum(-1)
        + ((at - 1) * (torch.digamma(at) - torch.digamma(st).unsqueeze(-1))).sum(-1)
    )
    return nll + kl_weight * kl


def fisher_allocation_penalty(pi: Tensor) -> Tensor:
    """1 - tr F(π̄) = Σ_m π̄_m² of the batch-mean allocation (1/M when balanced, 1 when collapsed)."""
    return pi.mean(0).pow(2).sum()


def gem_loss(out: GEMOutput, y: Tensor, kl_weight: float = 0.0, fisher_weight: float = 0.0) -> Tensor:
    """Σ_m π_m EDL_m (expected over the routing) + CE of the energy classifier + the Fisher penalty."""
    if y.ndim != 1 or len(y) != len(out.alpha):
        raise ValueError(f"labels must be [n] = [{len(out.alpha)}]; got {tuple(y.shape)}")
    if kl_weight < 0 or fisher_weight < 0:
        raise ValueError(f"kl_weight={kl_weight} and fisher_weight={fisher_weight} must be >= 0")
    per_head = torch.stack([edl_loss(out.alpha[:, m], y, kl_weight) for m in range(out.alpha.shape[1])], 1)
    loss = (out.pi * per_head).sum(1).mean()
    if out.energy_logits is not None:
        loss = loss + F.cross_entropy(out.energy_logits, y)
    if fisher_weight and out.pi.shape[1] > 1:
        loss = loss + fisher_weight * fisher_allocation_penalty(out.pi)
    return loss


def brier(prob: Tensor, y: Tensor) -> float:
    """Mean Σ_k (p_k - 1[y = k])²."""
    return float((prob - F.one_hot(y, prob.shape[-1]).to(prob.dtype)).pow(2).sum(-1).mean())
