"""Training checkpoints of an SAE run: written without pickle, swapped in so a kill at any instant recovers.

A checkpoint is a folder: the SAE (`cfg.json` + `sae_weights.safetensors`, sae-lens's layout, so
`load_sae` and sae-lens read it), `sparsity.safetensors`, `activation_scaler.json`, and the trainer state
(optimizer, lr schedule, counters, dead-latent statistics) as `trainer_state.json` +
`trainer_state.safetensors` (`interp.infra.safe_state`): nothing in it needs pickle, so a crafted file in
someone's `--out` cannot run code. Older checkpoints with sae-lens's `trainer_state.pt` still resume,
read with `torch.load(weights_only=True)` passed explicitly.

The swap: write `checkpoint.tmp/`, rename `checkpoint/` to `checkpoint.old/`, rename `checkpoint.tmp/` to
`checkpoint/`, delete `checkpoint.old/`. A kill leaves one of three states, and `recover` (run before
every resume and every save) maps each back to a single good `checkpoint/`:
- killed while writing: `checkpoint/` good, `checkpoint.tmp/` partial -> the partial one is deleted;
- killed between the renames: no `checkpoint/`, `checkpoint.old/` good -> it is moved back;
- killed while deleting: `checkpoint/` good, `checkpoint.old/` partial -> the partial one is deleted.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from safetensors.torch import save_file

from interp.cli.errors import DISK_FULL_TEXTS
from interp.infra.safe_state import StateFileError, load_state, load_torch_weights_only, save_state
from interp.store.atomic import fsync_dir

STATE = "trainer_state"
LEGACY_STATE = "trainer_state.pt"
SCALER = "activation_scaler.json"


def _siblings(folder: Path) -> tuple[Path, Path]:
    return folder.with_name(folder.name + ".tmp"), folder.with_name(folder.name + ".old")


def recover(folder: str | Path) -> None:
    """Bring `folder` back to one complete checkpoint (or none) after a kill at any point of a swap."""
    folder = Path(folder)
    tmp, old = _siblings(folder)
    if not folder.exists() and (old / "cfg.json").is_file():
        os.replace(old, folder)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)


def exists(folder: str | Path) -> bool:
    """True when `folder` (after `recover`) holds a checkpoint to resume from."""
    return (Path(folder) / "cfg.json").is_file()


def trainer_state(trainer: Any) -> dict[str, Any]:
    """What sae-lens's `save_trainer_state` keeps, as plain data and tensors."""
    return {
        "optimizer": trainer.optimizer.state_dict(),
        "lr_scheduler": trainer.lr_scheduler.state_dict(),
        "n_training_samples": trainer.n_training_samples,
        "n_training_steps": trainer.n_training_steps,
        "act_freq_scores": trainer.act_freq_scores,
        "n_forward_passes_since_fired": trainer.n_forward_passes_since_fired,
        "n_frac_active_samples": trainer.n_frac_active_samples,
        "started_fine_tuning": trainer.started_fine_tuning,
        "coefficient_schedulers": {k: s.state_dict() for k, s in trainer.coefficient_schedulers.items()},
    }


def save(trainer: Any, folder: str | Path) -> None:
    """Write the trainer's SAE and state as the checkpoint `folder` (swap described in the module doc)."""

    def write(tmp: Path) -> None:
        trainer.sae.save_model(str(tmp))
        save_file(
            {"sparsity": trainer.log_feature_sparsity.detach().cpu().contiguous()}, str(tmp / "sparsity.safetensors")
        )
        save_state(tmp, STATE, trainer_state(trainer))
        trainer.activation_scaler.save(str(tmp / SCALER))

    write_swapped(folder, write)


def write_swapped(folder: str | Path, write: Callable[[Path], None]) -> None:
    """Write a checkpoint folder with `write(tmp)` and swap it in (module doc); `write` must put a `cfg.json`
    in `tmp` (what `recover` and `exists` recognise a complete checkpoint by)."""
    folder = Path(folder)
    recover(folder)
    tmp, old = _siblings(folder)
    tmp.mkdir(parents=True)
    try:
        write(tmp)
        fsync_dir(tmp)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)  # the previous checkpoint stays the one to resume from
        if not isinstance(e, OSError) and any(s in str(e) for s in DISK_FULL_TEXTS):  # safetensors' own type
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp)) from None
        raise
    if folder.exists():
        os.replace(folder, old)
    os.replace(tmp, folder)
    fsync_dir(folder.parent)
    shutil.rmtree(old, ignore_errors=True)


def load(trainer: Any, folder: str | Path) -> None:
    """Restore the trainer's SAE weights and state from checkpoint `folder` (no pickle is run)."""
    folder = Path(folder)
    trainer.sae.load_weights_from_checkpoint(folder)
    trainer.activation_scaler.load(folder / SCALER)
    device = trainer.cfg.device
    if (folder / f"{STATE}.json").is_file():
        state = load_state(folder, STATE, map_location=device)
    elif (folder / LEGACY_STATE).is_file():
        state = load_torch_weights_only(folder / LEGACY_STATE, map_location=device)
    else:
        raise StateFileError(
            f"{folder} has SAE weights but no {STATE}.json: the checkpoint is incomplete; delete it to start over"
        )
    if not isinstance(state, dict):
        raise StateFileError(f"{folder}/{STATE} does not hold a trainer state")
    try:
        trainer.optimizer.load_state_dict(state["optimizer"])
        trainer.lr_scheduler.load_state_dict(state["lr_scheduler"])
        for name in (
            "n_training_samples",
            "n_training_steps",
            "act_freq_scores",
            "n_forward_passes_since_fired",
            "n_frac_active_samples",
            "started_fine_tuning",
        ):
            setattr(trainer, name, state[name])
        for name, sd in state["coefficient_schedulers"].items():
            trainer.coefficient_schedulers[name].load_state_dict(sd)
    except (KeyError, ValueError, TypeError, RuntimeError) as e:
        raise StateFileError(
            f"the trainer state in {folder} does not fit this run ({type(e).__name__}: {e}); "
            "delete the checkpoint to start over"
        ) from None
