"""A small causal-LM training loop with a controllable data stream and checkpoints TracIn can weight.

The stream is a seeded sequence of epochs over a token pool, each a permutation; an intervention
(`Intervention`) removes rows from it or duplicates rows in it, and everything else (init, order of the
remaining rows, step count) stays the same, as MDA's causal check needs. Checkpoints are HF folders
`out/step_N` with a `training_state.json` holding the learning rate in force (TracIn's eta_k).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn

from attribution.tracin import TRAINING_STATE


@dataclass
class Intervention:
    """Rows to remove from, or duplicate in, the training stream."""

    remove: list[int] = field(default_factory=list)
    duplicate: list[int] = field(default_factory=list)


def data_stream(n_rows: int, n_samples: int, seed: int, intervention: Intervention | None = None) -> Tensor:
    """The first `n_samples` row indices of the stream: seeded permutations, epoch after epoch.

    Removed rows are skipped (later rows move up); duplicated rows appear a second time at a seeded
    random place of the same epoch.
    """
    iv = intervention or Intervention()
    removed = set(iv.remove)
    dup = [i for i in iv.duplicate if i not in removed]
    g = torch.Generator().manual_seed(seed)
    out: list[int] = []
    while len(out) < n_samples:
        perm = [i for i in torch.randperm(n_rows, generator=g).tolist() if i not in removed]
        if not perm:
            raise ValueError("the intervention removes every training row")
        extra = torch.randperm(n_rows, generator=g)[: len(dup)].tolist()  # drawn even when unused: same order
        for pos, row in sorted(zip([p % max(1, len(perm)) for p in extra], dup), reverse=True):
            perm.insert(pos, row)
        out += perm
    return torch.tensor(out[:n_samples])


def train_lm(
    model: nn.Module,
    pool: Tensor,
    steps: int,
    batch_size: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    intervention: Intervention | None = None,
    warmup: int = 0,
    weight_decay: float = 0.01,
    eval_every: int = 0,
    eval_fn: Callable[[nn.Module, int], dict] | None = None,
    save_steps: tuple[int, ...] = (),
    out: str | Path | None = None,
    progress: bool = False,
) -> dict:
    """Train `model` (a HF causal LM) with AdamW on rows of `pool` [n, ctx]; returns the log.

    `eval_fn(model, step)` runs every `eval_every` steps (and at step 0); its dicts form `log["evals"]`.
    `save_steps` are written to `out/step_N` with the learning rate in force. Returns
    {"losses": [...], "evals": [...], "seconds": s, "stream": row indices used}.
    """
    stream = data_stream(len(pool), steps * batch_size, seed, intervention)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0)
    device = next(model.parameters()).device
    log: dict = {"losses": [], "evals": []}
    t0 = time.perf_counter()

    def evaluate(step):
        if eval_fn is not None:
            model.eval()
            log["evals"].append({"step": step, **eval_fn(model, step)})
            model.train()

    model.train()
    if eval_every:
        evaluate(0)
    from interp.infra.logs import progress as progress_bar

    for step in progress_bar(range(1, steps + 1), desc="training", unit="step", enabled=bool(progress)):
        batch = pool[stream[(step - 1) * batch_size: step * batch_size]].to(device)
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        log["losses"].append(float(loss.detach()))
        if eval_every and step % eval_every == 0:
            evaluate(step)
        if step in save_steps and out is not None:
            save_checkpoint(model, Path(out) / f"step_{step}", lr=opt.param_groups[0]["lr"], step=step, optimizer=opt)
    model.eval()
    log["seconds"] = time.perf_counter() - t0
    log["stream"] = stream
    return log


def save_checkpoint(model: nn.Module, folder: Path, lr: float, step: int, optimizer=None) -> None:
    """`save_pretrained` plus the learning rate in force (TracIn's eta for this checkpoint) and, given the
    optimiser, its Adam moments (`adam_state.safetensors`, for LESS-style normalised gradients)."""
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    if optimizer is not None:
        from attribution.adam import save_adam_state

        save_adam_state(model, optimizer, folder)
    (folder / TRAINING_STATE).write_text(json.dumps({"lr": lr, "step": step}))
