"""DPO primitives shared by the post-training papers (MIPO, SCPO).

DPO (Rafailov et al. 2023) loss of one pair, from sequence log-probabilities under the policy and a frozen
reference:  -log σ(β [(log π(y_w|x) - log π_ref(y_w|x)) - (log π(y_l|x) - log π_ref(y_l|x))]).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def dpo_loss(logp_w: Tensor, logp_l: Tensor, ref_w: Tensor, ref_l: Tensor, beta: float = 0.1) -> Tensor:
    """Mean DPO loss over a batch of pairs; each argument is [batch] sequence log-probabilities."""
    if beta <= 0:
        raise ValueError(f"beta={beta} must be positive")
    if not (logp_w.shape == logp_l.shape == ref_w.shape == ref_l.shape):
        raise ValueError("the four log-probability tensors must have the same [batch] shape")
    margin = (logp_w - ref_w.detach()) - (logp_l - ref_l.detach())
    return -F.logsigmoid(beta * margin).mean()
