"""`interp circuits`: extract a circuit from a checkpoint, ablate it, draw it.

    interp circuits extract --checkpoint runs/circuits/sparse_vs_dense/models/sparse --task quotes --method prune --out circuit.json
    interp circuits ablate --circuit circuit.json --checkpoint runs/circuits/sparse_vs_dense/models/sparse
    interp circuits show circuit.json --out graph.html
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Circuits: SafeSeek masks, weight-sparse pruning.")


def fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _threads(n: int | None) -> None:
    if n:
        import torch

        torch.set_num_threads(n)


@app.command()
def extract(
    checkpoint: str = typer.Option(..., help="HF folder, .safetensors (config.json beside it) or .gguf file."),
    task: str = typer.Option(..., help="quotes, brackets, backdoor or refusal."),
    out: str = typer.Option(..., help="Circuit JSON to write."),
    method: str = typer.Option("prune", help="safeseek (masks, zero ablation) or prune (node masks, mean ablation)."),
    target_loss: float = typer.Option(0.15, help="prune: task loss (nats) the circuit must reach."),
    steps: Optional[int] = typer.Option(None, help="Mask-training steps (default: safeseek 300, prune 300 per lambda)."),
    lambda_steps: int = typer.Option(3, help="prune: bisection steps over lambda."),
    objective: str = typer.Option("auto", help="safeseek: auto, backdoor or alignment."),
    head_mode: str = typer.Option("true", help="safeseek: true (per-head, before W_O) or compat (official code's slices)."),
    backdoor_weights: str = typer.Option("head-code", help="safeseek backdoor: head-code (only G) or neuron-code (G and H)."),
    seed: int = typer.Option(0, help="Data and mask seed."),
    device: str = typer.Option("cpu", help="cpu or cuda."),
    allow_torch_load: bool = typer.Option(False, help="Read a pickle checkpoint with torch.load(weights_only=True)."),
    overwrite: bool = typer.Option(False, help="Replace an existing --out file."),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (1 is fastest for tiny models on a busy machine)."),
) -> None:
    """Find the circuit of a task in a checkpoint and write it as circuit JSON."""
    _threads(threads)
    from circuits.checkpoint import CheckpointError, load_checkpoint
    from circuits.tasks import get_task

    if method not in ("safeseek", "prune"):
        fail(f"unknown method {method!r}; use safeseek or prune")
    if Path(out).exists() and not overwrite:
        fail(f"{out} exists; pass --overwrite to replace it")
    try:
        the_task = get_task(task)
        if method == "safeseek":
            from circuits.safeseek import HEAD_CODE_WEIGHTS, NEURON_CODE_WEIGHTS, SafeSeekConfig

            weights = {"head-code": HEAD_CODE_WEIGHTS, "neuron-code": NEURON_CODE_WEIGHTS}
            if backdoor_weights not in weights:
                fail(f"unknown --backdoor-weights {backdoor_weights!r}; use head-code or neuron-code")
            cfg = SafeSeekConfig(objective=objective, head_mode=head_mode, seed=seed, backdoor_weights=weights[backdoor_weights],
                                 **({"steps": steps} if steps else {}))
        else:
            from circuits.prune import PruneConfig

            cfg = PruneConfig(target_loss=target_loss, lambda_steps=lambda_steps, seed=seed, **({"steps": steps} if steps else {}))
        model = load_checkpoint(checkpoint, device=device, allow_torch_load=allow_torch_load)
    except (ValueError, FileNotFoundError, CheckpointError) as exc:
        fail(str(exc))
    if method == "safeseek":
        from circuits.safeseek import safeseek

        try:
            circuit = safeseek(model, the_task, cfg).circuit
        except ValueError as exc:
            fail(str(exc))
    else:
        from circuits.prune import TargetNotReached, prune

        try:
            circuit = prune(model, the_task, cfg)
        except TargetNotReached as exc:
            exc.best.provenance["checkpoint"] = str(checkpoint)
            exc.best.save(out)
            fail(f"{exc} The best circuit found so far is saved in {out}.")
    circuit.provenance["checkpoint"] = str(checkpoint)
    circuit.save(out)
    summary = {k: v for k, v in circuit.metrics.items() if not isinstance(v, (list, dict))}
    typer.echo(json.dumps({"out": out, **summary}, indent=1))


@app.command()
def ablate(
    circuit: str = typer.Option(..., help="Circuit JSON."),
    checkpoint: str = typer.Option(..., help="The checkpoint the circuit was found in."),
    task: Optional[str] = typer.Option(None, help="Task (default: the circuit's)."),
    n: int = typer.Option(200, help="Prompts to evaluate."),
    n_random: int = typer.Option(5, help="Random ablations of the same size."),
    seed: int = typer.Option(123, help="Prompt and random-ablation seed."),
    device: str = typer.Option("cpu"),
    allow_torch_load: bool = typer.Option(False, help="Read a pickle checkpoint with torch.load(weights_only=True)."),
    ablation: str = typer.Option("zero", help="zero, or mean (each unit's mean activation over the task prompts)."),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads."),
) -> None:
    """Task metric with the circuit ablated against random ablations of the same size."""
    _threads(threads)
    from circuits.ablation import ablation_report
    from circuits.checkpoint import CheckpointError, load_checkpoint
    from circuits.format import Circuit
    from circuits.tasks import get_task

    try:
        c = Circuit.load(circuit)
        the_task = get_task(task or c.provenance.get("task", ""))
        model = load_checkpoint(checkpoint, device=device, allow_torch_load=allow_torch_load)
        batch = the_task.make(n, seed, model.tokenizer)
        clean = the_task.make_clean(n, seed, model.tokenizer) if the_task.generate_clean else None
        if ablation not in ("zero", "mean"):
            raise ValueError(f"unknown --ablation {ablation!r}; use zero or mean")
        means = None
        if ablation == "mean":
            from circuits.masks import site_means, sites_of

            kinds = sorted({node.kind for node in c.nodes})
            means = site_means(model, sites_of(model, kinds), [(batch.ids, batch.mask)]) if kinds else None
        report = ablation_report(model, c.nodes, batch, n_random=n_random, seed=seed, clean=clean, means=means)
        report["ablation"] = ablation
    except (ValueError, FileNotFoundError, CheckpointError) as exc:
        fail(str(exc))
    report["random"].pop("runs")
    typer.echo(json.dumps({"task": the_task.name, **report}, indent=1))


@app.command()
def show(
    file: str = typer.Argument(..., help="Circuit JSON."),
    out: str = typer.Option("circuit.html", help="HTML file to write (plotly.js embedded)."),
) -> None:
    """Draw a circuit as a self-contained HTML graph."""
    from circuits.format import Circuit
    from circuits.graph import write_html

    try:
        c = Circuit.load(file)
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    path = write_html(c, out)
    typer.echo(f"wrote {path} ({len(c.nodes)} nodes, {len(c.edges)} edges)")


if __name__ == "__main__":  # pragma: no cover - `python -m circuits.cli ...` before the entry point is installed
    app()
