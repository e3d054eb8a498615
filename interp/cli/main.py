"""The `interp` command: models, cache, inspect, demo; families add their own sub-commands.

    interp models
    interp cache --model smollm2-135m --hooks 'blocks.15.hook_resid_post' --data stdlib-docs --max-tokens 65536 --out
    runs/acts
    interp inspect --store runs/acts
    interp demo

Importing this module imports no torch: `interp --help` and `interp models` answer at once, and each
command imports what it needs when it runs. Options follow one vocabulary (`interp.cli.options`);
expected failures are one `error:` line with exit status 2 (`interp.cli.errors`).
"""

from __future__ import annotations

import json
import sys

import typer

from interp.cli import options as O
from interp.cli.errors import check_out_dir, fail
from interp.cli.plugins import LazyGroup, discover

CORE_COMMANDS = ("probe", "dashboard", "contrib")
"""Core commands that live in their own modules (`interp/cli/<name>.py`, each with `register(app)`)."""

LazyGroup.lazy = discover(CORE_COMMANDS)
app = typer.Typer(
    cls=LazyGroup, add_completion=False, no_args_is_help=True, rich_markup_mode=None, help=__doc__.splitlines()[0]
)

__all__ = ["app", "fail", "main"]


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error (works anywhere on the line)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also show debug lines."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors: no progress bars or lines."),
) -> None:
    """The `interp` command: models, cache, inspect, demo; families add their own sub-commands."""
    from interp.infra import logs

    if verbose and quiet:
        fail("--verbose and --quiet contradict each other; give one")
    logs.setup(logs.VERBOSE if verbose else logs.QUIET if quiet else logs.NORMAL)


@app.command()
def models(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """List the model specs, whether each loads here, and what its weights are (trained, quantised, random)."""
    from interp.models import list_models

    rows = list_models()
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    head = ("SPEC", "LOADS HERE", "WEIGHTS", "DESCRIPTION", "SOURCE")
    table = [
        head,
        *(
            (r["spec"], ("yes" if r["available"] else "no") + _memory(r), r["weights"], r["description"], r["where"])
            for r in rows
        ),
    ]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths)) + "  " + row[4])
    typer.echo(
        "GGUF models are quantised: their activations are those of the dequantised weights (fp32), as "
        "model.provenance['quantization'] records.\n-init models are random-initialised shapes (tests, timing), "
        "not trained models.\nThe sizes in brackets are each model's fp32 weights, compared with this machine's "
        "memory.\nAny local HF folder or .gguf path also works as a spec (PATH@N loads step_N of "
        "a training run), and so does a Hugging Face hub id ORG/NAME[@REV] (through the HF cache; "
        "HF_HUB_OFFLINE=1: the cache only)."
    )


def _memory(row: dict) -> str:
    """ " (0.54 GB)": the memory the model's fp32 weights take, when known."""
    need = row.get("memory_gb")
    return f" ({need:.2g} GB)" if need is not None and need < 10 else f" ({need:.3g} GB)" if need is not None else ""


@app.command()
def cache(
    out: str = O.out(help="Store folder: created, or resumed when it holds a store of the same settings."),
    model: str = O.model(),
    hooks: list[str] = O.text(
        ["blocks.*.hook_resid_post"], "--hooks", help="Hook names or globs; repeat or comma-separate."
    ),
    threads: int | None = O.threads(),
    data: str = O.data(),
    max_tokens: int = O.max_tokens(65_536, help="Tokens to cache (whole sequences)."),
    ctx_len: int = O.integer(128, "--ctx-len", help="Tokens per sequence."),
    seqs_per_shard: int = O.integer(64, "--seqs-per-shard", help="Sequences per shard (one task each)."),
    batch_size: int = O.batch_size(16),
    dtype: str = O.text("float32", "--dtype", help="Storage dtype: float32, bfloat16, float16."),
    seed: int = O.seed(0, help="Corpus shuffling seed."),
    device: str = O.device(),
    executor: str = O.text("inprocess", "--executor", help="inprocess or ray."),
    ray_address: str | None = O.text(None, "--ray-address", help="Ray cluster address (default: start a local Ray)."),
    num_workers: int | None = O.integer(None, "--num-workers", help="Ray workers for a local Ray."),
    overwrite: bool = O.overwrite(),
    resume: bool = O.resume(),
    wait: bool = typer.Option(
        False, "--wait", help="If another run is writing to --out, wait for it to finish, then resume."
    ),
) -> None:
    """Cache activations of a model over a corpus into a sharded store (resumable; progress on stderr)."""
    folder = check_out_dir(out)
    O.set_threads(threads)
    from interp.cache.caching import CacheConfig, cache_activations

    names = O.hooks_list(hooks)
    cfg = CacheConfig(
        out=str(folder),
        model=model,
        hooks=names,
        data=data,
        max_tokens=max_tokens,
        ctx_len=ctx_len,
        seqs_per_shard=seqs_per_shard,
        batch_size=batch_size,
        dtype=dtype,
        seed=seed,
        device=device,
        executor=executor,
        ray_address=ray_address,
        num_workers=num_workers,
        wait=wait,
    )
    if (folder / "manifest.json").exists() and not resume and not overwrite:
        fail(
            f"{folder} already holds a store and --no-resume was given: pass --overwrite to start it over, "
            "or choose another --out"
        )
    from interp.store import StoreMismatchError

    try:
        _, report = cache_activations(cfg, overwrite=overwrite)
    except StoreMismatchError as exc:
        fail(f"{exc} Or pass --overwrite to replace it.")
    typer.echo(json.dumps(report, indent=1))


@app.command()
def inspect(
    store_path: str | None = typer.Argument(None, metavar="STORE", hidden=True, help="Store folder (as --store)."),
    store: str | None = O.path(None, "--store", help="Store folder."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Check every shard's sha256."),
) -> None:
    """Show a store's manifest (model, hooks, shapes, rows) and verify its shard hashes."""
    from interp.store import ActivationStore

    store = O.positional(store, store_path, "--store")

    st = ActivationStore.open(store)
    typer.echo(json.dumps(st.summary(), indent=1, default=str))
    if verify:
        report = st.verify()
        if not report.ok:
            fail(str(report))
        typer.echo(f"verified {len(st.shard_indices)} shards: all sha256 match")


@app.command()
def demo(
    model: str = O.model(),
    out: str = O.out("runs/demo", help="Work folder."),
    max_tokens: int = O.max_tokens(16_384, help="Tokens to cache."),
    device: str = O.device(),
    seed: int = O.seed(0, help="Seed of torch's generators."),
    threads: int | None = O.threads(),
) -> None:
    """The main job: cache a few hook points of the default model over a built-in corpus, then the families' steps."""
    check_out_dir(out)
    O.compute(threads, seed)
    if device not in ("auto", "cpu"):
        from interp.infra.devices import resolve_device

        resolve_device(device)  # refuses a CUDA that is not there, in one line
    from interp.demo import run_demo

    run_demo(model, out, max_tokens)


def main() -> None:  # pragma: no cover - console entry
    app(prog_name="interp")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
