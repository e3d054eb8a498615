"""TracIn over training checkpoints, with learning-rate weights (Pruthi et al. 2020).

    TracIn(z, z') = sum_k eta_k < grad_w loss(w_k; z), grad_w loss(w_k; z') >

`w` is the set of parameters a `GradientFeaturizer` covers (for a looped model, the shared block), and
the gradients are exact or sketched per-example features. `eta_k` is the learning rate in force at
checkpoint k: given explicitly, or read from the `training_state.json` that `attribution.train` writes
beside every checkpoint. A checkpoint list with no learning rates is an error, never a silent 1.0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from attribution.capture import GradientFeaturizer

TRAINING_STATE = "training_state.json"


@dataclass(frozen=True)
class Checkpoint:
    """One training checkpoint: a saved HF folder (or an in-memory state dict) and its learning rate."""

    path: str | None
    lr: float
    state: dict[str, Tensor] | None = None

    def load_into(self, model: nn.Module) -> None:
        """Copy this checkpoint's weights into `model` (same architecture), strictly."""
        state = self.state
        if state is None:
            from safetensors.torch import load_file

            files = sorted(Path(self.path).glob("*.safetensors"))
            if not files:
                raise FileNotFoundError(f"checkpoint {self.path} holds no .safetensors weights")
            state = {}
            for f in files:
                state.update(load_file(str(f)))
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as e:
            raise ValueError(f"checkpoint {self.path} does not fit the model: {e}") from None

def read_lr(folder: str | Path) -> float | None:
    """The learning rate recorded in `folder/training_state.json`, or None."""
    p = Path(folder) / TRAINING_STATE
    if not p.exists():
        return None
    return float(json.loads(p.read_text())["lr"])


def checkpoints_from(paths: Sequence[str | Path], lrs: Sequence[float] | None = None) -> list[Checkpoint]:
    """Checkpoints with their learning rates: `lrs` when given, else each folder's `training_state.json`.

    Raises a ValueError naming the folders that have no learning rate and the two ways to give one.
    """
    paths = [str(p) for p in paths]
    if not paths:
        raise ValueError("no checkpoints given: TracIn needs at least one checkpoint")
    if lrs is not None:
        lrs = list(lrs)
        if len(lrs) != len(paths):
            raise ValueError(f"{len(paths)} checkpoints but {len(lrs)} learning rates; give one learning rate each")
        return [Checkpoint(p, float(lr)) for p, lr in zip(paths, lrs)]
    found = [read_lr(p) for p in paths]
    lacking = [p for p, lr in zip(paths, found) if lr is None]
    if lacking:
        raise ValueError(
            f"no learning rate for checkpoint(s) {', '.join(lacking)}: TracIn weights each checkpoint by its "
            f"learning rate. Pass them explicitly (--lrs 1e-3,1e-3,... or lrs=[...]) or write {TRAINING_STATE} "
            'with {"lr": ...} beside each checkpoint (attribution.train does).'
        )
    return [Checkpoint(p, lr) for p, lr in zip(paths, found)]


def run_checkpoints(run: str | Path) -> list[str]:
    """The `step_N` folders of a training run, in step order."""
    run = Path(run)
    steps = sorted((int(p.name[5:]), p) for p in run.glob("step_*") if p.is_dir() and p.name[5:].isdigit())
    if not steps:
        raise FileNotFoundError(f"{run} has no step_N checkpoint folders")
    return [str(p) for _, p in steps]


@torch.no_grad()
def features(model: nn.Module, featurizer: GradientFeaturizer, ids: Tensor, mask: Tensor | None = None,
             batch_size: int = 16) -> Tensor:
    """Per-example, per-use features [n, uses, dim] of a token tensor, in batches (on the model's device)."""
    device = next(model.parameters()).device
    mask = torch.ones_like(ids) if mask is None else mask
    out = [featurizer(model, ids[i:i + batch_size].to(device), mask[i:i + batch_size].to(device))
           for i in range(0, len(ids), batch_size)]
    return torch.cat(out)


def tracin(model: nn.Module, checkpoints: Sequence[Checkpoint], featurizer: GradientFeaturizer, train: Tensor,
           queries: Tensor, train_mask: Tensor | None = None, query_mask: Tensor | None = None,
           batch_size: int = 16) -> Tensor:
    """TracIn scores [n_train, n_query] summed over checkpoints with learning-rate weights."""
    total = None
    for ck in checkpoints:
        ck.load_into(model)
        ftr = features(model, featurizer, train, train_mask, batch_size).sum(1)
        fq = features(model, featurizer, queries, query_mask, batch_size).sum(1)
        s = ck.lr * (ftr @ fq.T)
        total = s if total is None else total + s
    return total
