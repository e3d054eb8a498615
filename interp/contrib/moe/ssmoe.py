"""SSMoE: a training-free MoE router from the singular vectors of the expert weights.

Paper: *Eigenvectors of Experts are Training-free Non-collapsing Routers* (ICML 2026; official code
giangdip2410/SSMoE, `modeling_olmoe.py`, `OlmoeSparseMoeBlock`). What this file implements, as there:

1. For expert e and each of its three matrices M in (gate_proj [h, d], up_proj [h, d], down_projᵀ [h, d]),
   take the right singular vectors V [d, r] of M, score them by their signed alignment with the router
   row g_e (gᵀ_e V), keep the top-k and average them into one direction s_{e,m} [d].
2. The SSMoE logit of a token state x for expert e is mean_m <x, s_{e,m}>.
3. Routing weights = (1 - c) softmax(router logits) + c softmax(SSMoE logits), then the usual top-k (and
   renormalisation when the block normalises its top-k weights).

Nothing is trained; the directions are computed once from the weights.

    router = SSMoERouter.from_experts(gate_w, up_w, down_w, router_w, k=8, c=0.5)
    weights, experts = router.route(x, x @ router_w.T, top_k=2)
    load_entropy(expert_load(experts, n_experts=8))      # higher = less collapsed

The singular vectors' signs are whatever the SVD returns, and the official code keeps the top-k by the
*signed* alignment; `signed=True` (the default) does the same. `signed=False` flips every vector to
point along g_e first, which removes that arbitrariness (our option, not the paper's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _check_experts(gate_w: Tensor, up_w: Tensor, down_w: Tensor, router_w: Tensor) -> tuple[int, int, int]:
    if gate_w.ndim != 3 or up_w.shape != gate_w.shape:
        raise ValueError(
            f"gate_w and up_w must both be [n_experts, d_hidden, d_model]; got {tuple(gate_w.shape)} and "
            f"{tuple(up_w.shape)} (stack the experts' gate_proj.weight / up_proj.weight)"
        )
    n, h, d = gate_w.shape
    if down_w.shape != (n, d, h):
        raise ValueError(f"down_w must be [n_experts, d_model, d_hidden] = {(n, d, h)}; got {tuple(down_w.shape)}")
    if router_w.shape != (n, d):
        raise ValueError(
            f"router_w must be [n_experts, d_model] = {(n, d)} (the gate Linear's weight); got {tuple(router_w.shape)}"
        )
    return n, h, d


def spectral_directions(
    gate_w: Tensor, up_w: Tensor, down_w: Tensor, router_w: Tensor, k: int, signed: bool = True
) -> Tensor:
    """The SSMoE directions s_{e,m}: [n_experts, 3, d_model] (m = gate, up, downᵀ).

    gate_w, up_w: [n_experts, d_hidden, d_model]; down_w: [n_experts, d_model, d_hidden];
    router_w: [n_experts, d_model]. k: how many singular vectors to average per matrix.
    """
    n, h, d = _check_experts(gate_w, up_w, down_w, router_w)
    r = min(h, d)
    if not 1 <= k <= r:
        raise ValueError(f"k={k} must be between 1 and min(d_hidden, d_model) = {r}")
    out = torch.empty(n, 3, d, dtype=torch.float32, device=gate_w.device)
    g = router_w.float()
    for e in range(n):
        for m, mat in enumerate((gate_w[e], up_w[e], down_w[e].T)):
            _, _, vh = torch.linalg.svd(mat.float(), full_matrices=False)
            v = vh.T  # [d, r] right singular vectors as columns (torch.svd's V)
            score = g[e] @ v
            if not signed:
                v = v * torch.where(score < 0, -1.0, 1.0)
                score = score.abs()
            top = torch.topk(score, k).indices
            out[e, m] = v[:, top].mean(dim=1)
    return out


def ssmoe_logits(x: Tensor, directions: Tensor) -> Tensor:
    """SSMoE logits [..., n_experts] = mean over the 3 matrices of <x, s_{e,m}>; x: [..., d_model]."""
    if x.shape[-1] != directions.shape[-1]:
        raise ValueError(f"states have d_model {x.shape[-1]} but the directions have {directions.shape[-1]}")
    return torch.einsum("...d,emd->...em", x.float(), directions.float()).mean(-1)


def mixed_routing(
    router_logits: Tensor, spectral_logits: Tensor, c: float, top_k: int, normalize: bool = True
) -> tuple[Tensor, Tensor]:
    """(weights [..., top_k], experts [..., top_k]) from (1-c) softmax(router) + c softmax(SSMoE).

    c=0 is the original router. `normalize` renormalises the kept weights to sum to one (norm_topk_prob).
    """
    if not 0.0 <= c <= 1.0:
        raise ValueError(f"the mixing ratio c={c} must lie in [0, 1]")
    if router_logits.shape != spectral_logits.shape:
        raise ValueError(
            f"router logits {tuple(router_logits.shape)} and SSMoE logits "
            f"{tuple(spectral_logits.shape)} must have the same shape [..., n_experts]"
        )
    n = router_logits.shape[-1]
    if not 1 <= top_k <= n:
        raise ValueError(f"top_k={top_k} must be between 1 and the number of experts {n}")
    probs = (1 - c) * F.softmax(router_logits.float(), -1) + c * F.softmax(spectral_logits.float(), -1)
    weights, experts = torch.topk(probs, top_k, dim=-1)
    if normalize:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights, experts


@dataclass
class SSMoERouter:
    """The SSMoE directions of one MoE block, with the mixing ratio `c`."""

    directions: Tensor  # [n_experts, 3, d_model]
    c: float = 0.5

    @classmethod
    def from_experts(cls, gate_w, up_w, down_w, router_w, k: int = 8, c: float = 0.5, signed: bool = True):
        return cls(spectral_directions(gate_w, up_w, down_w, router_w, k, signed), c)

    @classmethod
    def from_block(cls, block: MoEBlock, k: int = 8, c: float = 0.5, signed: bool = True) -> SSMoERouter:
        return cls.from_experts(block.gate_w, block.up_w, block.down_w, block.router.weight, k, c, signed)

    def route(self, x: Tensor, router_logits: Tensor, top_k: int, normalize: bool = True):
        """(weights, experts) for states x [..., d_model] given the block's own router logits."""
        return mixed_routing(router_logits, ssmoe_logits(x, self.directions), self.c, top_k, normalize)


# ---------------------------------------------------------------------------------------- diagnostics
def expert_load(experts: Tensor, n_experts: int) -> Tensor:
    """Fraction of routed (token, slot) assignments per expert: [n_experts], sums to one."""
    if experts.numel() == 0:
        raise ValueError("no routed tokens: expert_load needs at least one assignment")
    if int(experts.max()) >= n_experts or int(experts.min()) < 0:
        raise ValueError(f"expert ids must lie in [0, {n_experts}); got {int(experts.min())}..{int(experts.max())}")
    counts = torch.bincount(experts.flatten(), minlength=n_experts).float()
    return counts / counts.sum()


def load_entropy(load: Tensor, normalized: bool = True) -> float:
    """Entropy of the expert load; divided by log(n_experts) when `normalized` (1 = uniform, 0 = one expert)."""
    p = load[load > 0]
    h = float(-(p * p.log()).sum())
    return h / math.log(load.numel()) if normalized and load.numel() > 1 else h


# ---------------------------------------------------------------------------------------- a small MoE
class MoEBlock(nn.Module):
    """A sparse MoE block of SwiGLU experts (OLMoE/Mixtral-style), with an optional SSMoE router.

    forward(x [..., d]) -> [..., d]; the last routing is kept in `self.last_experts` for load diagnostics.
    """

    def __init__(self, d_model: int, d_hidden: int, n_experts: int, top_k: int = 2, normalize: bool = True):
        super().__init__()
        self.router = nn.Linear(d_model, n_experts, bias=False)
        scale = d_model**-0.5
        self.gate_w = nn.Parameter(torch.randn(n_experts, d_hidden, d_model) * scale)
        self.up_w = nn.Parameter(torch.randn(n_experts, d_hidden, d_model) * scale)
        self.down_w = nn.Parameter(torch.randn(n_experts, d_model, d_hidden) * d_hidden**-0.5)
        self.top_k, self.normalize, self.n_experts = top_k, normalize, n_experts
        self.ssmoe: SSMoERouter | None = None
        self.last_experts: Tensor | None = None

    def expert_out(self, x: Tensor) -> Tensor:
        """Every expert's output [..., n_experts, d] (dense; fine at toy sizes and exact)."""
        a = torch.einsum("...d,ehd->...eh", x, self.gate_w)
        b = torch.einsum("...d,ehd->...eh", x, self.up_w)
        return torch.einsum("...eh,edh->...ed", F.silu(a) * b, self.down_w)

    def forward(self, x: Tensor) -> Tensor:
        logits = self.router(x)
        if self.ssmoe is None:
            weights, experts = mixed_routing(logits, logits, 0.0, self.top_k, self.normalize)
        else:
            weights, experts = self.ssmoe.route(x, logits, self.top_k, self.normalize)
        self.last_experts = experts.detach()
        outs = self.expert_out(x)
        chosen = torch.gather(outs, -2, experts.unsqueeze(-1).expand(*experts.shape, outs.shape[-1]))
        return (weights.unsqueeze(-1).to(outs.dtype) * chosen).sum(-2)
