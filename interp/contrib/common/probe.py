"""A linear probe: multinomial logistic regression trained by full-batch Adam, the papers' standard readout.

    w, b = train_linear_probe(x_train, y_train, n_classes=10)
    acc = probe_accuracy(x_train, y_train, x_test, y_test, n_classes=10, standardise=True)

Initialisation is the caller's choice: `init="small"` draws W ~ 0.01 N(0, 1) from a generator seeded with
`seed` and b = 0 (deterministic per seed); `init="linear"` is `nn.Linear`'s default, drawn from torch's
global generator (seed it yourself); a pair (W0, b0) continues from those weights (a warm start).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp.contrib.common.fit import fit, make_optimizer


def train_linear_probe(
    x: Tensor,
    y: Tensor,
    n_classes: int,
    steps: int = 300,
    lr: float = 0.1,
    weight_decay: float = 1e-4,
    init: Literal["small", "linear"] | tuple[Tensor, Tensor] = "small",
    seed: int = 0,
) -> tuple[Tensor, Tensor]:
    """(W [C, d], b [C]) minimising the cross-entropy of x @ Wᵀ + b against `y`, `steps` full-batch Adam steps."""
    if isinstance(init, tuple):
        w, b = (t.detach().clone().requires_grad_() for t in init)
    elif init == "small":
        g = torch.Generator().manual_seed(seed)
        w = (0.01 * torch.randn(n_classes, x.shape[1], generator=g)).requires_grad_()
        b = torch.zeros(n_classes, requires_grad=True)
    elif init == "linear":
        lin = nn.Linear(x.shape[1], n_classes)
        w, b = lin.weight, lin.bias
    else:
        raise ValueError(f"init is 'small' or 'linear'; got {init!r}")
    opt = make_optimizer([w, b], lr=lr, weight_decay=weight_decay)
    fit(opt, lambda _: F.cross_entropy(x @ w.T + b, y), range(steps))
    return w.detach(), b.detach()


def probe_accuracy(
    x_train: Tensor,
    y_train: Tensor,
    x_test: Tensor,
    y_test: Tensor,
    n_classes: int,
    standardise: bool = False,
    **kwargs,
) -> float:
    """Test accuracy of `train_linear_probe` (its options in `kwargs`), features optionally standardised by
    the training rows' mean and standard deviation."""
    if standardise:
        mu, sd = x_train.mean(0), x_train.std(0).clamp_min(1e-6)
        x_train, x_test = (x_train - mu) / sd, (x_test - mu) / sd
    w, b = train_linear_probe(x_train, y_train, n_classes, **kwargs)
    return float(((x_test @ w.T + b).argmax(-1) == y_test).float().mean())
