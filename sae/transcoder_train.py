"""Train the transcoders of every layer at once, from the running model (no activation store).

Each step runs one no-grad forward of the model over `batch_tokens // ctx` token rows, records every covered
layer's MLP input (`blocks.{l}.ln2.hook_normalized`) and output (`blocks.{l}.hook_mlp_out`), drops the special
rows (`interp.cache.rows`: position 0 and, per layer, MLP outputs over 10x that layer's median norm, by
default) and takes one Adam step for all layers (`sae.transcoder_step`). Then:

- the JumpReLU threshold of each layer is calibrated so the shipped codes fire k times per row on average over
  the setup rows (a seeded sample of training rows), the idea of `sae.inference.calibrate_threshold`: the
  threshold is the k·N-th largest pre-activation over N rows, which batch top-k would have kept;
- the output scale used in training (E||y||² = d_model per layer) is folded into the decoders, and the set is
  written in circuit-tracer's and sae-lens's forms (`sae.transcoder_folder`);
- per-layer NMSE / L0 / dead fraction and the replacement model's CE, agreement and KL are measured on held-out
  rows (the last `heldout_seqs` token rows, never trained on) and written to `train_report.json`.

Resumable: every `checkpoint_every` steps the weights, Adam's state, the step and the dead-latent counters are
swapped in atomically (`sae.checkpoint.write_swapped`); the rows of step s are a function of (seed, s), so a run
killed at any instant and started again continues from the same row and ends equal to an uninterrupted one.

    >>> import interp
    >>> from interp.data import resolve_corpus
    >>> model = interp.load_model("smollm2-135m")
    >>> rows = resolve_corpus("stdlib-docs", model.tokenizer, ctx_len=128, max_tokens=220_000)
    >>> cfg = TranscoderTrainConfig(arch="transcoder", d_transcoder=1536, k=32, total_tokens=200_000)
    >>> tc, report = train_transcoders(model, rows, cfg, "runs/transcoders/plt")
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from interp.cache.rows import DEFAULT_EXCLUDE, RowFilter, RowRule
from interp.infra.safe_state import load_state, save_state
from interp.store.atomic import atomic_write_bytes
from sae import checkpoint
from sae.geometric_median import INIT_B_DEC, initial_b_dec
from sae.progress import Progress
from sae.transcoder import OUTPUT_HOOK, TRANSCODER_ARCHS, Transcoders
from sae.transcoder_eval import keep_rows, layer_metrics, mlp_io, replacement_metrics
from sae.transcoder_folder import make_transcoders, write_transcoders
from sae.transcoder_step import CODE_KINDS, StepConfig, lr_at, train_step


@dataclass
class TranscoderTrainConfig:
    """One transcoder training run; saved as `train_config.json` (a folder holding another run is refused)."""

    arch: str = "transcoder"
    """transcoder (per-layer), skip_transcoder (plus an affine skip) or clt (cross-layer)."""
    d_transcoder: int = 1536
    """Latents per layer."""
    k: int = 32
    """Active latents per token per layer (training codes; the shipped threshold is calibrated to it)."""
    layers: list[int] | None = None
    """Model layers to cover; None: all. A CLT covers 0..n-1."""
    total_tokens: int = 200_000
    """Tokens to train on (the model's rows; special rows are then dropped from each batch)."""
    batch_tokens: int = 4096
    """Tokens per step, as whole token rows: batch_tokens // ctx rows per forward."""
    lr: float | None = None
    """Adam's peak learning rate; None: 2e-4 / sqrt(d_transcoder / 16384), at most 1e-3 (as `sae train`)."""
    lr_warmup_steps: int | None = None
    """Linear warm-up; None: min(1000, steps // 20)."""
    lr_decay_frac: float = 0.2
    """Linear decay to 0 over this last fraction of the steps."""
    codes: str = "batchtopk"
    """Training codes: batchtopk (k·n largest over the batch, per layer) or topk (k per row)."""
    auxk_coefficient: float = 1.0
    """Weight of AuxK (sae-lens's form); 0 turns it off."""
    auxk_k: int | None = None
    """Dead latents each row's AuxK reconstruction uses; None: d_model // 2."""
    dead_window_steps: int | None = None
    """Steps without firing after which a latent is dead for AuxK; None: clamp(steps // 20, 5, 1000)."""
    init_b_dec: str = "median"
    """Starting decoder bias of each layer: median (geometric median of its MLP outputs), mean or zeros."""
    normalize: bool = True
    """Train on MLP outputs scaled to E||y||² = d_model per layer (folded into the decoders at the end)."""
    exclude: str = DEFAULT_EXCLUDE
    """Rows never trained on or scored (interp.cache.rows spec); the norm cut applies to each layer's MLP output."""
    heldout_seqs: int = 32
    """Last token rows of the data, never trained on: the rows of the report."""
    setup_tokens: int = 4096
    """Training tokens of the sample that fixes the norms, scales and b_dec at the start and calibrates the
    thresholds at the end."""
    checkpoint_every: int = 20
    """Steps between checkpoints."""
    eval_batch_size: int = 4
    """Token rows per forward in the replacement-model evaluation."""
    seed: int = 0
    """Seed of the initialisation and of the row order."""
    device: str = "cpu"
    """Where the transcoders train (not part of the run's identity)."""

    def __post_init__(self) -> None:
        from interp.infra.devices import resolve_device

        if not isinstance(self.arch, str) or self.arch not in TRANSCODER_ARCHS:
            raise ValueError(f"arch must be one of {sorted(TRANSCODER_ARCHS)}, got {self.arch!r}")
        for name in ("d_transcoder", "k", "total_tokens", "batch_tokens", "checkpoint_every", "eval_batch_size"):
            _check_int(name, getattr(self, name), 1)
        for name in ("heldout_seqs", "setup_tokens"):
            _check_int(name, getattr(self, name), 1, "(the report and the calibration need rows)")
        _check_int("seed", self.seed, 0)
        _check_int("auxk_k", self.auxk_k, 1, "(or None: d_model // 2)", optional=True)
        _check_int("dead_window_steps", self.dead_window_steps, 1, "(or None: clamp(steps // 20, 5, 1000))", True)
        _check_int("lr_warmup_steps", self.lr_warmup_steps, 0, "(0: no warm-up; None: min(1000, steps // 20))", True)
        for f in dataclasses.fields(self):  # numpy integers and the like, as plain ints (train_config.json)
            v = getattr(self, f.name)
            if _is_int(v) and not isinstance(v, int):
                setattr(self, f.name, int(v))
        if self.k > self.d_transcoder:
            raise ValueError(f"k must be between 1 and d_transcoder={self.d_transcoder}, got {self.k}")
        if not isinstance(self.codes, str) or self.codes not in CODE_KINDS:
            raise ValueError(f"codes must be one of {CODE_KINDS}, got {self.codes!r}")
        if not isinstance(self.init_b_dec, str) or self.init_b_dec not in INIT_B_DEC:
            raise ValueError(f"init_b_dec must be one of {INIT_B_DEC}, got {self.init_b_dec!r}")
        if not isinstance(self.normalize, bool):
            raise ValueError(f"normalize must be true or false, got {self.normalize!r}")
        if self.layers is not None:
            if not isinstance(self.layers, (list, tuple)) or not all(_is_int(x) and x >= 0 for x in self.layers):
                raise ValueError(f"layers must be a list of layer indices >= 0 (or None: all), got {self.layers!r}")
            self.layers = sorted({int(x) for x in self.layers})
            if not self.layers:
                raise ValueError("layers must name at least one layer (or be None: all)")
            if self.kind == "clt" and self.layers != list(range(len(self.layers))):
                raise ValueError(
                    f"a cross-layer transcoder covers layers 0..n-1 (its features write into every later layer), "
                    f"got {self.layers}: pass --layers 0-{self.layers[-1]} or leave --layers out"
                )
        if self.lr is None:
            self.lr = min(1e-3, 2e-4 / math.sqrt(self.d_transcoder / 16384))
        if not (_is_real(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")
        if not (_is_real(self.lr_decay_frac) and 0 <= self.lr_decay_frac < 1):
            raise ValueError(f"lr_decay_frac must be a number in [0, 1), got {self.lr_decay_frac!r}")
        if not (_is_real(self.auxk_coefficient) and self.auxk_coefficient >= 0):
            raise ValueError(
                f"auxk_coefficient must be a number >= 0 (0 turns AuxK off), got {self.auxk_coefficient!r}"
            )
        if not isinstance(self.exclude, str):
            raise ValueError(f"exclude must be a row rule like {DEFAULT_EXCLUDE!r}, got {self.exclude!r}")
        if not isinstance(self.device, str):
            raise ValueError(f"device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        self.exclude = RowRule.parse(self.exclude).spec
        self.device = resolve_device(self.device)

    @property
    def kind(self) -> str:
        return TRANSCODER_ARCHS[self.arch][0]


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _check_int(name: str, v: Any, least: int, note: str = "", optional: bool = False) -> None:
    """Refuse a `name` that is not a whole number >= `least` (None allowed when `optional`)."""
    if optional and v is None:
        return
    if not _is_int(v) or v < least:
        what = "a positive integer" if least == 1 else f"an integer >= {least}"
        raise ValueError(f"{name} must be {what}{' ' + note if note else ''}, got {v!r}")


def _write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, default=str) + "\n").encode())


def _digest(t: torch.Tensor) -> str:
    return hashlib.sha256(np.ascontiguousarray(t.cpu().numpy().astype("<i8")).tobytes()).hexdigest()


class RowOrder:
    """Which training rows step s reads: pass p over the training rows is `randperm(seed, p)`; step s takes the
    next `per_step` rows of the concatenated passes, so any step's rows are known without replaying the others."""

    def __init__(self, n_train: int, per_step: int, seed: int):
        self.n, self.per_step, self.seed = n_train, per_step, seed
        self._perms: dict[int, torch.Tensor] = {}

    def _perm(self, p: int) -> torch.Tensor:
        if p not in self._perms:
            self._perms = {
                p: torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed * 1_000_003 + p))
            }
        return self._perms[p]

    def rows(self, step: int) -> torch.Tensor:
        start = step * self.per_step
        return torch.stack([self._perm(j // self.n)[j % self.n] for j in range(start, start + self.per_step)])


def _positions(n_rows: int, ctx: int) -> torch.Tensor:
    return torch.arange(ctx).repeat(n_rows)


def _save_checkpoint(folder: Path, tc: Transcoders, opt: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    def write(tmp: Path) -> None:
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in tc.state_dict().items()}, str(tmp / "weights.safetensors")
        )
        save_state(tmp, "trainer_state", {**state, "optimizer": opt.state_dict()})
        spec = {"kind": tc.kind, "layers": tc.layers, "d_model": tc.d_model, "d_transcoder": tc.d_transcoder}
        (tmp / "cfg.json").write_text(json.dumps(spec))

    checkpoint.write_swapped(folder, write)


def _load_checkpoint(folder: Path, tc: Transcoders, opt: torch.optim.Optimizer, device: str) -> dict[str, Any]:
    tc.load_state_dict(load_file(str(folder / "weights.safetensors"), device=device))
    state = load_state(folder, "trainer_state", map_location=device)
    opt.load_state_dict(state.pop("optimizer"))
    return state


def _check_same_run(out: Path, args: dict[str, Any]) -> None:
    path = out / "train_config.json"
    if not path.is_file():
        return
    old = json.loads(path.read_text())
    diff = sorted(k for k in set(old) | set(args) if k != "device" and old.get(k) != args.get(k))
    if diff:
        raise ValueError(f"{out} holds a transcoder run with other settings ({diff}); use another --out or --restart")


def calibrate_thresholds(tc: Transcoders, xs: torch.Tensor, k: float) -> list[float]:
    """Set each layer's JumpReLU threshold to the k·N-th largest pre-activation over the N rows of `xs`
    ([layer, N, d]), so the shipped codes fire k times per row on average there (0, a ReLU, when fewer than
    k·N pre-activations are positive). Returns the thresholds."""
    out = []
    with torch.no_grad():
        for i in range(tc.n_layers):
            flat = tc.pre_acts(i, xs[i]).flatten()
            want = min(max(1, round(k * xs.shape[1])), flat.numel())
            theta = max(0.0, float(flat.topk(want).values[-1]))
            tc.threshold[i].fill_(theta)
            out.append(theta)
    return out


def check_inputs(model: Any, rows: Any, cfg: TranscoderTrainConfig) -> tuple[torch.Tensor, list[int], int, int, int]:
    """Refuse rows and a config that cannot train on `model` (layers past it, too few rows or tokens for one step),
    before anything is written or removed. Returns (token ids, layers, rows per step, training rows, steps)."""
    ids = rows.tokens if hasattr(rows, "tokens") else rows
    try:
        ids = torch.as_tensor(ids)
    except (TypeError, ValueError, RuntimeError) as e:
        raise ValueError(f"rows must be token ids [n_rows, ctx >= 2] ({type(e).__name__}: {str(e)[:100]})") from None
    if ids.ndim != 2 or ids.shape[1] < 2 or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise ValueError(f"rows must be integer token ids [n_rows, ctx >= 2], got {ids.dtype} {tuple(ids.shape)}")
    ids = ids.long().cpu()
    n_rows, ctx = ids.shape
    layers = cfg.layers if cfg.layers is not None else list(range(model.n_layers))
    if layers[-1] >= model.n_layers:
        raise ValueError(
            f"layers {layers} go past the model's {model.n_layers} layers: pass --layers within 0-{model.n_layers - 1}"
        )
    per_step = cfg.batch_tokens // ctx
    if per_step < 1:
        raise ValueError(f"batch_tokens {cfg.batch_tokens} is less than one token row of {ctx}: raise --batch-tokens")
    n_train = n_rows - cfg.heldout_seqs
    if n_train < per_step:
        raise ValueError(
            f"{n_rows} token rows leave {n_train} for training after {cfg.heldout_seqs} held out, fewer than the "
            f"{per_step} rows of one step: use more --max-tokens of data or fewer --batch-tokens"
        )
    steps = cfg.total_tokens // (per_step * ctx)
    if steps < 1:
        raise ValueError(
            f"total_tokens {cfg.total_tokens} is less than one step of {per_step * ctx} tokens: "
            "raise --max-tokens or lower --batch-tokens"
        )
    return ids, layers, per_step, n_train, steps


def train_transcoders(
    model: Any, rows: Any, cfg: TranscoderTrainConfig, out: str | Path, resume: bool = True, progress: bool = True
) -> tuple[Transcoders, dict[str, Any]]:
    """Train transcoders of `cfg.arch` on the model's MLPs over token rows `rows` ([n_rows, ctx] ids, or an
    `interp.data.Corpus`), writing checkpoints, the folder (`sae.transcoder_folder`) and `train_report.json`
    into `out`. Returns (transcoders in inference form, report). Run again after a kill, it resumes."""
    out = Path(out)
    data_info = rows.describe() if hasattr(rows, "describe") else None
    ids, layers, per_step, n_train, steps = check_inputs(model, rows, cfg)
    ctx = ids.shape[1]
    train_ids, held_ids = ids[:n_train], ids[n_train:]
    setup_ids = train_ids[torch.randperm(n_train, generator=torch.Generator().manual_seed(cfg.seed + 7))]
    setup_ids = setup_ids[: max(1, min(n_train, -(-cfg.setup_tokens // ctx)))]
    dev = cfg.device

    args = {
        **dataclasses.asdict(cfg),
        "layers": layers,
        "model": model.name,
        "model_sha256": model.provenance.get("weights_sha256"),
        "rows_digest": _digest(ids),
        "ctx_len": ctx,
        "data": data_info,
    }
    ckpt = out / "checkpoint"
    checkpoint.recover(ckpt)
    if resume and checkpoint.exists(ckpt):
        _check_same_run(out, args)
    tc = make_transcoders(cfg.kind, layers, model.d_model, cfg.d_transcoder).to(dev)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / "train_config.json", args)
    opt = torch.optim.Adam(tc.parameters(), lr=cfg.lr, fused=True)  # one kernel per tensor: 9x less time on a CLT
    rule = RowRule.parse(cfg.exclude)
    if resume and checkpoint.exists(ckpt):
        state = _load_checkpoint(ckpt, tc, opt, dev)
    else:
        xs, ys = mlp_io(model, setup_ids, layers, dev)
        pos = _positions(len(setup_ids), ctx)
        refs = [rule.bind_tensor(y, pos).reference_norm for y in ys]
        filters = [RowFilter(rule, r, None) for r in refs]
        keep = keep_rows(filters, ys, pos)
        ys = ys[:, keep]
        scales = (
            torch.tensor([math.sqrt(model.d_model) / float(y.norm(dim=-1).mean().clamp_min(1e-12)) for y in ys])
            if cfg.normalize
            else torch.ones(len(layers))
        )
        tc.init_weights(torch.Generator().manual_seed(cfg.seed))
        with torch.no_grad():
            for i, y in enumerate(ys):
                b = initial_b_dec(y.cpu() * float(scales[i]), cfg.init_b_dec)
                if b is not None:
                    tc.b_dec[i].copy_(b)
        state = {
            "step": 0,
            "since_fired": torch.zeros(len(layers), cfg.d_transcoder, dtype=torch.long, device=dev),
            "scales": scales.to(dev),
            "reference_norms": refs,
            "seconds": 0.0,
        }
    filters = [
        RowFilter(rule, r, OUTPUT_HOOK.format(layer=layer))
        for r, layer in zip(state["reference_norms"], layers, strict=True)
    ]
    warmup = min(1000, steps // 20) if cfg.lr_warmup_steps is None else cfg.lr_warmup_steps
    decay = int(cfg.lr_decay_frac * steps)
    window = min(1000, max(5, steps // 20)) if cfg.dead_window_steps is None else cfg.dead_window_steps
    scfg = StepConfig(
        k=cfg.k,
        codes=cfg.codes,
        k_aux=max(1, model.d_model // 2) if cfg.auxk_k is None else cfg.auxk_k,
        auxk_coefficient=cfg.auxk_coefficient,
        dead_window=window,
    )
    order = RowOrder(n_train, per_step, cfg.seed)
    resumed_from = state["step"]
    pos = _positions(per_step, ctx)
    bar = Progress(steps, f"train {cfg.arch}", initial=resumed_from, enabled=progress)
    t0, last, kept_tokens = time.perf_counter(), {}, 0
    while state["step"] < steps:
        s = state["step"]
        xs, ys = mlp_io(model, train_ids[order.rows(s)], layers, dev)
        keep = keep_rows(filters, ys, pos)
        xs, ys = xs[:, keep], ys[:, keep] * state["scales"][:, None, None]
        last = train_step(tc, opt, xs, ys, state["since_fired"], scfg, lr_at(s, steps, cfg.lr, warmup, decay))
        if not math.isfinite(last["loss"]):
            bar.close()
            from sae.train import NonFiniteError

            raise NonFiniteError(f"non-finite loss at step {s} ({last}); the last good checkpoint is in {ckpt}")
        kept_tokens += int(keep.sum())
        state["step"] = s + 1
        bar.set_postfix(fvu=f"{last['fvu']:.3f}", auxk=f"{last['auxk']:.3g}")
        bar.update(1)
        if state["step"] % cfg.checkpoint_every == 0 and state["step"] < steps:
            _save_checkpoint(ckpt, tc, opt, {**state, "seconds": state["seconds"] + time.perf_counter() - t0})
    bar.close()
    seconds = time.perf_counter() - t0
    state["seconds"] = state["seconds"] + seconds
    if state["step"] > resumed_from:
        _save_checkpoint(ckpt, tc, opt, state)  # trained, unfolded: a rerun redoes only the steps below
    run = dict(layers=layers, state=state, filters=filters, ctx=ctx, steps=steps, per_step=per_step)
    timing = dict(resumed_from=resumed_from, seconds=seconds, kept_tokens=kept_tokens, last=last, window=window)
    return _finish(model, tc, cfg, out, setup_ids, held_ids, run, timing, data_info)


def _finish(
    model: Any,
    tc: Transcoders,
    cfg: TranscoderTrainConfig,
    out: Path,
    setup_ids: torch.Tensor,
    held_ids: torch.Tensor,
    run: dict[str, Any],
    timing: dict[str, Any],
    data_info: dict[str, Any] | None,
) -> tuple[Transcoders, dict[str, Any]]:
    """Calibrate, fold the output scale, write the folder, score on the held-out rows, write the report."""
    layers, state, filters, ctx = run["layers"], run["state"], run["filters"], run["ctx"]
    xs, ys = mlp_io(model, setup_ids, layers, cfg.device)
    keep = keep_rows(filters, ys, _positions(len(setup_ids), ctx))
    thresholds = calibrate_thresholds(tc, xs[:, keep], cfg.k)
    calib_rows = int(keep.sum())
    del xs, ys
    tc.scale_outputs_(1.0 / state["scales"])
    tc.eval()
    tokens = run["steps"] * run["per_step"] * ctx
    training = {
        "arch": cfg.arch,
        "codes": cfg.codes,
        "steps": run["steps"],
        "tokens": tokens,
        "batch_tokens": run["per_step"] * ctx,
        "lr": cfg.lr,
        "seed": cfg.seed,
        "exclude": cfg.exclude,
        "data": (data_info or {}).get("source"),
        "calibration": {"rows": calib_rows, "split": "train"},
    }
    write_transcoders(tc, out, model.name, k=cfg.k, training=training)
    t0 = time.perf_counter()
    xs, ys = mlp_io(model, held_ids, layers, cfg.device)
    keep = keep_rows(filters, ys, _positions(len(held_ids), ctx))
    per_layer = layer_metrics(tc, xs, ys, keep)
    del xs, ys
    replacement = replacement_metrics(model, tc, held_ids, cfg.eval_batch_size)
    done = run["steps"] - timing["resumed_from"]
    seconds = timing["seconds"]
    report = {
        "arch": cfg.arch,
        "kind": tc.kind,
        "model": model.name,
        "layers": layers,
        "d_model": tc.d_model,
        "d_transcoder": tc.d_transcoder,
        "k": cfg.k,
        "steps": run["steps"],
        "tokens": tokens,
        "batch_tokens": run["per_step"] * ctx,
        "resumed_from_step": timing["resumed_from"],
        "seconds": round(seconds, 2),
        "tokens_per_second": round(done * run["per_step"] * ctx / seconds, 1) if done and seconds > 0 else None,
        "trained_rows_this_call": timing["kept_tokens"],
        "lr": cfg.lr,
        "dead_window_steps": timing["window"],
        "final_losses": timing["last"],
        "auxk_dead_at_end": [int((f >= timing["window"]).sum()) for f in state["since_fired"]],
        "rows": {"exclude": cfg.exclude, "reference_norms": state["reference_norms"]},
        "calibration": {"rows": calib_rows, "split": "train", "thresholds": thresholds},
        "heldout": {"token_rows": len(held_ids), "rows_scored": int(keep.sum())},
        "per_layer": per_layer,
        "mean": {key: sum(r[key] for r in per_layer) / len(per_layer) for key in ("nmse", "l0", "dead_frac")},
        "replacement": replacement,
        "eval_seconds": round(time.perf_counter() - t0, 2),
    }
    _write_json(out / "train_report.json", report)
    return tc, report
