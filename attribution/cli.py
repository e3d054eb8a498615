"""`interp attribute ...`: sharded, resumable attribution jobs (see `attribution.jobs`), and `show` to read them.

    interp attribute run --method tracin --model smollm2-135m --checkpoints runs/ft --train tokens:train.safetensors \\
        --queries tokens:queries.safetensors --out runs/tracin [--executor ray] [--device cuda] [--dtype bfloat16]
    interp attribute show --run runs/tracin [--top 3] [--out DIR]  # top/bottom training examples as text + report.html

Entry point: `attribution.cli:register` adds the `attribute` group to the core CLI (`attribution.cli:app` is
the same group on its own). `interp attribute --method ...` (the job's options on the group, before 0.3) still
runs the job, with a deprecation warning.
"""

from __future__ import annotations

import json

import typer
from typer.core import TyperGroup


class AttributeGroup(TyperGroup):
    """The `attribute` group; a line that starts with an option (`interp attribute --method tracin ...`, the old
    form) is the `run` sub-command's, with a deprecation warning."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        if args and args[0].startswith("-") and args[0] not in ctx.help_option_names:
            from interp.cli.options import warn_deprecated

            warn_deprecated("`interp attribute --method ...`", "`interp attribute run --method ...`")
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(help="Training-data attribution: TracIn, SDI (looped models), EK-FAC (MDA), DRA; `show` to read a run.",
                  add_completion=False, no_args_is_help=True, cls=AttributeGroup)


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _fail(e: Exception) -> None:
    typer.echo(f"error: {e}", err=True)
    raise typer.Exit(2) from None


@app.command("run")
def run(
    method: str = typer.Option(None, metavar="TEXT", help="tracin | sdi | ekfac | dra (required to run a job)"),
    model: str = typer.Option(None, metavar="SPEC", help="Model spec, e.g. smollm2-135m, looped-gpt:RUN, RUN@N, a local folder"),
    train: str = typer.Option(None, metavar="SPEC", help="Training data: tokens:PATH.safetensors or a corpus spec (stdlib-docs, file:PATH, ...)"),
    queries: str = typer.Option(None, metavar="SPEC", help="Query data (DRA: unsafe targets), same forms as --train"),
    out: str = typer.Option(None, metavar="DIR", help="Output folder; a rerun with the same settings resumes"),
    checkpoints: str = typer.Option("", metavar="TEXT", help="TracIn/SDI: comma-separated checkpoints: RUN (all step_N), RUN@N, or folders; EK-FAC: one RUN@N"),
    lrs: str = typer.Option("", metavar="TEXT", help="TracIn/SDI: comma-separated learning rate per checkpoint (default: training_state.json)"),
    sketch_dim: int = typer.Option(2048, metavar="INT", help="Sketch size per parameter tensor; 0 = exact gradients"),
    modules: str = typer.Option("", metavar="TEXT", help="TracIn/DRA-gradient: comma-separated module-name globs"),
    component: str = typer.Option("L0H0:qk", metavar="TEXT", help="EK-FAC: head component L<layer>H<head>[:qk|qkv|qkvo]"),
    probe: str = typer.Option("queries", metavar="TEXT", help="EK-FAC measurement: queries | copy | prev"),
    fit_samples: int = typer.Option(64, metavar="INT", help="EK-FAC: training sequences used to fit the factors"),
    damping: float = typer.Option(0.1, metavar="FLOAT", help="EK-FAC: damping, a multiple of each block's mean eigenvalue"),
    label_samples: int = typer.Option(1, metavar="INT", help="EK-FAC: labels sampled from the model per fitting sequence"),
    representation: str = typer.Option("hidden", metavar="TEXT", help="DRA: hidden | gradient"),
    hooks: str = typer.Option("", "--hooks", metavar="NAME", help="DRA hidden states: hook name (default: middle hook_resid_post)"),
    raw: bool = typer.Option(False, "--raw", help="DRA: no denoising at all (the raw-similarity baseline)"),
    center: bool = typer.Option(True, "--center/--no-center", help="DRA: subtract the training pool's mean"),
    whiten: bool = typer.Option(False, "--whiten/--no-whiten",
                                help="DRA: whiten with the pool covariance (off by default: it lowered AUPRC 0.758 -> 0.508 "
                                     "on SmolLM2, attribution/README.md)"),
    neutral_removal: float = typer.Option(0.0, metavar="FLOAT", help="DRA hidden: fraction of target tokens dropped as neutral"),
    select_dims: str = typer.Option("auto", metavar="TEXT", help="DRA: dimension selection: auto (leave-one-target-out), all, or K"),
    adam_state: str = typer.Option("", metavar="PATH", help="DRA gradient: checkpoint folder with adam_state.safetensors "
                                                           "(LESS-style Adam-normalised gradients)"),
    ctx_len: int = typer.Option(64, metavar="INT", help="Tokens per sequence for corpus specs"),
    n_train: int = typer.Option(256, "--n-train", metavar="INT", help="Training sequences from a corpus spec"),
    n_queries: int = typer.Option(8, "--n-queries", metavar="INT", help="Query sequences from a corpus spec"),
    max_train: int = typer.Option(None, "--max-train", hidden=True, metavar="INT"),
    max_queries: int = typer.Option(None, "--max-queries", hidden=True, metavar="INT"),
    shard_size: int = typer.Option(64, metavar="INT", help="Training rows per shard (one task)"),
    batch_size: int = typer.Option(16, metavar="INT", help="Sequences per forward/backward"),
    seed: int = typer.Option(0, metavar="INT", help="Sketch hashes, corpus shuffling, label sampling"),
    device: str = typer.Option("auto", metavar="auto|cpu|cuda[:N]", help="Where the model runs (auto: CUDA when present)"),
    dtype: str = typer.Option("float32", metavar="float32|bfloat16", help="Model dtype; features and scores accumulate in float32"),
    executor: str = typer.Option("inprocess", metavar="TEXT", help="inprocess | ray"),
    ray_address: str = typer.Option(None, metavar="TEXT", help="Ray cluster address; default: start a local Ray"),
    num_workers: int = typer.Option(None, metavar="INT", help="Ray workers for a local Ray (CUDA: one per GPU)"),
    threads: int = typer.Option(None, "--threads", metavar="INT", help="torch CPU threads (in-process runs)"),
    restart: bool = typer.Option(False, "--restart", help="Start the run in --out over instead of resuming it"),
    overwrite: bool = typer.Option(False, "--overwrite", hidden=True),
    hook: str = typer.Option(None, "--hook", hidden=True),
) -> None:
    """Score every training sequence against every query; write a resumable attribution store."""
    missing = [f"--{n}" for n, v in (("method", method), ("model", model), ("train", train), ("queries", queries),
                                     ("out", out)) if not v]
    if missing:
        _fail(ValueError(f"missing {', '.join(missing)}: `interp attribute run --method M --model SPEC --train DATA "
                         "--queries DATA --out DIR` runs a job; `interp attribute show --run RUN` reads one"))
    from attribution.jobs import AttributeConfig, run_attribution
    from interp.cli import options as O
    from interp.cli.errors import check_out_dir

    try:
        max_train = O.deprecated(max_train, "--max-train", "--n-train", n_train, 256)
        max_queries = O.deprecated(max_queries, "--max-queries", "--n-queries", n_queries, 8)
        restart = O.deprecated(overwrite, "--overwrite", "--restart", restart, False)
        hook = O.one_hook(hooks, hook) or ""
        O.set_threads(threads)
        check_out_dir(out)
        dims = None if select_dims == "all" else select_dims if select_dims == "auto" else int(select_dims)
        cfg = AttributeConfig(
            method=method, model=model, train=train, queries=queries, out=out, checkpoints=_split(checkpoints),
            lrs=[float(x) for x in _split(lrs)] or None, sketch_dim=sketch_dim, modules=_split(modules),
            component=component, probe=probe, fit_samples=fit_samples, damping=damping, label_samples=label_samples,
            representation=representation, hook=hook,
            denoise=not raw, center=center, whiten=whiten, neutral_removal=neutral_removal, select_dims=dims,
            adam_state=adam_state, ctx_len=ctx_len, max_train=max_train, max_queries=max_queries,
            shard_size=shard_size, batch_size=batch_size, seed=seed, device=device, dtype=dtype, executor=executor,
            ray_address=ray_address, num_workers=num_workers)
        from interp.store import StoreMismatchError

        try:
            summary = run_attribution(cfg, overwrite=restart)
        except StoreMismatchError as exc:
            raise ValueError(f"{exc} Or pass --restart to start it over.") from None
    except (ValueError, FileNotFoundError) as e:
        _fail(e)
    typer.echo(json.dumps(summary, indent=1))


@app.command("show")
def show(
    run_arg: str = typer.Argument(None, metavar="RUN", hidden=True, help="As --run"),
    run: str = typer.Option(None, "--run", metavar="DIR", help="Output folder of a finished `interp attribute run`"),
    top: int = typer.Option(3, metavar="INT", help="Training examples shown per query, at each end"),
    out: str = typer.Option(None, metavar="DIR", help="Folder for report.html (default: RUN)"),
    width: int = typer.Option(100, metavar="INT", help="Characters of text per example in the console"),
) -> None:
    """Print, per query, the top and bottom training examples with text and scores; write report.html."""
    from attribution.report import html_report, text_report
    from interp.cli import options as O

    try:
        run = O.positional(run, run_arg, "--run")
        if top <= 0:
            raise ValueError(f"--top must be positive, got {top}")
        report = text_report(run, top=top, width=width)
        path = html_report(run, out, top=max(top, 10))
    except (ValueError, FileNotFoundError) as e:
        _fail(e)
    typer.echo(report)
    typer.echo(f"\nHTML: {path}")


def register(app_: typer.Typer) -> None:
    """Add the `attribute` group (`run`, `show`) to another Typer app (e.g. the core `interp` CLI)."""
    app_.add_typer(app, name="attribute")
