"""`interp attribute ...`: sharded, resumable attribution jobs (see `attribution.jobs`).

    interp attribute --method sdi --model looped-gpt:runs/loop --train tokens:train.safetensors \\
        --queries tokens:queries.safetensors --out runs/sdi [--executor ray] [--ray-address auto]

Entry point: `attribution.cli:app` (a `typer.Typer` with one command).
"""

from __future__ import annotations

import json

import typer

from attribution.jobs import AttributeConfig, run_attribution

app = typer.Typer(help="Training-data attribution: TracIn, SDI (looped models), EK-FAC (MDA), DRA.",
                  add_completion=False, no_args_is_help=True)


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


@app.command("attribute")
def attribute(
    method: str = typer.Option(..., help="tracin | sdi | ekfac | dra"),
    model: str = typer.Option(..., help="Model spec, e.g. looped-gpt:runs/loop, pythia-14m:PATH, a local folder"),
    train: str = typer.Option(..., help="Training data: tokens:PATH.safetensors or a corpus spec (stdlib-docs, file:PATH, ...)"),
    queries: str = typer.Option(..., help="Query data (DRA: unsafe targets), same forms as --train"),
    out: str = typer.Option(..., help="Output folder; a rerun with the same settings resumes"),
    checkpoints: str = typer.Option("", help="TracIn/SDI: comma-separated checkpoint folders, or one run folder"),
    lrs: str = typer.Option("", help="TracIn/SDI: comma-separated learning rate per checkpoint (default: training_state.json)"),
    sketch_dim: int = typer.Option(2048, help="TensorSketch size per parameter tensor; 0 = exact gradients"),
    modules: str = typer.Option("", help="TracIn/DRA-gradient: comma-separated module-name globs"),
    component: str = typer.Option("L0H0:qk", help="EK-FAC: head component L<layer>H<head>[:qk|qkv|qkvo]"),
    probe: str = typer.Option("queries", help="EK-FAC measurement: queries | copy | prev"),
    fit_samples: int = typer.Option(64, help="EK-FAC: training sequences used to fit the factors"),
    representation: str = typer.Option("hidden", help="DRA: hidden | gradient"),
    hook: str = typer.Option("", help="DRA hidden states: hook name (default: middle hook_resid_post)"),
    raw: bool = typer.Option(False, "--raw", help="DRA: no denoising (the raw-similarity baseline)"),
    ctx_len: int = typer.Option(64, help="Tokens per sequence for corpus specs"),
    max_train: int = typer.Option(256, help="Training sequences from a corpus spec"),
    max_queries: int = typer.Option(8, help="Query sequences from a corpus spec"),
    shard_size: int = typer.Option(64, help="Training rows per shard (one task)"),
    batch_size: int = typer.Option(16, help="Sequences per forward/backward"),
    seed: int = typer.Option(0, help="Sketch hashes, corpus shuffling, label sampling"),
    device: str = typer.Option("auto", help="cpu | cuda | auto"),
    executor: str = typer.Option("inprocess", help="inprocess | ray"),
    ray_address: str = typer.Option(None, help="Ray cluster address; default: start a local Ray"),
    num_workers: int = typer.Option(None, help="Ray workers for a local Ray"),
) -> None:
    """Score every training sequence against every query; write a resumable attribution store."""
    try:
        cfg = AttributeConfig(
            method=method, model=model, train=train, queries=queries, out=out, checkpoints=_split(checkpoints),
            lrs=[float(x) for x in _split(lrs)] or None, sketch_dim=sketch_dim, modules=_split(modules),
            component=component, probe=probe, fit_samples=fit_samples, representation=representation, hook=hook,
            denoise=not raw, ctx_len=ctx_len, max_train=max_train, max_queries=max_queries, shard_size=shard_size,
            batch_size=batch_size, seed=seed, device=device, executor=executor, ray_address=ray_address,
            num_workers=num_workers)
        summary = run_attribution(cfg)
    except (ValueError, FileNotFoundError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(summary, indent=1))


def register(app_: typer.Typer) -> None:
    """Add `attribute` to another Typer app (e.g. the core `interp` CLI)."""
    app_.command("attribute")(attribute)
