"""One small training loop for the contrib papers: an optimiser, an optional cosine schedule, seeded batches,
and early stopping on a held-out score.

The loop receives its collaborators: `batches` (any iterable; one optimiser step per item) and `loss_fn`
(item -> scalar loss). Where the batches come from is the caller's: `epoch_batches` (a fresh permutation per
epoch), `random_batches` (uniform draws with replacement), or `range(steps)` for full-batch steps.

    opt = make_optimizer(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed)
    fit(opt, lambda idx: F.cross_entropy(model(x[idx]), y[idx]), epoch_batches(len(x), 64, epochs, g))

    # early stopping: evaluate every 10 steps, stop after 5 evaluations without a better score,
    # and put back the parameters of the best evaluation
    res = fit(opt, step_loss, range(2000), evaluate=lambda: accuracy(model, xv, yv), every=10, patience=5,
              restore=model)
    res.best_score, res.best_step

    # a per-step hook: log, probe, step another scheduler; True stops the loop
    fit(opt, step_loss, range(2000), callback=lambda step, loss: step % 100 == 0 and print(step, float(loss)))

A generator passed to the batch helpers is the loop's only source of randomness besides what `loss_fn`
draws itself, so a seed fixes the run.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor, nn

OptimizerName = Literal["adam", "adamw", "sgd"]


def make_optimizer(
    params, lr: float, name: OptimizerName = "adam", weight_decay: float = 0.0, momentum: float = 0.0
) -> torch.optim.Optimizer:
    """torch's Adam / AdamW / SGD over `params` with these settings (AdamW's default decay is torch's, 0.01,
    only when `weight_decay` is left at 0: pass it explicitly to be sure)."""
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    raise ValueError(f"optimizer is one of 'adam', 'adamw', 'sgd'; got {name!r}")


def as_generator(seed: int | torch.Generator) -> torch.Generator:
    """`seed` itself when it is a generator, else a new CPU generator seeded with it."""
    return seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(seed)


def epoch_batches(
    n: int, batch: int, epochs: int, seed: int | torch.Generator, min_size: int = 1, with_epoch: bool = False
) -> Iterator[Tensor] | Iterator[tuple[int, Tensor]]:
    """Index batches of a fresh random permutation of range(n) each epoch (the last batch may be short;
    batches under `min_size` are skipped). The permutation is drawn when the epoch's first batch is asked for.
    `with_epoch`: yield (epoch, indices) pairs instead, for losses that change with the epoch."""
    g = as_generator(seed)
    for ep in range(epochs):
        for idx in torch.randperm(n, generator=g).split(batch):
            if len(idx) >= min_size:
                yield (ep, idx) if with_epoch else idx


def random_batches(n: int, batch: int, steps: int, seed: int | torch.Generator | None) -> Iterator[Tensor]:
    """`steps` batches of `batch` indices drawn uniformly from range(n) with replacement (torch's global
    generator when `seed` is None)."""
    g = None if seed is None else as_generator(seed)
    for _ in range(steps):
        yield torch.randint(0, n, (batch,), generator=g)


@dataclass
class FitResult:
    """What `fit` returns."""

    losses: list[float] = field(default_factory=list)
    """The loss of every step, as floats (only when `record_losses`)."""
    steps: int = 0
    """Optimiser steps taken."""
    best_score: float | None = None
    """Best value of `evaluate` (None without one)."""
    best_step: int | None = None
    """Steps taken when the best score was measured."""
    stopped_early: bool = False
    """True when `patience` evaluations passed without a better score, or the callback asked to stop."""


def fit(
    opt: torch.optim.Optimizer,
    loss_fn: Callable[[Any], Tensor],
    batches: Iterable,
    *,
    schedule: Literal["cosine"] | None = None,
    total_steps: int | None = None,
    record_losses: bool = False,
    evaluate: Callable[[], float] | None = None,
    every: int = 1,
    patience: int | None = None,
    restore: nn.Module | None = None,
    callback: Callable[[int, Tensor], bool | None] | None = None,
) -> FitResult:
    """Train: for each item of `batches`, zero the gradients, back-propagate `loss_fn(item)`, step.

    - `schedule="cosine"`: cosine annealing of the learning rate over `total_steps` (needed then);
    - `callback(steps_taken, loss)` runs after every step (and its schedule step), before any evaluation, with
      the step's detached loss: for logging, probes, another scheduler; returning True stops the loop;
    - `evaluate` (higher is better) runs every `every` steps, after the step; `patience` evaluations without
      a better score stop the loop; `restore` is a module whose best-scoring parameters are put back at the end.
    """
    if schedule is not None and schedule != "cosine":
        raise ValueError(f"schedule is None or 'cosine'; got {schedule!r}")
    if schedule and not total_steps:
        raise ValueError("a cosine schedule needs total_steps")
    if every < 1 or (patience is not None and patience < 1):
        raise ValueError(f"every and patience must be >= 1; got {every}, {patience}")
    if (patience is not None or restore is not None) and evaluate is None:
        raise ValueError("patience and restore need an evaluate function")
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, total_steps) if schedule else None
    res, best_state, waited = FitResult(), None, 0
    for item in batches:
        loss = loss_fn(item)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        res.steps += 1
        if record_losses:
            res.losses.append(float(loss.detach()))
        if callback is not None and callback(res.steps, loss.detach()):
            res.stopped_early = True
            break
        if evaluate is None or res.steps % every:
            continue
        score = float(evaluate())
        if res.best_score is None or score > res.best_score:
            res.best_score, res.best_step, waited = score, res.steps, 0
            if restore is not None:
                best_state = copy.deepcopy(restore.state_dict())
        else:
            waited += 1
            if patience is not None and waited >= patience:
                res.stopped_early = True
                break
    if restore is not None and best_state is not None:
        restore.load_state_dict(best_state)
    return res
