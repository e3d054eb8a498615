"""The decoder bias a training run starts from: the geometric median of a sample of training rows.

sae-lens starts `b_dec` at zero. With `apply_b_dec_to_input` (its default) the encoder sees `x - b_dec`,
so at zero every pre-activation carries the rows' common component: on SmolLM2's layer-15 residual the
mean row has norm 0.79x the median row norm, the few latents best aligned with it win the top-k of nearly
every row, and most of the rest never fire (issue 24: 77% dead after 122 steps). dictionary_learning's
TopK / BatchTopK / Matryoshka trainers start `b_dec` at the geometric median of the first batch; so do we
(`TrainConfig.init_b_dec`, "median" by default; "mean" and "zeros" for sae-lens's).

The geometric median argmin_y sum_i ||x_i - y|| is robust to the few huge-norm rows residual streams hold;
Weiszfeld's iteration (re-weighted means with weights 1 / ||x_i - y||) converges to it.
"""

from __future__ import annotations

from torch import Tensor

INIT_B_DEC = ("median", "mean", "zeros")


def geometric_median(x: Tensor, iters: int = 100, tol: float = 1e-6) -> Tensor:
    """The geometric median of the rows of `x` ([n, d]) by Weiszfeld's iteration, from the mean; stops when a
    step moves less than `tol` times the current estimate's norm (or after `iters` steps)."""
    if x.ndim != 2 or not len(x):
        raise ValueError(f"geometric_median needs a non-empty [n, d] tensor, got shape {tuple(x.shape)}")
    x = x.double()
    y = x.mean(0)
    for _ in range(iters):
        w = 1.0 / (x - y).norm(dim=-1).clamp_min(1e-12)
        nxt = (w[:, None] * x).sum(0) / w.sum()
        moved = float((nxt - y).norm())
        y = nxt
        if moved <= tol * max(float(y.norm()), 1e-12):
            break
    return y.float()


def initial_b_dec(x: Tensor, how: str) -> Tensor | None:
    """The starting decoder bias for rows `x` (in the SAE's input units): their geometric median ("median"),
    their mean ("mean"), or None ("zeros": keep the SAE's own zero initialisation)."""
    if how not in INIT_B_DEC:
        raise ValueError(f"init_b_dec must be one of {INIT_B_DEC}, got {how!r}")
    if how == "zeros":
        return None
    return geometric_median(x) if how == "median" else x.float().mean(0)
