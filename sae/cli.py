"""`interp sae ...`: train, evaluate and browse SAEs on an activation store.

interp sae archs
interp sae train --store runs/demo/store --arch c2r --d-sae 1024 --k 32 --max-tokens 200000 --out runs/sae/c2r
interp sae eval --sae runs/sae/c2r --store runs/demo/store [--model smollm2-135m]
interp sae dashboard --sae runs/sae/c2r --store runs/demo/store --out runs/sae/c2r/dashboard.html
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Sparse autoencoders: C²R, PolySAE, Coh and baselines on sae-lens."
)


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


def _parse_settings(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for it in items:
        if "=" not in it:
            raise ValueError(f"--set takes key=value, got {it!r}")
        k, v = it.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


@app.command()
def archs() -> None:
    """List the architecture names and each variant's baseline."""
    from sae import ARCHS, BASELINE_OF
    from sae.transcoder import TRANSCODER_ARCHS

    for a, sl in ARCHS.items():
        typer.echo(
            f"{a:<15} sae-lens '{sl}'" + (f"  (baseline: {BASELINE_OF[a]})" if a in BASELINE_OF else "  (baseline)")
        )
    for a, (_, what) in TRANSCODER_ARCHS.items():
        typer.echo(f"{a:<15} {what}  (--model, not --store)")


@app.command()
def train(
    store: str | None = typer.Option(
        None, metavar="PATH", help="ActivationStore folder (from `interp cache`); SAE architectures only."
    ),
    arch: str = typer.Option(
        ...,
        help="Architecture: relu, topk, batchtopk, c2r, poly, coh, ...; transcoder, skip_transcoder, clt train from "
        "--model (`interp sae archs`).",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        metavar="SPEC",
        help="Transcoder archs: the model whose MLPs they replace (spec, local folder or hub id), run while training.",
    ),
    data: str | None = typer.Option(
        None, "--data", metavar="SPEC", help="Transcoder archs: the corpus of token rows (default stdlib-docs)."
    ),
    ctx_len: int = typer.Option(128, "--ctx-len", metavar="INT", help="Transcoder archs: tokens per row."),
    layers: str | None = typer.Option(
        None, "--layers", metavar="TEXT", help="Transcoder archs: layers to cover, e.g. 0-5 or 3,7 (default: all)."
    ),
    d_transcoder: int | None = typer.Option(
        None, "--d-transcoder", metavar="INT", help="Transcoder archs: latents per layer (default: --d-sae)."
    ),
    out: str = typer.Option(
        ..., metavar="DIR", help="Output folder: final cfg.json + sae_weights.safetensors, checkpoint/, reports."
    ),
    hooks: str | None = typer.Option(
        None, "--hooks", metavar="NAME", help="Hook to train on (default: the store's only hook)."
    ),
    d_sae: int = typer.Option(1024, help="Number of latents."),
    k: float = typer.Option(32, help="Active latents per token (TopK-family encoders)."),
    max_tokens: int = typer.Option(200_000, "--max-tokens", metavar="INT", help="Training tokens."),
    batch_tokens: int = typer.Option(4096, "--batch-tokens", metavar="INT", help="Tokens per step."),
    lr: float | None = typer.Option(None, help="Adam learning rate (default: 2e-4/sqrt(d_sae/16384), at most 1e-3)."),
    seed: int = typer.Option(0, help="Seed (initialisation and data order)."),
    checkpoint_every: int = typer.Option(50, help="Steps between checkpoints."),
    holdout_shards: int = typer.Option(
        0, help="Never train on the store's last N shards (`sae eval` then scores on them)."
    ),
    exclude: str = typer.Option(
        "positions:0+norm-outliers:10",
        help="Special rows never trained on (interp.cache.rows spec: none, bos, positions:0,1, norm-outliers:10, '+' "
        "to combine).",
    ),
    set_: list[str] = typer.Option([], "--set", help="Architecture setting key=value (repeatable), e.g. c2r_lambda=1."),
    resume: bool = typer.Option(
        True,
        "--resume/--no-resume",
        help="Continue from the checkpoint in --out (default); "
        "--no-resume ignores it (the folder must then hold no other run).",
    ),
    device: str = typer.Option(
        "auto",
        "--device",
        metavar="auto|cpu|cuda[:N]",
        help="Where the SAE trains: auto (CUDA when present, else CPU), cpu, cuda or cuda:N.",
    ),
    restart: bool = typer.Option(
        False,
        "--restart",
        help="Start over: replace the SAE run in --out (its "
        "weights, configs, reports and checkpoint) instead of resuming or refusing.",
    ),
    threads: int | None = typer.Option(None, "--threads", metavar="INT", help="torch CPU threads."),
    tokens: int | None = typer.Option(None, "--tokens", hidden=True),
    hook: str | None = typer.Option(None, "--hook", hidden=True),
    batch_size: int | None = typer.Option(None, "--batch-size", hidden=True),
    overwrite: bool = typer.Option(False, "--overwrite", hidden=True),
) -> None:
    """Train an SAE on a store, or transcoders on a running model (progress bar; resumable; stops cleanly on NaN)."""
    from interp.cli import options as O
    from sae.transcoder import TRANSCODER_ARCHS

    if arch in TRANSCODER_ARCHS or model is not None:
        from sae.transcoder_cli import train_transcoders_cli

        given = {"--hooks": hooks or hook, "--holdout-shards": holdout_shards or None}
        extra = dict(d_sae=d_sae, k=k, max_tokens=tokens or max_tokens, batch_tokens=batch_size or batch_tokens)
        try:
            summary = train_transcoders_cli(
                arch,
                store,
                model,
                data,
                ctx_len,
                layers,
                d_transcoder,
                out,
                lr,
                seed,
                checkpoint_every,
                exclude,
                _parse_settings(set_),
                resume,
                device,
                threads,
                given,
                **extra,
                restart=restart or overwrite,
            )
        except (ValueError, FileNotFoundError, RuntimeError) as exc:
            _fail(exc)
        typer.echo(json.dumps(summary, indent=1))
        return
    if store is None:
        _fail(ValueError(f"--arch {arch} trains on cached activations: pass --store PATH (from `interp cache`)"))
    for name, value in (("--data", data), ("--layers", layers), ("--d-transcoder", d_transcoder)):
        if value is not None:
            _fail(
                ValueError(f"{name} is for the transcoder archs (transcoder, skip_transcoder, clt), not --arch {arch}")
            )
    from interp.cli.errors import check_out_dir
    from interp.store import ActivationStore
    from sae.train import TrainConfig, train_sae

    try:
        max_tokens = O.deprecated(tokens, "--tokens", "--max-tokens", max_tokens, 200_000)
        hook = O.one_hook(hooks, hook)
        batch_size = O.deprecated(
            batch_size, "--batch-size (tokens in `sae train`)", "--batch-tokens", batch_tokens, 4096
        )
        overwrite = O.deprecated(overwrite, "--overwrite (start over in `sae train`)", "--restart", restart, False)
        O.compute(threads)
        check_out_dir(out)
        cfg = TrainConfig(
            arch=arch,
            d_sae=d_sae,
            k=k,
            hook=hook,
            total_tokens=max_tokens,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            checkpoint_every=checkpoint_every,
            holdout_shards=holdout_shards,
            exclude=exclude,
            settings=_parse_settings(set_),
            device=device,
        )
        st = ActivationStore.open(store)
        from interp.store.lock import holding

        with holding(out, "the SAE run folder"):  # a second `sae train` into --out is refused, not raced
            if overwrite:
                _remove_run(Path(out))
            _, report = train_sae(st, cfg, out, resume=resume and not overwrite)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        _fail(exc)
    typer.echo(json.dumps(report, indent=1))


RUN_FILES = ("cfg.json", "sae_weights.safetensors", "train_config.json", "train_report.json")
RUN_DIRS = ("checkpoint", "checkpoint.old", "training_sae")
"""What `sae train` writes into --out (all that `--overwrite` removes; other files stay)."""


def _remove_run(out: Path) -> None:
    import shutil

    for name in RUN_FILES:
        (out / name).unlink(missing_ok=True)
    for name in RUN_DIRS:
        if (out / name).is_dir():
            shutil.rmtree(out / name)


def eval_rows(sae_dir: str | Path, store: Any, split: str = "auto") -> tuple[str, Any]:
    """See `sae.evaluate.eval_rows` (imported lazily: `--help` must not import torch)."""
    from sae.evaluate import eval_rows as _eval_rows

    return _eval_rows(sae_dir, store, split)


@app.command("eval")
def eval_(
    sae: str = typer.Option(..., help="SAE folder (cfg.json + sae_weights.safetensors)."),
    store: str = typer.Option(..., help="ActivationStore with the SAE's hook."),
    hooks: str | None = typer.Option(
        None, "--hooks", metavar="NAME", help="Hook (default: the SAE's hook_name, else the store's only hook)."
    ),
    max_rows: int = typer.Option(32_768, help="Rows to evaluate on (the first ordinary rows of the split)."),
    split: str = typer.Option(
        "auto", help="heldout: the shards training held out; all: every row; auto: heldout if any."
    ),
    exclude: str | None = typer.Option(
        None,
        help="Special rows to leave out (interp.cache.rows spec: none, bos, positions:0,1, norm-outliers:10, '+' to "
        "combine); default: the rule the SAE was trained with, else positions:0+norm-outliers:10.",
    ),
    codes: str = typer.Option(
        "threshold",
        help="threshold: inference codes as sae-lens ships them (BatchTopK family as JumpReLU); batch: batch-level "
        "top-k (chunk-dependent).",
    ),
    model: str | None = typer.Option(None, help="Model spec: also splice the SAE in and report CE/KL loss recovered."),
    n_ce_seqs: int = typer.Option(16, "--n-ce-seqs", metavar="INT", help="Sequences for the spliced-loss metrics."),
    suite: str = typer.Option(
        "core",
        help="core: reconstruction/sparsity (+ CE/KL with --model); saebench: also the first-letter absorption and "
        "sparse-probing evals, written in SAEBench's JSON format under <sae>/saebench/ (needs --model).",
    ),
    words: int = typer.Option(1000, help="Vocabulary words for the saebench suite's first-letter tasks."),
    out: str | None = typer.Option(None, metavar="DIR", help="Also write the metrics as DIR/metrics.json."),
    device: str = typer.Option(
        "auto",
        "--device",
        metavar="auto|cpu|cuda[:N]",
        help="Where the SAE (and the model, with --model) runs: auto (CUDA when present, else CPU), cpu, cuda or "
        "cuda:N.",
    ),
    allow_other_hook: bool = typer.Option(
        False,
        "--allow-other-hook",
        help="Score the SAE on a hook or model other than the one its cfg.json records (a deliberate transfer study).",
    ),
    seed: int = typer.Option(0, "--seed", metavar="INT", help="Seed of torch's generators."),
    threads: int | None = typer.Option(None, "--threads", metavar="INT", help="torch CPU threads."),
    ce_seqs: int | None = typer.Option(None, "--ce-seqs", hidden=True),
    hook: str | None = typer.Option(None, "--hook", hidden=True),
) -> None:
    """Reconstruction and sparsity metrics (and CE/KL recovered with --model) as JSON, on ordinary rows."""
    from contextlib import ExitStack

    from interp.cli import options as O
    from interp.cli.errors import check_out_dir
    from interp.store import ActivationStore
    from interp.store.lock import holding
    from sae import load_sae
    from sae import metrics as M
    from sae.evaluate import evaluate_store, sae_row_filter

    with ExitStack() as writing:  # the writer lock of --out, released (a folder it made removed) on any exit
        try:
            ce_seqs = O.deprecated(ce_seqs, "--ce-seqs", "--n-ce-seqs", n_ce_seqs, 16)
            hook = O.one_hook(hooks, hook)
            O.compute(threads, seed)
            out_file = None
            if out:
                if out.endswith(".json"):  # the old meaning of --out (a file), kept for one version
                    O.warn_deprecated("--out FILE.json", "--out DIR (metrics.json inside) or --out-file FILE.json")
                    out_file = Path(out)
                    check_out_dir(out_file.parent or ".")
                else:
                    out_file = check_out_dir(out) / "metrics.json"

                    # a second `sae eval` into --out is refused by name; a killed one's temporary file is removed
                    writing.enter_context(holding(out, "the metrics folder"))
            if ce_seqs < 1 or words < 1:
                raise ValueError(f"--n-ce-seqs and --words must be >= 1, got {ce_seqs} and {words}")
            if suite not in ("core", "saebench"):
                raise ValueError(f"--suite must be core or saebench, got {suite!r}")
            if suite == "saebench" and not model:
                raise ValueError("--suite saebench runs the model (first-letter tasks, CE/KL): pass --model")
            if suite == "saebench":
                from sae import saebench as SB

                bench_dir = SB.check_folder(sae)  # <sae>/saebench: no link out of the SAE folder, writable
            from interp.infra.devices import resolve_device

            dev = resolve_device(device)
            s = load_sae(sae, inference=codes != "batch").to(dev)
            if model:  # the SAE records its model: another one is refused first, naming the SAE's
                from interp.infra.sae_folder import check_compatible, check_trained_model

                if not allow_other_hook:
                    check_trained_model(s, model, "--model", " (or --allow-other-hook for a deliberate transfer study)")
                check_compatible(s, _model(model, dev), hook, allow_other_hook=allow_other_hook)
            st = ActivationStore.open(store)
            if suite == "saebench":  # every input of the suite checked, and its folder held, before it runs
                bench_words = SB.check_inputs(_model(model, dev).tokenizer, model, words, st)
                writing.enter_context(
                    holding(bench_dir, "the saebench folder", fix=f"use --suite core, or {SB.ELSEWHERE}")
                )
            res: dict[str, Any] = {
                "sae": sae,
                **evaluate_store(s, st, sae, hook, split, max_rows, exclude, codes, allow_other_hook=allow_other_hook),
            }
            filt = sae_row_filter(sae, st, res["hook"], exclude)
            if model:
                res.update(_spliced(model, s, res["hook"], st, ce_seqs, eval_rows(sae, st, split)[1], filt, dev))
            if suite == "saebench":
                res["saebench_files"] = [str(p) for p in _saebench(sae, s, model, res, bench_words, dev, st, filt)]
            res["device"] = dev
        except (ValueError, FileNotFoundError, RuntimeError) as exc:
            _fail(exc)
        text = json.dumps(M.round_dict(res), indent=1)
        if out_file is not None:
            from interp.store.atomic import atomic_write_bytes

            out_file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(out_file, (text + "\n").encode())
    typer.echo(text)


_MODELS: dict[str, Any] = {}


def _model(spec: str, device: str = "cpu") -> Any:
    """Load a model once per command (the saebench suite and the spliced loss share it)."""
    import interp

    if (spec, device) not in _MODELS:
        _MODELS[spec, device] = interp.load_model(spec, device=device)
    return _MODELS[spec, device]


def _saebench(
    sae_dir: str,
    s: Any,
    model_spec: str,
    res: dict[str, Any],
    ws: list[tuple[int, str]],
    device: str = "cpu",
    st: Any = None,
    filt: Any = None,
) -> list[Any]:
    """The suite's evals on the words `saebench.check_inputs` gave; writes `<sae_dir>/saebench/` (its lock held).
    The store's probing tasks are drawn from the rows the row rule `filt` keeps, as every other metric is."""
    import copy

    import torch

    from sae import metrics as M
    from sae import sparse_probing as SP
    from sae.saebench import write_saebench

    model = _model(model_spec, device)
    # the probes are small (~1,000 words): fitted on the CPU, with a CPU copy of the SAE
    cpu_sae = s if device == "cpu" else copy.deepcopy(s).cpu()
    fl = M.first_letter_absorption(M.word_activations(model, res["hook"], ws).cpu(), ws, cpu_sae)
    tasks = None
    if st is not None:  # SAEBench's sparse-probing protocol on token classes of the store's rows

        @torch.no_grad()
        def encode(x: Any) -> Any:
            return torch.cat([cpu_sae.encode(c) for c in x.split(4096)])

        from sae.evaluate import ruled_rows

        rows = None if filt is None else ruled_rows(st, res["hook"], filt)
        data = SP.store_tasks(st, res["hook"], lambda t: model.tokenizer.decode([t]), seed=42, rows=rows)
        tasks = {t: SP.sparse_probing(tr, te, encode) for t, (tr, te) in data.items()} or None
    return write_saebench(
        sae_dir, fl, res, sae_id=Path(sae_dir).name, hook=res["hook"], model=model_spec, sae=cpu_sae, tasks=tasks
    )


def _store_sequences(st: Any, n_seqs: int, rows: Any = None) -> Any:
    """Token sequences rebuilt from the store's rows (the first ones of `rows`, default all):
    [n_seqs, ctx_len] (complete sequences only)."""
    import torch

    ctx = st.meta.ctx_len
    rows = torch.arange(len(st)) if rows is None else rows
    idx = st.get_rows(rows[: n_seqs * ctx], hooks=[])
    seqs = []
    for s in idx["seq"].unique().tolist():
        m = idx["seq"] == s
        if int(m.sum()) == ctx:
            order = idx["pos"][m].argsort()
            seqs.append(idx["tokens"][m][order].long())
    if not seqs:
        raise ValueError("the store holds no complete sequences to splice the SAE into")
    return torch.stack(seqs[:n_seqs])


def _spliced(
    model_spec: str, s: Any, hook: str, st: Any, n_seqs: int, rows: Any = None, filt: Any = None, device: str = "cpu"
) -> dict[str, Any]:
    from sae import metrics as M

    model = _model(model_spec, device)
    return M.spliced_loss(model, s, hook, _store_sequences(st, n_seqs, rows), rows=filt)


def __getattr__(name: str) -> Any:
    """`sae.cli.render_sae_dashboard` (re-exported for `interp demo`), imported when asked for: it imports torch."""
    if name == "render_sae_dashboard":
        from sae.dashboard import render_sae_dashboard

        return render_sae_dashboard
    raise AttributeError(f"module 'sae.cli' has no attribute {name!r}")


@app.command()
def dashboard(
    sae: str = typer.Option(..., metavar="PATH", help="SAE folder."),
    store: str | None = typer.Option(
        None,
        metavar="PATH",
        help="ActivationStore with the SAE's hook and its token ids (default: the store its training recorded).",
    ),
    out: str = typer.Option(
        ...,
        metavar="DIR",
        help="Folder to write: index.html, features/<i>.html|.json|.neuronpedia.json (opens offline).",
    ),
    model: str | None = typer.Option(
        None,
        metavar="SPEC",
        help="Model spec for the tokenizer, the unembedding and --text (default: the store's model); given, the model "
        "is loaded for the per-token ablation hover (see --ablate-windows).",
    ),
    features: str | None = typer.Option(
        None, metavar="TEXT", help="Comma-separated latents to give a page, e.g. 12,345 (default: --top N in --order)."
    ),
    top: int = typer.Option(50, metavar="INT", help="Pages for the first N latents in --order."),
    order: str = typer.Option(
        "interpretable",
        help="interpretable (live, not dense, by max activation; then dense; then dead), max, freq, mean or index.",
    ),
    max_rows: int = typer.Option(
        32_768,
        metavar="INT",
        help="Ordinary rows to cover: the first ones of the split, as `sae eval --max-rows` (same default).",
    ),
    split: str = typer.Option(
        "auto", help="heldout: the shards training held out; all: every row; auto: heldout if any (as `sae eval`)."
    ),
    exclude: str | None = typer.Option(
        None,
        metavar="TEXT",
        help="Special rows to leave out (interp.cache.rows spec); default: the rule the SAE was trained with, else "
        "positions:0+norm-outliers:10 (as `sae eval`).",
    ),
    text: str | None = typer.Option(
        None, metavar="TEXT", help="Also write text.html: every latent on this text (loads the model)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing dashboard folder."),
    ablate_windows: int = typer.Option(
        20,
        metavar="INT",
        help="With --model: top windows per page whose tokens show, on hover, the next-token loss change when the "
        "latent is removed there (one forward row per position; loads the model). 0: none.",
    ),
) -> None:
    """Write a dashboard folder of the SAE's latents: index (FVU, L0, dead/dense, density), pages, JSON exports."""
    from interp.cli.dashboard import prepare_out
    from interp.dashboards import parse_features
    from sae.dashboard import render_sae_dashboard

    try:
        feats = parse_features(features)
        prepare_out(out, overwrite)
        path = render_sae_dashboard(
            sae,
            store,
            out,
            model,
            top,
            max_rows,
            feats,
            order,
            exclude,
            text,
            split=split,
            overwrite=overwrite,
            ablate_windows=ablate_windows,
        )
    except (ValueError, FileNotFoundError, RuntimeError, KeyError) as exc:
        _fail(exc)
    typer.echo(f"wrote {path}")
