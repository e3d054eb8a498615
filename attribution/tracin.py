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

    def load(self, model: nn.Module) -> nn.Module:
        """A *new* model with this checkpoint's weights, on `model`'s device and dtype; `model` is untouched.

        A folder goes through the architecture's own loader (`type(model).from_pretrained`), so what
        `save_pretrained` wrote loads whatever its key names (GPT-NeoX `embed_out`, tied embeddings that
        are saved once). An in-memory state dict is loaded strictly into a deep copy of `model`. Why a new
        model: the model passed in is often memoised (one per worker process); writing checkpoint weights
        into it would make the next job in the same process score with other weights.
        """
        param = next(model.parameters())
        if self.state is not None:
            import copy

            fresh = copy.deepcopy(model)
            try:
                fresh.load_state_dict(self.state, strict=True)
            except RuntimeError as e:
                raise ValueError(f"in-memory checkpoint does not fit the model: {e}") from None
            return fresh.eval()
        folder = Path(self.path)
        if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
            raise FileNotFoundError(
                f"checkpoint {self.path} is not a save_pretrained folder (config.json and "
                ".safetensors weights); write checkpoints with model.save_pretrained(folder)"
            )
        if not hasattr(type(model), "from_pretrained"):
            raise ValueError(f"{type(model).__name__} has no from_pretrained; pass a HF PreTrainedModel")
        saved = json.loads((folder / "config.json").read_text())
        want = model.config.to_dict()
        if saved.get("model_type") != want.get("model_type"):  # checked first: a foreign config would build a
            raise ValueError(
                f"checkpoint {self.path} is a {saved.get('model_type')!r} model, not "  # default-size model
                f"{want.get('model_type')!r}: it was saved from another architecture"
            )
        sizes = [
            k
            for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "n_embd", "n_layer")
            if k in want and saved.get(k, want[k]) != want[k]
        ]
        if sizes:
            raise ValueError(
                f"checkpoint {self.path} has another shape than the model "
                f"({', '.join(f'{k} {saved.get(k)} != {want[k]}' for k in sizes)})"
            )
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # one "Loading weights" bar per checkpoint per job buries the output
        try:
            fresh, info = type(model).from_pretrained(str(folder), dtype=param.dtype, output_loading_info=True)
        except (RuntimeError, ValueError, OSError) as e:
            raise ValueError(f"checkpoint {self.path} does not fit {type(model).__name__}: {e}") from None
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        missing = [k for k in info.get("missing_keys", []) if k]
        bad = list(info.get("mismatched_keys", []))
        if missing or bad:
            raise ValueError(
                f"checkpoint {self.path} does not fit {type(model).__name__}: missing {missing[:5]}, "
                f"mismatched shapes {bad[:5]}; it was saved from another architecture or size"
            )
        fresh.config._attn_implementation = model.config._attn_implementation
        return fresh.to(param.device).eval()


def read_lr(folder: str | Path) -> float | None:
    """The learning rate recorded in `folder/training_state.json`, or None."""
    from interp.infra.json_file import read_json

    p = Path(folder) / TRAINING_STATE
    if not p.exists():
        return None
    lr = read_json(p, what="training state", fix="pass --lrs, or restore the file").get("lr")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        raise ValueError(f"{p}: 'lr' must be a positive number, got {lr!r}; pass --lrs, or restore the file")
    return float(lr)


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


def expand_checkpoints(specs: Sequence[str | Path]) -> list[str]:
    """Checkpoint specs -> folders: `RUN` (a run folder: all its step_N in order), `RUN@N` / `RUN@step_N`
    (one step of a run), or a checkpoint folder itself."""
    out: list[str] = []
    for spec in map(str, specs):
        path, step = spec, None
        if "@" in spec:
            path, tail = spec.rsplit("@", 1)
            tail = tail.removeprefix("step_")
            if not tail.isdigit():
                raise ValueError(f"bad checkpoint {spec!r}: write RUN@N or RUN@step_N")
            step = int(tail)
        folder = Path(path)
        if step is not None:
            target = folder / f"step_{step}"
            if not target.is_dir():
                have = [Path(p).name for p in run_checkpoints(folder)] if folder.is_dir() else []
                raise FileNotFoundError(
                    f"checkpoint {spec}: no folder {target}" + (f"; the run has {', '.join(have)}" if have else "")
                )
            out.append(str(target))
        elif folder.is_dir() and not (folder / "config.json").exists() and any(folder.glob("step_*")):
            out += run_checkpoints(folder)
        elif folder.is_dir():
            out.append(str(folder))
        else:
            raise FileNotFoundError(
                f"checkpoint {spec}: no such folder (give a run folder, RUN@N or a checkpoint folder)"
            )
    return out


@torch.no_grad()
def features(
    model: nn.Module, featurizer: GradientFeaturizer, ids: Tensor, mask: Tensor | None = None, batch_size: int = 16
) -> Tensor:
    """Per-example, per-use features [n, uses, dim] of a token tensor, in batches (on the model's device)."""
    device = next(model.parameters()).device
    mask = torch.ones_like(ids) if mask is None else mask
    out = [
        featurizer(model, ids[i : i + batch_size].to(device), mask[i : i + batch_size].to(device))
        for i in range(0, len(ids), batch_size)
    ]
    return torch.cat(out)


def tracin(
    model: nn.Module,
    checkpoints: Sequence[Checkpoint],
    featurizer: GradientFeaturizer,
    train: Tensor,
    queries: Tensor,
    train_mask: Tensor | None = None,
    query_mask: Tensor | None = None,
    batch_size: int = 16,
) -> Tensor:
    """TracIn scores [n_train, n_query] summed over checkpoints with learning-rate weights.

    Each checkpoint is loaded into a new model (`Checkpoint.load`); `model` only gives the architecture
    and `featurizer` is built on it (its modules are mapped onto each checkpoint's model by name)."""
    total = None
    for ck in checkpoints:
        work = ck.load(model)
        feat = featurizer.rebind(model, work)
        ftr = features(work, feat, train, train_mask, batch_size).sum(1)
        fq = features(work, feat, queries, query_mask, batch_size).sum(1)
        s = ck.lr * (ftr @ fq.T)
        total = s if total is None else total + s
    return total
