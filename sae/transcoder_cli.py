"""`interp sae train --arch transcoder|skip_transcoder|clt --model SPEC ...`: the transcoder branch of `sae train`.

Transcoders train from the running model (`sae.transcoder_train`), so they take `--model` and a corpus
(`--data`, as `interp cache` reads it) instead of `--store`; each wrong combination is refused in one line
that names the fix, before anything is loaded or written.

    interp sae train --arch transcoder --model smollm2-135m --d-transcoder 1536 --k 32 --max-tokens 200000 \\
        --batch-tokens 1024 --out runs/transcoders/smollm2_plt [--layers 0-5] [--set codes=topk]
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

SET_KEYS = (
    "lr_warmup_steps",
    "lr_decay_frac",
    "codes",
    "auxk_coefficient",
    "auxk_k",
    "dead_window_steps",
    "init_b_dec",
    "normalize",
    "heldout_seqs",
    "setup_tokens",
    "eval_batch_size",
)
"""`TranscoderTrainConfig` fields `--set key=value` may change (the others have their own options)."""

RUN_FILES = ("train_config.json", "train_report.json", "transcoders.json", "config.yaml")
RUN_GLOBS = ("layer_*.safetensors", "W_enc_*.safetensors", "W_dec_*.safetensors")
RUN_DIRS = ("checkpoint", "checkpoint.old", "checkpoint.tmp", "sae_lens")
"""What a transcoder run writes into --out (all that --restart removes; other files stay)."""


def parse_layers(text: str | None) -> list[int] | None:
    """ "0-5" / "3,7" / "0-3,8" / "all" -> layer list (None: all)."""
    if text is None or text.strip().lower() == "all":
        return None
    out: set[int] = set()
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            first, last = int(lo), int(hi if sep else lo)
        except ValueError:
            raise ValueError(f"--layers takes layer numbers and ranges like 0-5 or 3,7, got {text!r}") from None
        if last < first:
            raise ValueError(f"--layers range {part.strip()!r} runs backwards: write it low-high ({last}-{first})")
        out.update(range(first, last + 1))
    if not out:
        raise ValueError(f"--layers {text!r} names no layer")
    return sorted(out)


def holds_run(out: Path) -> bool:
    """Whether --out holds (part of) a transcoder run: any of the files or folders `remove_run` removes."""
    return any((out / name).exists() for name in RUN_FILES + RUN_DIRS) or any(
        next(out.glob(pattern), None) is not None for pattern in RUN_GLOBS
    )


def remove_run(out: Path) -> None:
    for name in RUN_FILES:
        (out / name).unlink(missing_ok=True)
    for pattern in RUN_GLOBS:
        for p in out.glob(pattern):
            p.unlink()
    for name in RUN_DIRS:
        if (out / name).is_dir():
            shutil.rmtree(out / name)


def _check_settings(found: dict[str, Any]) -> dict[str, Any]:
    bad = sorted(set(found) - set(SET_KEYS))
    if bad:
        raise ValueError(f"transcoders have no --set {bad}; valid: {list(SET_KEYS)}")
    return found


def check_arguments(arch: str, store: str | None, model: str | None, given: dict[str, Any]) -> None:
    """The one-line refusals of the transcoder branch (before anything is loaded)."""
    from sae.transcoder import TRANSCODER_ARCHS

    if arch not in TRANSCODER_ARCHS:
        raise ValueError(
            f"--model trains transcoders (--arch transcoder, skip_transcoder or clt); --arch {arch} is an SAE trained "
            "on cached activations: pass --store PATH (from `interp cache`) instead of --model"
        )
    if store is not None:
        raise ValueError(
            f"--arch {arch} trains from the running model, not from a store: drop --store and pass --model SPEC "
            "(and --data SPEC for the corpus)"
        )
    if model is None:
        raise ValueError(f"--arch {arch} trains from the running model: pass --model SPEC (e.g. --model smollm2-135m)")
    for name, value in given.items():
        if value:
            raise ValueError(f"{name} is for SAEs trained on a store, not for --arch {arch}")


def train_transcoders_cli(
    arch: str,
    store: str | None,
    model: str | None,
    data: str | None,
    ctx_len: int,
    layers: str | None,
    d_transcoder: int | None,
    out: str,
    lr: float | None,
    seed: int,
    checkpoint_every: int,
    exclude: str,
    settings: dict[str, Any],
    resume: bool,
    device: str,
    threads: int | None,
    given: dict[str, Any],
    d_sae: int,
    k: float,
    max_tokens: int,
    batch_tokens: int,
    restart: bool = False,
) -> dict[str, Any]:
    """Check, load the model and the corpus, train; returns the summary `sae train` prints. Errors are
    ValueErrors (the command prints them in one line). `resume` False (--no-resume) needs a folder holding no
    run; `restart` (--restart) replaces the run there, once the new run's input has been checked."""
    check_arguments(arch, store, model, given)
    from interp.cli import options as O
    from interp.cli.errors import check_out_dir

    O.compute(threads)
    folder = check_out_dir(out)
    if float(k) != int(k):
        raise ValueError(f"--k must be a whole number for transcoders, got {k}")
    from sae.transcoder_train import TranscoderTrainConfig, check_inputs, train_transcoders

    settings = _check_settings(settings)
    cfg = TranscoderTrainConfig(
        arch=arch,
        d_transcoder=d_sae if d_transcoder is None else d_transcoder,
        k=int(k),
        layers=parse_layers(layers),
        total_tokens=max_tokens,
        batch_tokens=batch_tokens,
        lr=lr,
        seed=seed,
        checkpoint_every=checkpoint_every,
        exclude=exclude,
        device=device,
        **settings,
    )
    if ctx_len < 2:
        raise ValueError(f"--ctx-len must be >= 2, got {ctx_len}")
    if not resume and not restart and holds_run(folder):
        raise ValueError(
            f"--no-resume needs a folder holding no run, and {folder} holds one: pass --restart to replace it, "
            "or use another --out"
        )
    import interp
    from interp.data import resolve_corpus
    from interp.store.lock import holding

    with holding(folder, "the transcoder run folder"):  # a second run into --out is refused, not raced
        lm = interp.load_model(model, device=cfg.device)
        if lm.n_ctx and ctx_len > lm.n_ctx:
            raise ValueError(f"--ctx-len {ctx_len} exceeds the model's context of {lm.n_ctx}")
        rows = resolve_corpus(
            data or "stdlib-docs", lm.tokenizer, ctx_len, cfg.total_tokens + cfg.heldout_seqs * ctx_len, seed
        )
        check_inputs(lm, rows, cfg)  # the new run's refusals come before the old run is removed
        if restart:
            remove_run(folder)
        _, report = train_transcoders(lm, rows, cfg, folder, resume=resume and not restart)
    keys = ("arch", "model", "layers", "d_transcoder", "k", "steps", "tokens", "seconds", "tokens_per_second", "mean")
    summary = {key: report[key] for key in keys} | {"replacement": report["replacement"], "out": str(folder)}
    return summary
