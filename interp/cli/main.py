"""The `interp` command: models, cache, inspect, demo; families add their own sub-commands.

    interp models
    interp cache --model smollm2-135m --hooks 'blocks.15.hook_resid_post' --data stdlib-docs --max-tokens 65536 --out runs/acts
    interp inspect runs/acts
    interp demo
"""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from interp.cli.plugins import add_family_commands

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.splitlines()[0])


def fail(exc: Exception) -> None:
    """Print a clear one-line error (no traceback) and exit with status 2."""
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


@app.command()
def models(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """List the model specs and whether each can be loaded on this machine."""
    from interp.models import list_models

    rows = list_models()
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    for r in rows:
        mark = "yes" if r["available"] else "no "
        typer.echo(f"{r['spec']:<14} {mark}  {r['description']}  [{r['where']}]")
    typer.echo("Any local HF folder or .gguf path also works as a spec (PATH@N loads step_N of a training run).")


@app.command()
def cache(
    out: str = typer.Option(..., help="Store folder (created, or resumed if it holds a store of the same settings)."),
    model: str = typer.Option("smollm2-135m", help="Model spec (see `interp models`)."),
    hooks: list[str] = typer.Option(["blocks.*.hook_resid_post"], help="Hook names or globs; repeat or comma-separate."),
    data: str = typer.Option("stdlib-docs", help="Corpus: stdlib-docs, stdlib, usr-share-doc, file:PATH, dir:PATH, synthetic:repeat."),
    max_tokens: int = typer.Option(65_536, help="Tokens to cache (whole sequences)."),
    ctx_len: int = typer.Option(128, help="Tokens per sequence."),
    seqs_per_shard: int = typer.Option(64, help="Sequences per shard (one task each)."),
    batch_size: int = typer.Option(16, help="Sequences per forward pass."),
    dtype: str = typer.Option("float32", help="Storage dtype: float32, bfloat16, float16."),
    seed: int = typer.Option(0, help="Corpus shuffling seed."),
    device: str = typer.Option("cpu", help="cpu or cuda."),
    executor: str = typer.Option("inprocess", help="inprocess or ray."),
    ray_address: Optional[str] = typer.Option(None, help="Ray cluster address (default: start a local Ray)."),
    num_workers: Optional[int] = typer.Option(None, help="Ray workers for a local Ray."),
) -> None:
    """Cache activations of a model over a corpus into a sharded store (resumable; progress on stderr)."""
    from interp.caching import CacheConfig, cache_activations

    names = [h.strip() for item in hooks for h in item.split(",") if h.strip()]
    try:
        cfg = CacheConfig(out=out, model=model, hooks=names, data=data, max_tokens=max_tokens, ctx_len=ctx_len,
                          seqs_per_shard=seqs_per_shard, batch_size=batch_size, dtype=dtype, seed=seed,
                          device=device, executor=executor, ray_address=ray_address, num_workers=num_workers)
        _, report = cache_activations(cfg)
    except (ValueError, FileNotFoundError, FileExistsError) as exc:
        fail(exc)
    typer.echo(json.dumps(report, indent=1))


@app.command()
def inspect(
    store: str = typer.Argument(..., help="Store folder."),
    verify: bool = typer.Option(True, help="Check every shard's sha256."),
) -> None:
    """Show a store's manifest (model, hooks, shapes, rows) and verify its shard hashes."""
    from interp.store import ActivationStore

    try:
        st = ActivationStore.open(store)
        summary = st.summary()
        typer.echo(json.dumps(summary, indent=1, default=str))
        if verify:
            report = st.verify()
            if not report.ok:
                fail(ValueError(str(report)))
            typer.echo(f"verified {len(st.shard_indices)} shards: all sha256 match")
    except (ValueError, FileNotFoundError) as exc:
        fail(exc)


@app.command()
def demo(
    model: str = typer.Option("smollm2-135m", help="Model spec."),
    out: str = typer.Option("runs/demo", help="Work folder."),
    max_tokens: int = typer.Option(16_384, help="Tokens to cache."),
) -> None:
    """The main job: cache a few hook points of the default model over a built-in corpus, then the families' steps."""
    from interp.demo import run_demo

    try:
        run_demo(model, out, max_tokens)
    except (ValueError, FileNotFoundError) as exc:
        fail(exc)


def add_core_commands(app: typer.Typer) -> None:
    """Core commands that live in their own modules (`interp/cli/<name>.py`, each with `register(app)`)."""
    import importlib

    for name in CORE_COMMANDS:
        try:
            module = importlib.import_module(f"interp.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"interp.cli.{name}":
                raise
            continue
        module.register(app)


CORE_COMMANDS = ("probe", "dashboard", "contrib")
add_core_commands(app)
add_family_commands(app)


def main() -> None:  # pragma: no cover - console entry
    app(prog_name="interp")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
