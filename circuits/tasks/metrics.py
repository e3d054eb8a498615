"""Task metrics on prompt pairs, per row, at each row's last prompt position.

    logit-diff  mean logit of the answer set minus mean logit of the wrong set (needs "wrong")
    prob        total probability of the answer set
    kl          minus KL(clean model's next-token distribution || this run's); 0 on the clean run itself

Every metric is "higher = more like the clean behaviour", so the normalised faithfulness of a circuit is
(m(circuit) - m(ablated)) / (m(clean) - m(ablated)) for all three. KL's gradient is exactly zero at the
clean run, so plain EAP with `kl` scores every edge 0; EAP-IG (gradients along the path) does not have
this problem.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from circuits.tasks.pairs import PairBatch

Metric = Literal["logit-diff", "prob", "kl"]
METRICS = ("logit-diff", "prob", "kl")


def check_metric(metric: str, batch: PairBatch | None = None) -> None:
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; use {', '.join(METRICS)}")
    if metric == "logit-diff" and batch is not None and not batch.has_wrong:
        raise ValueError('metric logit-diff needs a "wrong" answer in every row; add it or use --metric prob or kl')


def last(logits: Tensor, pos: Tensor) -> Tensor:
    """[n, vocab] logits at each row's scored position."""
    return logits[torch.arange(logits.shape[0], device=logits.device), pos.to(logits.device)]


def metric_rows(
    logits: Tensor, batch: PairBatch, metric: Metric, ref: Tensor | None = None, pos: Tensor | None = None
) -> Tensor:
    """[n] metric per row. `ref`: the clean run's last-position logits [n, vocab] (kl only)."""
    x = last(logits, batch.clean_pos if pos is None else pos).float()
    aw = batch.answer_w.to(x.device)
    if metric == "logit-diff":
        ww = batch.wrong_w.to(x.device)
        a = (x.gather(1, batch.answers.to(x.device)) * aw).sum(1) / aw.sum(1)
        w = (x.gather(1, batch.wrongs.to(x.device)) * ww).sum(1) / ww.sum(1).clamp(min=1e-9)
        return a - w
    if metric == "prob":
        return (torch.softmax(x, -1).gather(1, batch.answers.to(x.device)) * aw).sum(1)
    if metric == "kl":
        if ref is None:
            raise ValueError("metric kl needs the clean run's logits")
        p = torch.log_softmax(ref.float().to(x.device), -1)
        return -(p.exp() * (p - torch.log_softmax(x, -1))).sum(1)
    raise ValueError(f"unknown metric {metric!r}; use {', '.join(METRICS)}")


def accuracy_rows(logits: Tensor, batch: PairBatch, pos: Tensor | None = None) -> Tensor:
    """[n] 1.0 where the best answer's logit beats every wrong answer's (the top-1 answer otherwise)."""
    x = last(logits, batch.clean_pos if pos is None else pos).float()
    a = x.gather(1, batch.answers.to(x.device)).masked_fill(batch.answer_w.to(x.device) == 0, -torch.inf).max(1).values
    if batch.has_wrong:
        w = (
            x.gather(1, batch.wrongs.to(x.device))
            .masked_fill(batch.wrong_w.to(x.device) == 0, -torch.inf)
            .max(1)
            .values
        )
        return (a > w).float()
    return (a >= x.max(1).values).float()


def normalised(m: float, clean: float, ablated: float) -> float:
    """(m - ablated) / (clean - ablated): 1 = the clean behaviour recovered, 0 = none of it."""
    gap = clean - ablated
    return float("nan") if abs(gap) < 1e-12 else (m - ablated) / gap
