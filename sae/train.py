"""Train an SAE of any registered architecture on one hook of an `interp` ActivationStore.

The optimisation step is sae-lens's own (`SAETrainer.step`: forward, losses, backward, grad-norm clip,
Adam, lr and coefficient schedules, dead-latent tracking); this module supplies the data (batches from
`store.iter_batches`, special rows dropped by the `interp.cache.rows` rule, scaled so that E||x||² = d_in), progress,
checkpoints
(`sae.checkpoint`: safetensors + JSON, no pickle, swapped in so that a kill at any instant recovers),
resumption (the data stream is replayed to the same row and every random draw of a step comes from a
(seed, step) generator, so a killed-and-resumed run ends bitwise equal to an uninterrupted one), the
store's identity among the run's settings (a run never resumes on another store), and NaN detection
(training stops with `NonFiniteError`; the last good checkpoint stays on disk).

    >>> from interp.store import ActivationStore, prefetch
    >>> cfg = TrainConfig(arch="c2r", d_sae=1024, k=32, total_tokens=200_000)
    >>> sae, report = train_sae(ActivationStore.open("runs/demo/store"), cfg, "runs/sae/c2r")
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from sae_lens.config import SAETrainerConfig
from sae_lens.training.sae_trainer import SAETrainer

from interp.cache.rows import DEFAULT_EXCLUDE, RowFilter, RowRule
from interp.infra.oom import advise_on_oom
from interp.infra.portable import relative_to
from interp.store import ActivationStore, prefetch
from interp.store.atomic import atomic_write_bytes
from sae import checkpoint
from sae.baselines import make_sae, training_class
from sae.progress import Progress
from sae.store_rows import check_shapes as _check_shapes
from sae.store_rows import split_shards
from sae.store_rows import store_hook as _hook


class NonFiniteError(RuntimeError):
    """Training met a NaN/inf (in the activations or the loss); the last good checkpoint is kept."""


@dataclass
class TrainConfig:
    """One SAE training run. Saved as `train_config.json` in the output folder; a folder holding a run
    with other settings is refused."""

    arch: str
    """Architecture name (see `sae.ARCHS`): relu, topk, batchtopk, c2r, poly, coh, ..."""
    d_sae: int
    """Number of latents."""
    k: float | None = 32
    """Active latents per token for TopK-family encoders (ignored by ReLU ones)."""
    hook: str | None = None
    """Hook to train on; None: the store's only hook (an error if it has several)."""
    total_tokens: int = 200_000
    """Training rows (tokens) to see; passes over the store repeat with new shuffles as needed."""
    batch_size: int = 4096
    """Rows per step."""
    lr: float | None = None
    """Adam learning rate (peak; see the warmup and decay below). None: dictionary_learning's rule
    2e-4 / sqrt(d_sae / 16384), capped at 1e-3 (5.7e-4 at d_sae 2048, 1e-3 from d_sae 655 down; sae-lens's
    constant default of 3e-4 leaves a few-hundred-step run far from converged: FVU 0.58 against 0.23 on the
    synthetic test of tests/sae/test_defaults.py)."""
    lr_warmup_steps: int | None = None
    """Linear warmup steps; None: min(1000, steps // 20) (dictionary_learning's TopK/BatchTopK trainers warm
    up for 1000 steps; scaled so a short run spends 5% of its steps warming up)."""
    lr_decay_frac: float = 0.2
    """Linear decay to 0 over the last fraction of the steps (dictionary_learning: decay from 80% of training)."""
    dead_window_steps: int | None = None
    """AuxK's window: a latent is dead for AuxK (which then trains it on the residual) once it has not fired
    for this many steps, counted in steps as sae-lens does (its default: 1000). None: scaled with the run,
    clamp(steps // 20, 5, 1000), so AuxK can revive latents in runs of any length."""
    dead_window_tokens: int | None = None
    """The same window in tokens (dictionary_learning: 10M; the paper-reproduction runs set it); when set it
    overrides `dead_window_steps`. Runs shorter than the window never mark a latent dead."""
    init_b_dec: str = "median"
    """Starting decoder bias (`sae.geometric_median`): "median", the geometric median of a sample of training
    rows (dictionary_learning's TopK-family trainers); "mean"; or "zeros" (sae-lens's). With b_dec at zero the
    rows' shared component decides every top-k and most latents never fire in a short run."""
    calibrate: bool = True
    """At the end of training, set the shipped JumpReLU threshold of BatchTopK-family SAEs (batchtopk, c2r,
    matryoshka, ...) so that the shipped codes fire k times per row on the calibration rows
    (`sae.inference.calibrate_threshold`); False ships sae-lens's running average, which lags in short runs."""
    calibration_rows: int = 16_384
    """Ordinary rows the threshold is calibrated on: a seeded sample of the training rows (never the held-out
    rows, which are the ones scored)."""
    seed: int = 0
    """Seed of the SAE initialisation and of the data order."""
    normalize: bool = True
    """Scale activations so that E||x||² = d_in (scale estimated on the first batches, folded in at the end)."""
    outlier_norm_multiple: float | None = None
    """Deprecated (kept for old callers): when set, `exclude` becomes "norm-outliers:<value>"."""
    exclude: str = DEFAULT_EXCLUDE
    """Special rows never trained on (`interp.cache.rows` spec: none, bos, positions:0,1, norm-outliers:10, or a
    '+' combination); the canonical spec and its reference norm are recorded in train_config.json."""
    checkpoint_every: int = 50
    """Steps between checkpoints."""
    holdout_shards: int = 0
    """Never train on the store's last N shards: they stay held out for `interp sae eval` (its default split)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Extra config fields of the architecture (l1_coefficient, c2r_lambda, rank2, coh_lambda, ...)."""
    device: str = "cpu"
    """Where the SAE trains: auto, cpu, cuda or cuda:N (not part of the run's identity: a run may resume elsewhere)."""

    def __post_init__(self) -> None:
        from interp.infra.devices import resolve_device

        self.device = resolve_device(self.device)
        _, cfg_cls = training_class(self.arch)  # raises on unknown names
        for name in ("d_sae", "total_tokens", "batch_size", "checkpoint_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if isinstance(self.holdout_shards, bool) or not isinstance(self.holdout_shards, int) or self.holdout_shards < 0:
            raise ValueError(f"holdout_shards must be an integer >= 0, got {self.holdout_shards!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if self.lr is None:
            self.lr = min(1e-3, 2e-4 / math.sqrt(self.d_sae / 16384))
        if not _finite(self.lr) or self.lr <= 0:
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")
        m = self.outlier_norm_multiple
        if m is not None and (not _finite(m) or m < 1):
            raise ValueError(
                f"outlier_norm_multiple must be >= 1 (a multiple of the reference row norm) or None, got {m!r}"
            )
        if m is not None:
            self.exclude, self.outlier_norm_multiple = f"norm-outliers:{m:g}", None
        self.exclude = RowRule.parse(self.exclude).spec
        if (
            not _finite(self.lr_decay_frac)
            or not 0 <= self.lr_decay_frac < 1
            or (self.lr_warmup_steps is not None and self.lr_warmup_steps < 0)
        ):
            raise ValueError(
                f"lr_decay_frac must be in [0, 1) and lr_warmup_steps >= 0, got {self.lr_decay_frac}, "
                f"{self.lr_warmup_steps}"
            )
        for name in ("dead_window_steps", "dead_window_tokens"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {v!r}")
        from sae.geometric_median import INIT_B_DEC

        if self.init_b_dec not in INIT_B_DEC:
            raise ValueError(f"init_b_dec must be one of {INIT_B_DEC}, got {self.init_b_dec!r}")
        if (
            isinstance(self.calibration_rows, bool)
            or not isinstance(self.calibration_rows, int)
            or self.calibration_rows < 1
        ):
            raise ValueError(f"calibration_rows must be a positive integer, got {self.calibration_rows!r}")
        names = {f.name: f for f in dataclasses.fields(cfg_cls)}
        if "k" in names and self.k is not None:
            k = self.k
            if not _finite(k) or not 1 <= k <= self.d_sae:
                raise ValueError(f"k must be between 1 and d_sae={self.d_sae} (active latents per token), got {k!r}")
            if "int" in str(names["k"].type) and "float" not in str(names["k"].type) and float(k) != int(k):
                raise ValueError(f"k must be a whole number for {self.arch}, got {k!r}")
        self.settings = _typed_settings(self.arch, cfg_cls, names, dict(self.settings))
        try:  # the architecture's own range checks (c2r_lambda >= 0, ranks, fractions, ...)
            cfg_cls(d_in=self.d_sae, d_sae=self.d_sae, **self.sae_settings())
        except (TypeError, ValueError) as e:
            raise ValueError(f"invalid settings for {self.arch}: {e}") from None

    def sae_settings(self) -> dict[str, Any]:
        _, cfg_cls = training_class(self.arch)
        names = {f.name for f in dataclasses.fields(cfg_cls)}
        out = dict(self.settings)
        if "k" in names and self.k is not None:
            out.setdefault("k", self.k)
        if "c2r_seed" in names:
            out.setdefault("c2r_seed", self.seed)
        return out

    def dead_window(self, steps: int) -> int:
        """AuxK's dead-latent window in steps for a run of `steps` steps."""
        if self.dead_window_tokens is not None:
            return max(1, self.dead_window_tokens // self.batch_size)
        if self.dead_window_steps is not None:
            return self.dead_window_steps
        return min(1000, max(5, steps // 20))

    def warmup(self, steps: int) -> int:
        """Linear warm-up steps for a run of `steps` steps."""
        return min(1000, steps // 20) if self.lr_warmup_steps is None else self.lr_warmup_steps


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _typed_settings(arch: str, cfg_cls: type, fields: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` checked against the architecture's config fields: known names, values of the field's type
    (an int where a float is wanted becomes a float); anything else is a `ValueError` naming the field."""
    reserved = {"d_in", "d_sae", "metadata"}
    bad = sorted(set(settings) - (set(fields) - reserved))
    if bad:
        raise ValueError(f"{arch} has no setting(s) {bad}; valid: {sorted(set(fields) - reserved)}")
    out = {}
    for key, v in settings.items():
        kind = str(fields[key].type)
        optional = "None" in kind or "Optional" in kind
        if v is None and optional:
            out[key] = v
        elif "bool" in kind and isinstance(v, bool):
            out[key] = v
        elif "float" in kind and _finite(v):
            out[key] = float(v)
        elif "int" in kind and _finite(v) and float(v) == int(v):
            out[key] = int(v)
        elif "str" in kind and isinstance(v, str):
            out[key] = v
        elif not any(t in kind for t in ("bool", "float", "int", "str")) or "Literal" in kind:
            out[key] = v  # other types: the config's own checks decide
        else:
            raise ValueError(f"setting {key} of {arch} must be of type {kind}, got {v!r}")
    return out


def batches(
    store: ActivationStore,
    hook: str,
    batch_size: int,
    seed: int,
    shards: list[int] | None = None,
    rows: RowFilter | None = None,
) -> Iterator[torch.Tensor]:
    """Endless [<=batch, d] float32 batches (special rows removed by `rows`): pass p is shuffled with seed
    (seed, p); NaN/inf raise."""
    p = 0
    while True:
        n = 0
        for b in store.iter_batches(
            batch_size, hooks=hook, shuffle=True, seed=seed * 100_003 + p, drop_last=True, shards=shards
        ):
            x = b[hook].float()
            if not torch.isfinite(x).all():
                bad = (~torch.isfinite(x).all(-1)).nonzero().flatten()[:5].tolist()
                raise NonFiniteError(
                    f"non-finite activations in {hook} (pass {p}, batch rows {bad}): the store is damaged or the "
                    "model overflowed"
                )
            if rows is not None:
                x = x[rows.keep_tensor(x, b.get("pos"))]
            n += 1
            yield x
        if n == 0:  # drop_last left nothing: looping again would spin forever
            raise ValueError(f"batch_size {batch_size} is larger than the rows of {hook} in the chosen shards")
        p += 1


def estimate_norms(
    store: ActivationStore,
    hook: str,
    n_rows: int = 8192,
    seed: int = 0,
    shards: list[int] | None = None,
    rows: RowFilter | None = None,
) -> float:
    """Mean row norm over a sample of the store's ordinary rows (for the input scale E||x||² = d_in)."""
    b = next(iter(store.iter_batches(min(n_rows, len(store)), hooks=hook, shuffle=True, seed=seed, shards=shards)))
    x = b[hook].float()
    if rows is not None:
        x = x[rows.keep_tensor(x, b.get("pos"))]
    x = x[torch.isfinite(x).all(-1)]
    return float(x.norm(dim=-1).mean())


def _write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, default=str) + "\n").encode())


def _non_finite(trainer: SAETrainer, output: Any, ckpt: Path) -> None:
    raise NonFiniteError(
        f"non-finite loss/weights at step {trainer.n_training_steps} "
        f"({ {k: float(v.detach()) for k, v in output.losses.items()} if output is not None else 'no step run' }); "
        f"the last good checkpoint is in {ckpt}. Lower the lr or check the activations."
    )


def _check_weights(trainer: SAETrainer, output: Any, ckpt: Path, bar: Any) -> None:
    if not all(bool(torch.isfinite(p).all()) for p in trainer.sae.parameters()):
        bar.close()
        _non_finite(trainer, output, ckpt)


def _check_same_run(out: Path, args: dict[str, Any], protect: bool) -> None:
    """Refuse a folder holding a run with other settings or another store, when it holds work (a checkpoint
    or a final SAE) worth protecting; a run that died before its first checkpoint is simply replaced."""
    args_file = out / "train_config.json"
    if not args_file.is_file() or not protect:
        return
    try:
        old = json.loads(args_file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{args_file} is unreadable ({e}); use another --out or delete {out}") from None
    if "store_identity" not in old:
        warnings.warn(
            f"{out} was trained by an older version that did not record its store; "
            "resuming without checking that this is the same store",
            stacklevel=3,
        )
        old["store_identity"] = args["store_identity"]
    old.setdefault("init_b_dec", "zeros")  # runs recorded before the init was a setting started from zeros
    same = _jsonable(old)
    ident_old, ident_new = same.get("store_identity") or {}, _jsonable(args["store_identity"])
    fields = sorted(k for k in set(ident_old) | set(ident_new) if k != "model" and ident_old.get(k) != ident_new.get(k))
    if fields:
        raise ValueError(
            f"{out} holds a run trained on another store ({', '.join(fields)} differ: it was started on "
            f"{old.get('store')}): pass the store it was started on, or use another --out"
        )
    new = _jsonable(args)
    diff = sorted(
        k
        for k in set(same) | set(new)
        if k not in ("store", "store_identity", "device", "rows") and same.get(k) != new.get(k)
    )
    if diff:
        raise ValueError(f"{out} holds a run with other settings ({diff}); use another --out or delete it")


def _jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, default=str))


def train_sae(
    store: ActivationStore, cfg: TrainConfig, out: str | Path, resume: bool = True, progress: bool = True
) -> tuple[Any, dict[str, Any]]:
    """Train, checkpointing to `out/checkpoint`; the final SAE goes to `out/` (cfg.json + safetensors).

    Returns (sae, report). Killed and run again with the same config, it resumes from the checkpoint.
    Running out of memory is an `OutOfMemoryAdvice` naming the options to lower.
    """
    fix = f"lower --batch-size (now {cfg.batch_size}) or --d-sae (now {cfg.d_sae})"
    with advise_on_oom(f"training the {cfg.arch} SAE", fix):
        return _train_sae(store, cfg, out, resume, progress)


def _train_sae(
    store: ActivationStore, cfg: TrainConfig, out: str | Path, resume: bool, progress: bool
) -> tuple[Any, dict[str, Any]]:
    out = Path(out)
    hook = _hook(store, cfg.hook)
    d_in = _check_shapes(store, hook)
    train_shards, held_out = split_shards(store, cfg.holdout_shards)
    shards = train_shards if held_out else None
    n_train = sum(store.shard_info(i).n_rows for i in train_shards)
    if cfg.batch_size > n_train:
        raise ValueError(
            f"batch_size {cfg.batch_size} is larger than the {n_train} training rows of {store.path}"
            f"{f' ({len(held_out)} shard(s) held out)' if held_out else ''}: use a smaller --batch-size or cache more "
            "tokens"
        )
    steps = cfg.total_tokens // cfg.batch_size
    if steps < 1:
        raise ValueError(f"total_tokens {cfg.total_tokens} is less than one batch of {cfg.batch_size}")
    ckpt = out / "checkpoint"
    checkpoint.recover(ckpt)
    identity = store.identity(hook, train_shards)
    # The store is recorded relative to `out` (interp.infra.portable), so the run and its store can move together.
    try:
        saved = json.loads((out / "train_config.json").read_text())
    except (OSError, json.JSONDecodeError):
        saved = {}
    recorded = saved.get("rows") or {}
    if saved and "init_b_dec" not in saved and resume:
        # a run started before the init was recorded started from zeros; resuming it keeps that record
        cfg = dataclasses.replace(cfg, init_b_dec="zeros")
    rowf = RowRule.parse(cfg.exclude).bind(store, hook, recorded.get("reference_norm"))
    args = {
        **dataclasses.asdict(cfg),
        "hook": hook,
        "store": relative_to(store.path, out),
        "store_identity": identity,
        "rows": rowf.config(),
    }
    _check_same_run(out, args, protect=checkpoint.exists(ckpt) or (out / "cfg.json").is_file())
    sae = make_sae(cfg.arch, d_in, cfg.d_sae, seed=cfg.seed, **cfg.sae_settings())  # initialised on CPU: the same
    sae.cfg.device = cfg.device  # weights on every device
    sae.to(cfg.device)
    sae.cfg.metadata.hook_name = hook
    sae.cfg.metadata.model_name = store.meta.model
    warmup, window = cfg.warmup(steps), cfg.dead_window(steps)
    if warmup + int(cfg.lr_decay_frac * steps) > steps:
        raise ValueError(f"lr_warmup_steps {warmup} + decay {int(cfg.lr_decay_frac * steps)} exceed the {steps} steps")
    tcfg = SAETrainerConfig(
        total_training_samples=steps * cfg.batch_size,
        train_batch_size_samples=cfg.batch_size,
        lr=cfg.lr,
        lr_end=cfg.lr,
        lr_warm_up_steps=warmup,
        lr_decay_steps=int(cfg.lr_decay_frac * steps),
        dead_feature_window=window,
        feature_sampling_window=max(10, min(2000, steps // 2)),
        device=cfg.device,
    )
    trainer = SAETrainer(cfg=tcfg, sae=sae, data_provider=iter(()))
    mean_norm = estimate_norms(store, hook, seed=cfg.seed, shards=shards, rows=rowf)
    if resume and checkpoint.exists(ckpt):
        checkpoint.load(trainer, ckpt)
        resumed_from = trainer.n_training_steps
    else:
        resumed_from = 0
        if cfg.normalize:
            trainer.activation_scaler.scaling_factor = (d_in**0.5) / mean_norm
        _init_b_dec(sae, store, hook, cfg, shards, rowf, trainer.activation_scaler.scaling_factor)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / "train_config.json", args)

    on_gpu = cfg.device.startswith("cuda")

    def rows() -> Iterator[torch.Tensor]:
        buf: list[torch.Tensor] = []
        n = 0
        for x in batches(store, hook, cfg.batch_size, cfg.seed, shards, rowf):
            buf.append(x)
            n += x.shape[0]
            while n >= cfg.batch_size:
                allx = torch.cat(buf)
                batch = allx[: cfg.batch_size]
                if on_gpu:  # pinned host memory, so the copy overlaps the step (the prefetch thread issues it)
                    batch = batch.pin_memory().to(cfg.device, non_blocking=True)
                yield batch
                buf, n = [allx[cfg.batch_size :]], n - cfg.batch_size

    data = prefetch(rows())  # the next batch is read while this step runs
    for _ in range(resumed_from):  # replay the stream so a resumed run sees the same batches
        next(data)
    t0, t1, last, output = time.perf_counter(), None, {}, None
    bar = Progress(steps, f"train {cfg.arch}", initial=resumed_from, enabled=progress)  # a bar only on a TTY
    while trainer.n_training_steps < steps:
        trainer.maybe_reset_sparsity()
        output = trainer.step(next(data))
        loss = float(output.loss.detach())
        if not math.isfinite(loss):
            bar.close()
            _non_finite(trainer, output, ckpt)
        trainer.n_training_steps += 1
        if t1 is None:
            t1 = time.perf_counter()  # end of the first step (allocations, first read): steady state after it
        last = {k: float(v.detach()) for k, v in output.losses.items()}
        bar.set_postfix(loss=f"{loss:.4g}")
        bar.update(1)
        if trainer.n_training_steps % cfg.checkpoint_every == 0 and trainer.n_training_steps < steps:
            _check_weights(trainer, output, ckpt, bar)  # (weights are checked here, not every step: a NaN
            checkpoint.save(trainer, ckpt)  #  weight makes the next loss NaN anyway)
    bar.close()
    _check_weights(trainer, output, ckpt, bar)
    seconds = time.perf_counter() - t0
    trainer.set_final_sae_metadata()
    checkpoint.save(trainer, ckpt)  # unfolded, with trainer state: resumable / extendable
    scale = trainer.activation_scaler.scaling_factor
    if scale is not None:
        sae.fold_activation_norm_scaling_factor(scale)
    from sae.inference import calibrate_threshold, is_batch_topk

    calibration = None
    if cfg.calibrate and is_batch_topk(sae):
        split, x = calibration_sample(store, hook, cfg, shards, rowf)
        k = float(sae.cfg.k)
        calibration = {"split": split, **calibrate_threshold(sae, x.split(4096), k)}
    save_trained(sae, out)
    report = {
        "arch": cfg.arch,
        "hook": hook,
        "d_in": d_in,
        "d_sae": cfg.d_sae,
        "steps": steps,
        "resumed_from_step": resumed_from,
        "seconds": round(seconds, 2),
        "tokens_per_second": round((steps - resumed_from) * cfg.batch_size / max(seconds, 1e-9), 1),
        "steady_seconds_per_step": (
            round((t0 + seconds - t1) / (steps - resumed_from - 1), 4)
            if t1 is not None and steps - resumed_from > 1
            else None
        ),
        "scale_factor": scale,
        "final_losses": last,
        "heldout_shards": held_out,
        "rows": rowf.config(),
        "lr_warmup_steps": warmup,
        "lr_decay_steps": int(cfg.lr_decay_frac * steps),
        "auxk_window": {
            "steps": window,
            "tokens": window * cfg.batch_size,
            "latents_past_it": int(trainer.dead_neurons.sum()),
            "meaning": "latents that had not fired for this many training steps at the end of "
            "training (what AuxK trains); not the dead fraction, which is under 'eval'",
        },
    }
    if calibration is not None:
        report["calibration"] = calibration
    report.update(_final_eval(sae, store, out, hook, bool(held_out)))
    _write_json(out / "train_report.json", report)
    return sae, report


def save_trained(sae: Any, out: Path) -> None:
    """Write the final SAE: `out/` holds the inference form in a class plain sae-lens loads without
    `import sae` (BatchTopK family and Matryoshka as sae-lens's own `jumprelu`, as its `save_inference_model`
    writes them; the loss-only variants c2r*/coh* as their base's class), `out/training_sae/` the training
    form (`load_sae(out, inference=False)`). PolySAE's decoder has no sae-lens class: it stays one folder of
    its training form (loading it needs `import sae`)."""
    from sae.inference import _sae_lens_inference

    if getattr(sae, "linear_atoms", None) is None and _sae_lens_inference(sae) is not None:
        sae.save_model(out / TRAINING_DIR)
        sae.save_inference_model(out)
    else:
        sae.save_model(out)


TRAINING_DIR = "training_sae"
"""Subfolder of a run holding the training form of its SAE (when `out/` holds the inference form)."""


def _init_b_dec(
    sae: Any,
    store: ActivationStore,
    hook: str,
    cfg: TrainConfig,
    shards: list[int] | None,
    rowf: RowFilter,
    scale: float | None,
) -> None:
    """Start the decoder bias at `cfg.init_b_dec` of a sample of training rows, in the scaled units the SAE
    trains in (a fresh run only: a resumed one loads its bias from the checkpoint)."""
    from sae.geometric_median import initial_b_dec

    if cfg.init_b_dec == "zeros" or not hasattr(sae, "b_dec"):
        return
    _, x = calibration_sample(store, hook, cfg, shards, rowf, n=min(cfg.calibration_rows, 8192))
    b = initial_b_dec(x * (scale or 1.0), cfg.init_b_dec)
    with torch.no_grad():
        sae.b_dec.copy_(b.to(sae.b_dec.device, sae.b_dec.dtype))


def calibration_sample(
    store: ActivationStore,
    hook: str,
    cfg: TrainConfig,
    shards: list[int] | None,
    rowf: RowFilter,
    n: int | None = None,
) -> tuple[str, torch.Tensor]:
    """(split, rows) to calibrate the shipped threshold on: a seeded sample of `calibration_rows` ordinary
    training rows. Never the held-out rows: they are the rows `interp sae eval` and the report score, so a
    threshold fitted on them would make shipped L0 = k hold by construction there."""
    n = cfg.calibration_rows if n is None else n
    b = next(
        iter(
            store.iter_batches(
                min(n + n // 4 + 256, len(store)), hooks=hook, shuffle=True, seed=cfg.seed + 7, shards=shards
            )
        )
    )
    x = b[hook].float()
    x = x[rowf.keep_tensor(x, b.get("pos"))][:n]
    x = x[torch.isfinite(x).all(-1)]
    if not len(x):
        raise ValueError(f"no finite ordinary rows of {hook} to calibrate the threshold on")
    return "train", x


def _final_eval(sae: Any, store: ActivationStore, out: Path, hook: str, held_out: bool) -> dict[str, Any]:
    """The numbers `interp sae eval` prints for this folder (same rows, rule and codes as shipped), under
    `heldout_eval` (held-out shards) or `eval` (all rows, when none were held out); for BatchTopK-family
    SAEs also the batch-level codes and the shipped/batch ratios. Dead = never fired on those rows."""
    from sae.evaluate import evaluate_store
    from sae.inference import is_batch_topk, to_inference

    key = "heldout_eval" if held_out else "eval"
    try:
        ev = {
            k: v
            for k, v in evaluate_store(to_inference(sae), store, out, hook).items()
            if k not in ("hook", "row_rule")
        }
        res: dict[str, Any] = {key: ev}
        if is_batch_topk(sae):
            b = evaluate_store(sae, store, out, hook, codes="batch")
            res["batch_codes_eval"] = {k: b[k] for k in ("fvu", "l0", "dead_frac", "rows")}
            res["shipped_vs_batch"] = {
                "fvu_ratio": ev["fvu"] / max(b["fvu"], 1e-12),
                "l0_over_k": ev["l0"] / float(sae.cfg.k),
            }
    except ValueError as e:  # e.g. held-out rows that are all special or damaged: training still succeeded
        res = {key: {"error": str(e)}}
    return res


def train_on_tensor(
    sae: Any,
    x: torch.Tensor,
    steps: int,
    batch_size: int = 1024,
    lr: float = 1e-3,
    seed: int = 0,
    dead_feature_window: int = 200,
    progress: bool = False,
) -> Any:
    """Train `sae` on rows of an in-memory [n, d] tensor with sae-lens's trainer step (random minibatches,
    seeded). For synthetic benchmarks and tests; stores go through `train_sae`."""
    g = torch.Generator().manual_seed(seed)
    tcfg = SAETrainerConfig(
        total_training_samples=steps * batch_size,
        train_batch_size_samples=batch_size,
        lr=lr,
        lr_end=lr,
        dead_feature_window=dead_feature_window,
        feature_sampling_window=max(steps, 1),
    )
    trainer = SAETrainer(cfg=tcfg, sae=sae, data_provider=iter(()))
    bar = Progress(steps, f"train {sae.cfg.architecture()}", enabled=progress)
    for _ in range(steps):
        out = trainer.step(x[torch.randint(0, len(x), (batch_size,), generator=g)])
        if not torch.isfinite(out.loss):
            bar.close()
            raise NonFiniteError(f"non-finite loss at step {trainer.n_training_steps}: {out.losses}")
        trainer.n_training_steps += 1
        bar.update(1)
    bar.close()
    sae.eval()
    return sae
