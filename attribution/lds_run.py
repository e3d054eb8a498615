"""`interp attribute lds`: train a tiny task, retrain it on M random subsets, and report each method's LDS with a CI.

    run_lds(LDSConfig(out="runs/lds", task=LMTaskConfig(kind="neox")))

Everything is cached under `out` and resumable: the run's settings (`settings.json`), the task's tokens, the
full-data run's checkpoints (`full/`), the retraining store (`retrain/`, see `attribution.lds.retrain_subsets`),
each method's scores (`scores/<method>.safetensors`) and the results (`lds.json`).

The whole output plan is checked before the first write: `out` holds nothing but an LDS run's files, its
settings (the task with its tokens' hashes, M, alpha, the shard size) are those of this run, and no other
process writes there (the folder's writer lock, held for the whole run). A refused run leaves the disk as it was.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from attribution.lds import (
    check_lds_args,
    dattri_lds,
    lds,
    masks_sha256,
    random_subsets,
    retrain_subsets,
    write_json,
)
from attribution.lds_task import LMTask, LMTaskConfig, build_tokens, make_task, new_model, sha256_of, train_on

NEOX_METHODS = (
    "tracin",
    "grad_dot",
    "grad_cos",
    "trak",
    "ekfac_linear",
    "ekfac_linear_attn",
    "ekfac_linear_mlp",
    "ekfac",
    "ekfac_block",
    "ekfac_module",
    "dra",
    "kronfluence",
    "dattri_trak",
)
LOOPED_METHODS = ("tracin", "sdi", "grad_dot", "grad_cos", "trak", "dra")

SETTINGS = "settings.json"
"""What an LDS folder's results depend on (`run_settings`), written before anything else of a run."""
LDS_NAMES = (
    SETTINGS,
    "tokens.safetensors",
    "train.safetensors",
    "queries.safetensors",
    "full",
    "retrain",
    "scores",
    "lds.json",
)
"""Everything a run writes at the top of its folder (besides the lock file and temporary names)."""
KRONFLUENCE_TMP = ".kronfluence-"
"""Prefix of Kronfluence's working folder inside `out` (removed when it finishes; a killed run may leave one)."""


@dataclass
class LDSConfig:
    """One LDS evaluation."""

    out: str
    """Folder for everything (resumed when rerun with the same settings)."""
    task: LMTaskConfig = field(default_factory=LMTaskConfig)
    """The task: model kind, data size, training settings."""
    n_subsets: int = 50
    """M, the number of random subsets retrained on (>= 2; 50 or more for a usable interval)."""
    alpha: float = 0.5
    """Fraction of the training set in each subset, in (0, 1)."""
    methods: list[str] = field(default_factory=list)
    """Methods to score (default: every one that applies to the task)."""
    shard_size: int = 5
    """Subsets retrained per task of the batch runner."""
    executor: str = "inprocess"
    """inprocess | ray."""
    ray_address: str | None = None
    num_workers: int | None = None
    n_boot: int = 1000
    """Bootstrap resamples for the interval."""

    def __post_init__(self) -> None:
        check_lds_args(self.n_subsets, self.alpha)
        if self.shard_size <= 0:
            raise ValueError(f"shard_size must be positive, got {self.shard_size}")
        from attribution.lds_methods import METHODS

        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"unknown LDS method(s) {unknown}; valid: {', '.join(METHODS)}")
        if self.executor not in ("inprocess", "ray"):
            raise ValueError(f"executor must be inprocess or ray, got {self.executor!r}")


def quick_config(out: str, kind: str = "neox") -> LDSConfig:
    """A couple of minutes on two shared cores: 256 training rows, 50 subsets of half of them."""
    return LDSConfig(out=out, task=LMTaskConfig(kind=kind, n_train=256, n_query=16), n_subsets=50)


def _full_run(cfg: LDSConfig, task, out: Path):
    """The full-data run's checkpoints (trained once, kept in `out/full`) and the final model."""
    import interp
    from attribution.tracin import Checkpoint, checkpoints_from, run_checkpoints

    full = out / "full"
    marker = full / "done.json"
    ident = task.identity()
    if not marker.exists() or json.loads(marker.read_text()) != ident:
        train, _ = task.tokens()
        train_on(cfg.task, train, torch.arange(len(train)), out=full)
        write_json(marker, ident)
    cks = checkpoints_from(run_checkpoints(full))
    base = new_model(cfg.task)
    final = interp.HookedModel(Checkpoint(cks[-1].path, cks[-1].lr).load(base.hf_model), base.tokenizer)
    return cks, final


def _scores(name: str, cfg: LDSConfig, task, cks, model, out: Path) -> torch.Tensor:
    from safetensors.torch import load_file

    from attribution.lds_methods import METHODS
    from interp.store.atomic import atomic_write_bytes
    from interp.store.safetensors_io import safetensors_bytes

    path = out / "scores" / f"{name}.safetensors"
    key = json.dumps(task.identity(), sort_keys=True)
    if path.exists():
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            if (f.metadata() or {}).get("task") == key:
                return load_file(str(path))["scores"].double()
    train, queries = task.tokens()
    scores = METHODS[name](model, cks, train, queries, seed=cfg.task.seed, workdir=str(out))
    path.parent.mkdir(parents=True, exist_ok=True)
    data = safetensors_bytes({"scores": scores.float()}, metadata={"task": key, "method": name})  # fixed byte order
    atomic_write_bytes(path, data)
    return scores.double()


def run_settings(cfg: LDSConfig, train: torch.Tensor, queries: torch.Tensor, masks: torch.Tensor) -> dict:
    """What the folder's checkpoints, retrained losses and scores depend on: a rerun with equal settings resumes."""
    task = LMTask(cfg.task, "", sha256_of(train), sha256_of(queries))
    subsets = {"n": int(masks.shape[0]), "n_train": int(masks.shape[1]), "sha256": masks_sha256(masks)}
    return {"task": task.identity(), "alpha": cfg.alpha, "subsets": subsets, "shard_size": cfg.shard_size}


def check_folder(out: Path) -> None:
    """Refuse an `out` that is a file or holds files an LDS run does not write (an activation or gradient store,
    say), and a planted lock path; writes nothing. Other subfolders are left alone: `interp attribute run --out
    OUT/tracin` on the task's tokens is how `interp attribute show` finds the method's LDS (`lds.find_lds`)."""
    from interp.store.atomic import is_temp_name
    from interp.store.lock import LOCK_NAME, check_lock_path

    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; --out takes a folder for the LDS run")
    if not out.is_dir():
        return
    other = sorted(
        p.name
        for p in out.iterdir()
        if p.name not in (*LDS_NAMES, LOCK_NAME)
        and not is_temp_name(p.name)
        and not p.name.startswith(KRONFLUENCE_TMP)
        and (p.is_symlink() or not p.is_dir())
    )
    if other:
        what = "a store" if "manifest.json" in other else "other files"
        raise ValueError(
            f"--out {out} holds {what} ({', '.join(other[:3])}{', ...' if len(other) > 3 else ''}), "
            "not an LDS run; choose a new or empty --out"
        )
    check_lock_path(out)
    check_lock_path(out / "retrain")


def _recorded(out: Path, settings: dict) -> dict:
    """The settings an existing run in `out` recorded, from every file that holds some of them (runs made before
    `settings.json` existed have only the others); {} for a new folder."""
    from interp.store.manifest import MANIFEST_NAME

    def load(path: Path) -> dict | None:
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                raise ValueError(f"a JSON {type(data).__name__}, not an object")
            return data
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise ValueError(f"{path} is damaged ({e}); delete --out {out} to start the LDS run over") from None

    seen: dict = dict(load(out / SETTINGS) or {})
    done = load(out / "full" / "done.json")
    if done is not None:
        seen.setdefault("task", done)
    manifest = load(out / "retrain" / MANIFEST_NAME)
    if manifest is not None:
        data = (manifest.get("meta") or {}).get("data") or {}
        for key, name in (("task", "lds_task"), ("subsets", "subsets"), ("shard_size", "shard_size")):
            if name in data:
                seen.setdefault(key, data[name])
    if "task" not in seen and (out / "tokens.safetensors").is_file():  # killed while training `full/`
        from interp.infra.tensor_file import read_tensors

        t, _ = read_tensors(out / "tokens.safetensors", what="the LDS run's tokens", need={"train": 2, "queries": 2})
        tokens = {"train_tokens_sha256": sha256_of(t["train"]), "query_tokens_sha256": sha256_of(t["queries"])}
        seen["task"] = {**settings["task"], **tokens}
    return seen


OPTIONS = {
    "task.settings.kind": "--task",
    "task.settings.model": "--model",
    "task.settings.data": "--data",
    "task.settings.ctx": "--ctx-len",
    "task.settings.lr": "--lr",
    "task.settings.seed": "--seed",
    "task.settings.n_train": "--n-train",
    "task.settings.n_query": "--n-query",
    "task.settings.epochs": "--epochs",
    "subsets.n": "--subsets",
    "alpha": "--alpha",
    "shard_size": "--shard-size",
}
"""Recorded setting -> the `interp attribute lds` option that sets it (how a refusal names it)."""


def _differences(ours: dict, theirs: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    out = []
    for key in sorted(set(ours) | set(theirs)):
        a, b = ours.get(key), theirs.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append((f"{prefix}{key}", b, a))
    return out


def check_settings(out: Path, settings: dict) -> None:
    """Refuse to continue a run in `out` made with other settings (nothing is written either way). The refusal
    names the options that differ; token and subset hashes only when no option explains them."""
    seen = _recorded(out, settings)
    diffs = _differences({k: settings[k] for k in seen if k in settings}, seen)
    if not diffs:
        return
    named = [(OPTIONS[k], there, here) for k, there, here in diffs if k in OPTIONS]
    hashes = {"task.train_tokens_sha256": "training tokens", "task.query_tokens_sha256": "query tokens"}
    named = named or [(hashes.get(k, k.replace("task.settings.", "")), there, here) for k, there, here in diffs]
    short = lambda v: f"sha256 {v[:12]}..." if isinstance(v, str) and len(v) == 64 else v  # noqa: E731
    shown = "; ".join(f"{k} {short(there)} there, {short(here)} here" for k, there, here in named[:3])
    raise ValueError(
        f"--out {out} holds an LDS run made with other settings ({shown}{'; ...' if len(named) > 3 else ''}): "
        f"rerun with its settings to resume it, or choose another --out (or delete {out} to start over)"
    )


def run_lds(cfg: LDSConfig, progress: bool | str = "auto", log=print) -> dict:
    """Run (or resume) the evaluation; returns {method: {"lds", "ci95", "per_query", "seconds"}} plus provenance."""
    from interp.store.lock import holding

    out = Path(cfg.out)
    check_folder(out)
    train, queries = build_tokens(cfg.task)
    masks = random_subsets(cfg.task.n_train, cfg.n_subsets, cfg.alpha, seed=cfg.task.seed)
    settings = run_settings(cfg, train, queries, masks)
    check_settings(out, settings)  # before the lock: a refused run writes nothing, the lock file included
    with holding(out, "the LDS folder"):  # a second `lds` into `out` is refused by name, not raced
        check_settings(out, settings)  # again: another run may have written here before we held the lock
        if not (out / SETTINGS).exists():
            write_json(out / SETTINGS, settings)
        return _run(cfg, make_task(cfg.task, out, (train, queries)), masks, progress, log)


def _run(cfg: LDSConfig, task: LMTask, masks: torch.Tensor, progress: bool | str, log) -> dict:
    from attribution.lds_methods import ANCHORS

    t0 = time.perf_counter()
    out = Path(cfg.out)
    methods = cfg.methods or list(LOOPED_METHODS if cfg.task.kind == "looped" else NEOX_METHODS)
    cks, model = _full_run(cfg, task, out)
    losses = retrain_subsets(
        task, masks, out / "retrain", cfg.shard_size, cfg.executor, cfg.ray_address, cfg.num_workers, progress
    )
    results: dict = {}
    skipped: dict[str, str] = {}
    for name in methods:
        why = ANCHORS[name]() if name in ANCHORS else None
        if why:
            skipped[name] = why
            log(f"{name:<13} skipped: {why}")
            continue
        t = time.perf_counter()
        scores = _scores(name, cfg, task, cks, model, out)
        res = lds(scores, masks, losses, n_boot=cfg.n_boot, seed=cfg.task.seed)
        results[name] = {**res.to_dict(), "seconds": round(time.perf_counter() - t, 1)}
        theirs = dattri_lds(scores, masks, losses)
        if theirs is not None:
            ours = [x for x in res.per_query if x is not None]
            results[name]["dattri_lds"] = round(sum(theirs) / len(theirs), 4)
            results[name]["dattri_max_abs_diff"] = float(max(abs(a - b) for a, b in zip(ours, theirs)))
        log(f"{name:<13} LDS {res}")
    spread = losses.std(0).mean().item()
    summary = {
        "task": task.identity(),
        "n_subsets": cfg.n_subsets,
        "alpha": cfg.alpha,
        "subset_size": int(masks[0].sum()),
        "query_loss_std_over_subsets": round(spread, 5),
        "full_model_query_loss": round(float(_final_loss(model, task)), 4),
        "methods": results,
        "skipped": skipped,
        "seconds": round(time.perf_counter() - t0, 1),
        "settings": {k: v for k, v in asdict(cfg).items() if k not in ("task",)},
    }
    write_json(out / "lds.json", summary)
    return summary


def _final_loss(model, task) -> float:
    from attribution.lds_task import query_losses

    return float(query_losses(model, task.tokens()[1]).mean())
