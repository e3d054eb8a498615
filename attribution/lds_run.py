"""`interp attribute lds`: train a tiny task, retrain it on M random subsets, and report each method's LDS with a CI.

    run_lds(LDSConfig(out="runs/lds", task=LMTaskConfig(kind="neox")))

Everything is cached under `out` and resumable: the task's tokens, the full-data run's checkpoints (`full/`),
the retraining store (`retrain/`, see `attribution.lds.retrain_subsets`), each method's scores
(`scores/<method>.safetensors`, recomputed when the task changes) and the results (`lds.json`).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from attribution.lds import check_lds_args, dattri_lds, lds, random_subsets, retrain_subsets, write_json
from attribution.lds_task import LMTaskConfig, make_task, new_model, train_on

NEOX_METHODS = ("tracin", "grad_dot", "grad_cos", "trak", "ekfac", "ekfac_block", "ekfac_module", "dra", "kronfluence")
LOOPED_METHODS = ("tracin", "sdi", "grad_dot", "grad_cos", "trak", "dra")


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
    from safetensors.torch import load_file, save

    from attribution.lds_methods import METHODS
    from interp.store.atomic import atomic_write_bytes

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
    atomic_write_bytes(path, save({"scores": scores.float().contiguous()}, metadata={"task": key, "method": name}))
    return scores.double()


def run_lds(cfg: LDSConfig, progress: bool | str = "auto", log=print) -> dict:
    """Run (or resume) the evaluation; returns {method: {"lds", "ci95", "per_query", "seconds"}} plus provenance."""
    from attribution.lds_methods import kronfluence_available

    t0 = time.perf_counter()
    out = Path(cfg.out)
    task = make_task(cfg.task, out)
    methods = cfg.methods or list(NEOX_METHODS if cfg.task.kind == "neox" else LOOPED_METHODS)
    masks = random_subsets(task.n_train, cfg.n_subsets, cfg.alpha, seed=cfg.task.seed)
    cks, model = _full_run(cfg, task, out)
    losses = retrain_subsets(
        task, masks, out / "retrain", cfg.shard_size, cfg.executor, cfg.ray_address, cfg.num_workers, progress
    )
    results: dict = {}
    skipped: dict[str, str] = {}
    for name in methods:
        why = kronfluence_available() if name == "kronfluence" else None
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
