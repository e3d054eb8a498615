"""The decoupling experiment: do massive activations and attention sinks co-occur only under pre-norm?

Trains small Llama-shaped byte-level models that are identical (shape, data, seed, optimiser, steps)
except for where the normalisation sits (`norms.py`: pre, post, sandwich), then runs the probes on each
and writes one table: top |h| / median ratio and layer, massive entries at the sink token, Gu's Sink_1
(eps 0.3), and whether the two co-occur.

    python -m interp.probes.experiments.decoupling --out runs/probes/decoupling             # ~25 min on 2 cores
    python -m interp.probes.experiments.decoupling --out /tmp/dec --steps 30 --quick        # smoke run

Training is resumable per variant: a finished variant (its `model.safetensors`) is not trained again,
and a run refuses to reuse a folder trained with other settings.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from interp.data import byte_tokenizer, resolve_corpus
from interp.probes.experiments.backcopy import BOS, bigram_backcopy
from interp.probes.experiments.norms import VARIANTS, build_model, small_config


@dataclass
class TrainConfig:
    """Settings shared by every variant (saved as `settings.json`)."""

    steps: int = 2000
    """Optimiser steps per variant."""
    batch_size: int = 32
    """Sequences per step."""
    ctx_len: int = 64
    """Tokens per sequence (Gu et al. measure sinks at T = 64)."""
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    lr: float = 1e-3
    """Peak learning rate (linear warm-up, cosine decay to 10%)."""
    warmup: int = 100
    weight_decay: float = 0.1
    """AdamW weight decay (Gu et al.: more decay, more sinks)."""
    seed: int = 0
    data: str = "stdlib-docs"
    """A corpus name for `interp.data.resolve_corpus` (byte-level), or "bigram-backcopy" (`backcopy.py`)."""
    bos: bool = True
    """Natural text: put the BOS token at position 0 of every row (rows start mid-document otherwise)."""
    max_tokens: int = 2_000_000
    eval_seqs: int = 128
    """Held-out rows (the last ones of the corpus) for perplexity and the probes."""

    def __post_init__(self):
        if self.steps < 1 or self.batch_size < 1 or self.ctx_len < 2:
            raise ValueError("steps, batch_size must be >= 1 and ctx_len >= 2")


def _lr(cfg: TrainConfig, step: int) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def corpus_split(cfg: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(train rows, held-out rows) of the byte-level corpus."""
    if cfg.data == "bigram-backcopy":
        rows = bigram_backcopy(cfg.max_tokens // cfg.ctx_len, cfg.ctx_len, seed=cfg.seed)
    else:
        corpus = resolve_corpus(
            cfg.data, byte_tokenizer(), ctx_len=cfg.ctx_len, max_tokens=cfg.max_tokens, seed=cfg.seed
        )
        rows = corpus.tokens
        if cfg.bos:
            rows = rows.clone()
            rows[:, 0] = BOS
    if rows.shape[0] <= cfg.eval_seqs:
        raise ValueError(f"corpus {cfg.data!r} has only {rows.shape[0]} rows; need more than eval_seqs={cfg.eval_seqs}")
    return rows[: -cfg.eval_seqs], rows[-cfg.eval_seqs :]


def train_variant(
    variant: str,
    cfg: TrainConfig,
    train_rows: torch.Tensor,
    folder: Path,
    probe_rows: torch.Tensor | None = None,
    probe_every: int = 0,
    device: str = "cpu",
) -> dict:
    """Train one variant (or load it when already trained); returns its training log summary. With
    `probe_every`, the probes run on `probe_rows` every that many steps (the emergence curve, in
    `train.json` as "curve"); they do not touch the training randomness. `device` is where it trains
    (the initialisation and the batch order are drawn on the CPU, so they are the same everywhere)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "model.safetensors"
    if done.exists():
        return json.loads((folder / "train.json").read_text())
    config = small_config(d_model=cfg.d_model, n_layers=cfg.n_layers, n_heads=cfg.n_heads, ctx=cfg.ctx_len)
    model = build_model(variant, config, seed=cfg.seed).train().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(cfg.seed)  # same batches for every variant
    losses, curve = [], []
    t0 = time.perf_counter()
    for step in tqdm(range(cfg.steps), desc=f"train {variant}", mininterval=5):
        for g in opt.param_groups:
            g["lr"] = _lr(cfg, step)
        idx = torch.randint(0, train_rows.shape[0], (cfg.batch_size,), generator=gen)
        batch = train_rows[idx].to(device, non_blocking=True)
        loss = model(input_ids=batch, labels=batch, use_cache=False).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.detach())  # read back after the loop: a float() here would sync the GPU every step
        if probe_every and probe_rows is not None and (step + 1) % probe_every == 0:
            curve.append(_probe_point(variant, model, probe_rows, step + 1))
            model.train()
    losses = torch.stack(losses).cpu().tolist()
    summary = {
        "variant": variant,
        "final_train_loss": sum(losses[-50:]) / len(losses[-50:]),
        "seconds": round(time.perf_counter() - t0, 1),
        "loss_every_100": losses[::100],
        "curve": curve,
    }
    (folder / "train.json").write_text(json.dumps(summary, indent=1))
    state = {
        k: v.detach().cpu().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"
    }  # tied to the embedding
    save_file(state, str(done))
    return summary


def _probe_point(variant: str, model, rows: torch.Tensor, step: int) -> dict:
    from interp import HookedModel
    from interp.probes.experiments.measure import measure_variant

    r = measure_variant(HookedModel(model.eval(), byte_tokenizer()), rows)
    point = {
        "step": step,
        "ppl": round(r["ppl"], 3),
        "max_ratio": round(r["max_ratio"], 1),
        "max_ratio_layer": r["max_ratio_layer"],
        "top1_at_pos0_share": r["top1_at_pos0_share"],
        "sink_fraction": r["sink_fraction"],
        "mean_alpha_first": round(r["mean_alpha_first"], 4),
    }
    tqdm.write(f"{variant} {json.dumps(point)}")
    return point


def load_variant(variant: str, cfg: TrainConfig, folder: Path):
    """A trained variant as a `HookedModel` (weights from `model.safetensors`, written by `train_variant`)."""
    from interp import HookedModel

    config = small_config(d_model=cfg.d_model, n_layers=cfg.n_layers, n_heads=cfg.n_heads, ctx=cfg.ctx_len)
    model = build_model(variant, config, seed=cfg.seed)
    state = load_file(str(folder / "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or [m for m in missing if "lm_head" not in m]:
        raise ValueError(
            f"{folder}: weights do not match variant {variant!r} (missing {missing}, unexpected {unexpected})"
        )
    return HookedModel(model, byte_tokenizer(), provenance={"spec": f"decoupling-{variant}", "path": str(folder)})


def _check_settings(out: Path, cfg: TrainConfig) -> None:
    path = out / "settings.json"
    mine = dataclasses.asdict(cfg)
    if path.exists():
        theirs = json.loads(path.read_text())
        if theirs != mine:
            diff = {k: (theirs.get(k), v) for k, v in mine.items() if theirs.get(k) != v}
            raise ValueError(f"{out} holds a run with other settings {diff}; use another --out")
    else:
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(mine, indent=1))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/probes/decoupling")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--quick", action="store_true", help="tiny run (smoke test): small model and corpus")
    parser.add_argument("--train-only", action="store_true", help="train the variants, measure nothing")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest on a busy 2-core machine)")
    parser.add_argument(
        "--device",
        default="cpu",
        help="where the variants train: auto, cpu, cuda or cuda:N (the probes then run on the CPU)",
    )
    parser.add_argument(
        "--probe-every",
        type=int,
        default=0,
        help="run the probes on the held-out rows every N steps "
        "while training (the emergence curve, saved in train.json)",
    )
    for f in dataclasses.fields(TrainConfig):
        kind = (lambda v: v.lower() in ("1", "true", "yes")) if isinstance(f.default, bool) else type(f.default)
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=None)
    args = parser.parse_args(argv)
    overrides = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if getattr(args, f.name) is not None
    }
    if args.quick:
        overrides = {
            "steps": 20,
            "d_model": 32,
            "n_layers": 2,
            "n_heads": 2,
            "max_tokens": 40_000,
            "eval_seqs": 16,
            "warmup": 5,
            **overrides,
        }
    cfg = TrainConfig(**overrides)
    out = Path(args.out)
    _check_settings(out, cfg)
    torch.set_num_threads(args.threads)
    from interp.infra.devices import resolve_device

    device = resolve_device(args.device)
    train_rows, eval_rows = corpus_split(cfg)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if args.train_only:
        return {v: train_variant(v, cfg, train_rows, out / v, eval_rows, args.probe_every, device) for v in variants}
    from interp.probes.experiments.measure import decoupling_table, measure_variant

    results = {}
    for v in variants:
        train_variant(v, cfg, train_rows, out / v, eval_rows, args.probe_every, device)
        results[v] = measure_variant(load_variant(v, cfg, out / v), eval_rows)
        results[v]["train"] = json.loads((out / v / "train.json").read_text())
    report = {"settings": dataclasses.asdict(cfg), "variants": results, "table": decoupling_table(results)}
    (out / "results.json").write_text(json.dumps(report, indent=1))
    print(report["table"])
    return report


if __name__ == "__main__":
    main()
