"""Training-free router fixes a referee would try before SSMoE's spectral router (issue 42's strong baseline).

- `equalised_rows`: every router row rescaled to the median row norm (a few rows that grew large, as in a router
  whose rows were scaled after training, stop winning every token);
- `centred`: the router reads states minus their mean over a calibration sample (a component shared by every
  state, which dominates the logits of an anisotropic stream, is removed), as a bias `-W mean`;
- both together.

Each returns a new `nn.Linear` router; the block's own router is not changed.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def equalised_rows(router: nn.Linear) -> Tensor:
    """The router's weight [n_experts, d] with every row at the median row norm."""
    w = router.weight.detach()
    norms = w.norm(dim=1, keepdim=True)
    return w / norms.clamp_min(1e-12) * norms.median()


def fixed_router(router: nn.Linear, states: Tensor | None = None, equalise: bool = True) -> nn.Linear:
    """A router with equalised rows (`equalise`) reading states centred on the mean of `states` [n, d]
    (None: not centred)."""
    if states is not None and (states.ndim != 2 or states.shape[1] != router.in_features):
        raise ValueError(f"states must be [n, {router.in_features}], got {tuple(states.shape)}")
    w = equalised_rows(router) if equalise else router.weight.detach().clone()
    out = nn.Linear(router.in_features, router.out_features, bias=states is not None)
    with torch.no_grad():
        out.weight.copy_(w)
        if states is not None:
            out.bias.copy_(-(w @ states.float().mean(0)))
    return out
