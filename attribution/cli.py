"""`interp attribute ...`: sharded, resumable attribution jobs (see `attribution.jobs`), and `show` to read them.

    interp attribute run --method tracin --model smollm2-135m --checkpoints runs/ft --train tokens:train.safetensors \\
        --queries tokens:queries.safetensors --out runs/tracin [--executor ray] [--device cuda] [--dtype bfloat16]
    interp attribute show --run runs/tracin [--top 3] [--out DIR]  # top/bottom training examples as text + report.html
    interp attribute lds --out runs/lds [--task neox|looped] [-m 50] [--alpha 0.5] [--quick]   # LDS of every method
    interp attribute lds --out runs/lds_mine --model SPEC [--data SPEC] [--ctx-len 32]          # ... on your model
    interp attribute build --model SPEC --train DATA --out runs/grads [--projection random|sketch] [--dim 512]
    interp attribute query --store runs/grads --queries DATA [--out DIR] [--top 10] [--precondition none|adam|diag]

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


app = typer.Typer(
    help="Training-data attribution: TracIn, SDI (looped models), EK-FAC (MDA), DRA; `show` to read a run.",
    add_completion=False,
    no_args_is_help=True,
    cls=AttributeGroup,
)


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _fail(e: Exception) -> None:
    typer.echo(f"error: {e}", err=True)
    raise typer.Exit(2) from None


@app.command("run")
def run(
    method: str = typer.Option(None, metavar="TEXT", help="tracin | sdi | ekfac | dra (required to run a job)"),
    model: str = typer.Option(
        None, metavar="SPEC", help="Model spec, e.g. smollm2-135m, looped-gpt:RUN, RUN@N, a local folder"
    ),
    train: str = typer.Option(
        None,
        metavar="SPEC",
        help="Training data: tokens:PATH.safetensors or a corpus spec (stdlib-docs, file:PATH, ...)",
    ),
    queries: str = typer.Option(None, metavar="SPEC", help="Query data (DRA: unsafe targets), same forms as --train"),
    out: str = typer.Option(None, metavar="DIR", help="Output folder; a rerun with the same settings resumes"),
    checkpoints: str = typer.Option(
        "",
        metavar="TEXT",
        help="TracIn/SDI: comma-separated checkpoints: RUN (all step_N), RUN@N, or folders; EK-FAC: one RUN@N",
    ),
    lrs: str = typer.Option(
        "",
        metavar="TEXT",
        help="TracIn/SDI: comma-separated learning rate per checkpoint (default: training_state.json)",
    ),
    sketch_dim: int = typer.Option(2048, metavar="INT", help="Sketch size per parameter tensor; 0 = exact gradients"),
    modules: str = typer.Option("", metavar="TEXT", help="TracIn/DRA-gradient: comma-separated module-name globs"),
    component: str = typer.Option(
        "L0H0:qk", metavar="TEXT", help="EK-FAC: head component L<layer>H<head>[:qk|qkv|qkvo]"
    ),
    probe: str = typer.Option("queries", metavar="TEXT", help="EK-FAC measurement: queries | copy | prev"),
    fit_samples: int = typer.Option(64, metavar="INT", help="EK-FAC: training sequences used to fit the factors"),
    damping: float = typer.Option(
        0.1, metavar="FLOAT", help="EK-FAC: damping, a multiple of the head's mean eigenvalue"
    ),
    label_samples: int = typer.Option(
        1, metavar="INT", help="EK-FAC: labels sampled from the model per fitting sequence"
    ),
    representation: str = typer.Option("hidden", metavar="TEXT", help="DRA: hidden | gradient"),
    hooks: str = typer.Option(
        "", "--hooks", metavar="NAME", help="DRA hidden states: hook name (default: middle hook_resid_post)"
    ),
    raw: bool = typer.Option(False, "--raw", help="DRA: no denoising at all (the raw-similarity baseline)"),
    center: bool = typer.Option(True, "--center/--no-center", help="DRA: subtract the training pool's mean"),
    whiten: bool = typer.Option(
        False,
        "--whiten/--no-whiten",
        help="DRA: whiten with the pool covariance (off by default: it lowered AUPRC 0.758 -> 0.508 "
        "on SmolLM2, attribution/README.md)",
    ),
    neutral_removal: float = typer.Option(
        0.0, metavar="FLOAT", help="DRA hidden: fraction of target tokens dropped as neutral"
    ),
    select_dims: str = typer.Option(
        "auto", metavar="TEXT", help="DRA: dimension selection: auto (leave-one-target-out), all, or K"
    ),
    adam_state: str = typer.Option(
        "",
        metavar="PATH",
        help="DRA gradient: checkpoint folder with adam_state.safetensors (LESS-style Adam-normalised gradients)",
    ),
    ctx_len: int = typer.Option(64, metavar="INT", help="Tokens per sequence for corpus specs"),
    n_train: int = typer.Option(256, "--n-train", metavar="INT", help="Training sequences from a corpus spec"),
    n_queries: int = typer.Option(8, "--n-queries", metavar="INT", help="Query sequences from a corpus spec"),
    max_train: int = typer.Option(None, "--max-train", hidden=True, metavar="INT"),
    max_queries: int = typer.Option(None, "--max-queries", hidden=True, metavar="INT"),
    shard_size: int = typer.Option(64, metavar="INT", help="Training rows per shard (one task)"),
    batch_size: int = typer.Option(16, metavar="INT", help="Sequences per forward/backward"),
    seed: int = typer.Option(0, metavar="INT", help="Sketch hashes, corpus shuffling, label sampling"),
    device: str = typer.Option(
        "auto", metavar="auto|cpu|cuda[:N]", help="Where the model runs (auto: CUDA when present)"
    ),
    dtype: str = typer.Option(
        "float32", metavar="float32|bfloat16", help="Model dtype; features and scores accumulate in float32"
    ),
    executor: str = typer.Option("inprocess", metavar="TEXT", help="inprocess | ray"),
    ray_address: str = typer.Option(None, metavar="TEXT", help="Ray cluster address; default: start a local Ray"),
    num_workers: int = typer.Option(None, metavar="INT", help="Ray workers for a local Ray (CUDA: one per GPU)"),
    threads: int = typer.Option(None, "--threads", metavar="INT", help="torch CPU threads (in-process runs)"),
    restart: bool = typer.Option(False, "--restart", help="Start the run in --out over instead of resuming it"),
    overwrite: bool = typer.Option(False, "--overwrite", hidden=True),
    hook: str = typer.Option(None, "--hook", hidden=True),
) -> None:
    """Score every training sequence against every query; write a resumable attribution store."""
    missing = [
        f"--{n}"
        for n, v in (("method", method), ("model", model), ("train", train), ("queries", queries), ("out", out))
        if not v
    ]
    if missing:
        _fail(
            ValueError(
                f"missing {', '.join(missing)}: `interp attribute run --method M --model SPEC --train DATA "
                "--queries DATA --out DIR` runs a job; `interp attribute show --run RUN` reads one"
            )
        )
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
            method=method,
            model=model,
            train=train,
            queries=queries,
            out=out,
            checkpoints=_split(checkpoints),
            lrs=[float(x) for x in _split(lrs)] or None,
            sketch_dim=sketch_dim,
            modules=_split(modules),
            component=component,
            probe=probe,
            fit_samples=fit_samples,
            damping=damping,
            label_samples=label_samples,
            representation=representation,
            hook=hook,
            denoise=not raw,
            center=center,
            whiten=whiten,
            neutral_removal=neutral_removal,
            select_dims=dims,
            adam_state=adam_state,
            ctx_len=ctx_len,
            max_train=max_train,
            max_queries=max_queries,
            shard_size=shard_size,
            batch_size=batch_size,
            seed=seed,
            device=device,
            dtype=dtype,
            executor=executor,
            ray_address=ray_address,
            num_workers=num_workers,
        )
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
    from contextlib import ExitStack

    from attribution.report import html_report, text_report
    from interp.cli import options as O
    from interp.store.lock import holding

    with ExitStack() as writing:
        try:
            run = O.positional(run, run_arg, "--run")
            if top <= 0:
                raise ValueError(f"--top must be positive, got {top}")
            report = text_report(run, top=top, width=width)
            if out:  # a folder of the user's: a second writer into it is refused by name, not raced
                writing.enter_context(holding(out, "the report folder"))
            path = html_report(run, out, top=max(top, 10))
        except (ValueError, FileNotFoundError) as e:
            _fail(e)
    typer.echo(report)
    typer.echo(f"\nHTML: {path}")


@app.command("lds")
def lds_command(
    out: str = typer.Option(..., metavar="DIR", help="Folder for the task, retraining store, scores, lds.json"),
    task: str = typer.Option(
        None, metavar="neox|looped", help="Tiny task: 2-layer GPT-NeoX (the default) or the looped GPT"
    ),
    model: str = typer.Option(
        None,
        metavar="SPEC",
        help="Your model instead of a tiny task: fine-tuned from its own weights on each subset (any spec "
        "interp.load_model takes)",
    ),
    data: str = typer.Option("stdlib-docs", metavar="SPEC", help="Corpus the training and query sequences come from"),
    ctx_len: int = typer.Option(32, metavar="INT", help="Tokens per sequence (bytes for the tiny tasks)"),
    lr: float = typer.Option(3e-3, metavar="FLOAT", help="AdamW learning rate of every (re)training run"),
    subsets: int = typer.Option(50, "--subsets", "-m", metavar="INT", help="M random subsets retrained on (>= 2)"),
    alpha: float = typer.Option(0.5, metavar="FLOAT", help="Fraction of the training set in each subset, in (0, 1)"),
    methods: str = typer.Option("", metavar="TEXT", help="Comma-separated methods (default: all that apply)"),
    n_train: int = typer.Option(1024, "--n-train", metavar="INT", help="Training sequences (stdlib-docs, 32 bytes)"),
    n_query: int = typer.Option(32, "--n-query", metavar="INT", help="Held-out query sequences"),
    epochs: int = typer.Option(3, metavar="INT", help="Epochs of every (re)training run"),
    seed: int = typer.Option(0, metavar="INT", help="Init, data order, corpus draw, subsets"),
    quick: bool = typer.Option(False, "--quick", help="256 training rows, 16 queries (a couple of minutes)"),
    shard_size: int = typer.Option(5, metavar="INT", help="Subsets retrained per task"),
    executor: str = typer.Option("inprocess", metavar="TEXT", help="inprocess | ray"),
    ray_address: str = typer.Option(None, metavar="TEXT", help="Ray cluster address; default: start a local Ray"),
    num_workers: int = typer.Option(None, metavar="INT", help="Ray workers for a local Ray"),
) -> None:
    """Linear datamodeling score of every method on a tiny task retrained on M random subsets, with 95% CIs."""
    from attribution.lds import check_lds_args
    from interp.cli.errors import check_out_dir

    try:
        check_lds_args(subsets, alpha)  # before anything is imported or written
        check_out_dir(out)  # the rest of the plan (folder content, settings, lock): `run_lds`, before it writes
        from attribution.lds_run import LDSConfig, run_lds
        from attribution.lds_task import LMTaskConfig

        if quick:
            n_train, n_query = 256, 16
        if model and task:
            raise ValueError("--task picks a tiny model and --model your own: pass one of them")
        if ctx_len <= 0 or lr <= 0:
            raise ValueError(f"--ctx-len and --lr must be positive, got {ctx_len} and {lr}")
        kind = "model" if model else (task or "neox")
        task_cfg = LMTaskConfig(
            kind=kind, model=model, data=data, ctx=ctx_len, lr=lr, n_train=n_train, n_query=n_query, epochs=epochs,
            seed=seed,
        )  # fmt: skip
        cfg = LDSConfig(
            out=out,
            task=task_cfg,
            n_subsets=subsets,
            alpha=alpha,
            methods=_split(methods),
            shard_size=shard_size,
            executor=executor,
            ray_address=ray_address,
            num_workers=num_workers,
        )
        summary = run_lds(cfg, log=typer.echo)
    except (ValueError, FileNotFoundError) as e:
        _fail(ValueError(" ".join(str(e).split("\n"))))  # one line
    typer.echo(f"\n{len(summary['methods'])} methods, M = {subsets}, alpha = {alpha}: {out}/lds.json")


def _quiet_loading() -> None:
    """No per-checkpoint "Loading weights" bars: an error stays the only line on stderr."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


@app.command("build")
def build_command(
    model: str = typer.Option(..., metavar="SPEC", help="Model spec whose training gradients are stored"),
    train: str = typer.Option(..., metavar="SPEC", help="Training data: tokens:PATH.safetensors or a corpus spec"),
    out: str = typer.Option(..., metavar="DIR", help="Store folder; a rerun with the same settings resumes"),
    modules: str = typer.Option(
        "",
        metavar="TEXT",
        help="Comma-separated module-name globs (default: every Linear/LayerNorm/Embedding in the layers)",
    ),
    projection: str = typer.Option(
        "random",
        metavar="random|sketch",
        help="Seeded Gaussian projection of the whole gradient, or TensorSketch per parameter tensor",
    ),
    dim: int = typer.Option(512, metavar="INT", help="random: row dimension; sketch: buckets per parameter tensor"),
    seed: int = typer.Option(0, metavar="INT", help="Projection seed (and corpus shuffling)"),
    ctx_len: int = typer.Option(64, metavar="INT", help="Tokens per sequence for corpus specs"),
    n_train: int = typer.Option(256, "--n-train", metavar="INT", help="Training sequences from a corpus spec"),
    shard_size: int = typer.Option(256, metavar="INT", help="Training sequences per shard (one task)"),
    batch_size: int = typer.Option(16, metavar="INT", help="Sequences per forward/backward"),
    device: str = typer.Option("auto", metavar="auto|cpu|cuda[:N]", help="Where the model runs"),
    executor: str = typer.Option("inprocess", metavar="TEXT", help="inprocess | ray"),
    ray_address: str = typer.Option(None, metavar="TEXT", help="Ray cluster address; default: start a local Ray"),
    num_workers: int = typer.Option(None, metavar="INT", help="Ray workers for a local Ray"),
) -> None:
    """Store every training sequence's projected gradient once (resumable); `query` then scores query sets."""
    try:
        from attribution.gradstore_config import BuildConfig
        from interp.cli.errors import check_out_dir

        check_out_dir(out)  # before the model and the data are loaded: a refused run writes nothing
        cfg = BuildConfig(  # values checked before torch is imported
            model=model,
            train=train,
            out=out,
            modules=_split(modules),
            projection=projection,
            dim=dim,
            seed=seed,
            ctx_len=ctx_len,
            max_train=n_train,
            shard_size=shard_size,
            batch_size=batch_size,
            device=device,
            executor=executor,
            ray_address=ray_address,
            num_workers=num_workers,
        )
        _quiet_loading()
        from attribution.gradstore import build_store
        from interp.store import StoreLockedError, StoreMismatchError

        try:
            summary = build_store(cfg)
        except (StoreMismatchError, StoreLockedError, FileExistsError) as exc:
            raise ValueError(str(exc)) from None
    except (ValueError, FileNotFoundError) as e:
        _fail(ValueError(" ".join(str(e).split("\n"))))  # one line
    typer.echo(json.dumps(summary, indent=1))


@app.command("query")
def query_command(
    store: str = typer.Option(..., metavar="DIR", help="A gradient store written by `interp attribute build`"),
    queries: list[str] = typer.Option(
        ...,
        metavar="SPEC",
        help="Query data: tokens:PATH.safetensors or a corpus spec; repeat the option for several query sets, "
        "answered in one process (the model and store are loaded once)",
    ),
    out: str = typer.Option(
        None, metavar="DIR", help="Folder for topk.json / topk.safetensors (several query sets: DIR/query_<i>/)"
    ),
    top: int = typer.Option(10, metavar="INT", help="Training rows kept per query"),
    precondition: str = typer.Option(
        "none",
        metavar="none|adam|diag",
        help="Query-side preconditioner: none (gradient "
        "dot), adam (Adam second moments), diag (damped diagonal Fisher)",
    ),
    adam_state: str = typer.Option("", metavar="PATH", help="adam: checkpoint folder with adam_state.safetensors"),
    damping: float = typer.Option(0.1, metavar="FLOAT", help="diag: damping, a multiple of the mean diagonal"),
    fit_samples: int = typer.Option(64, metavar="INT", help="diag: training sequences the diagonal is fitted on"),
    model: str = typer.Option(None, metavar="SPEC", help="Model spec (default: the store's; must be its weights)"),
    modules: str = typer.Option(None, metavar="TEXT", help="Module globs (default: the store's; must match them)"),
    projection: str = typer.Option(None, metavar="random|sketch", help="Expected projection (checked)"),
    dim: int = typer.Option(None, metavar="INT", help="Expected projection dimension (checked)"),
    seed: int = typer.Option(None, metavar="INT", help="Expected projection seed (checked)"),
    faiss: bool = typer.Option(False, "--faiss", help="Search with a FAISS inner-product index (faiss-cpu)"),
    ctx_len: int = typer.Option(64, metavar="INT", help="Tokens per sequence for corpus specs"),
    n_queries: int = typer.Option(8, "--n-queries", metavar="INT", help="Query sequences from a corpus spec"),
    batch_size: int = typer.Option(16, metavar="INT", help="Sequences per forward/backward"),
    device: str = typer.Option("auto", metavar="auto|cpu|cuda[:N]", help="Where the model runs"),
) -> None:
    """Top training rows per query through a gradient store: the queries' gradients and a streamed matmul only."""
    try:
        if out:
            from interp.cli.errors import check_out_dir

            check_out_dir(out)  # before the store, the model and the queries are read
        from attribution.gradstore_config import QueryConfig

        cfg = QueryConfig(  # values checked before torch is imported
            store=store,
            queries=queries[0],
            out=out,
            top=top,
            precondition=precondition,
            adam_state=adam_state,
            damping=damping,
            fit_samples=fit_samples,
            model=model,
            modules=None if modules is None else _split(modules),
            projection=projection,
            dim=dim,
            seed=seed,
            faiss=faiss,
            ctx_len=ctx_len,
            max_queries=n_queries,
            batch_size=batch_size,
            device=device,
        )
        _quiet_loading()
        from attribution.resident import GradientIndex
        from interp.store import StoreLockedError

        try:
            several = len(queries) > 1
            # one query set: the shards streamed (memory: one shard); several: the rows held once (up to 2 GB)
            index = GradientIndex(cfg, **({} if several else {"max_resident_bytes": 0}))
            summaries = [
                index.query(spec, out=(f"{out}/query_{i}" if several else out) if out else None)
                for i, spec in enumerate(queries)
            ]
        except StoreLockedError as exc:
            raise ValueError(str(exc)) from None
    except (ValueError, FileNotFoundError) as e:
        _fail(ValueError(" ".join(str(e).split("\n"))))  # one line
    for summary in summaries:
        summary.pop("rows"), summary.pop("scores")
    typer.echo(json.dumps(summaries if several else summaries[0], indent=1))


def register(app_: typer.Typer) -> None:
    """Add the `attribute` group (`run`, `show`) to another Typer app (e.g. the core `interp` CLI)."""
    app_.add_typer(app, name="attribute")
