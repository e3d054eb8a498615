"""`interp circuits`: measure a task, extract its circuit from any model, ablate it, draw and export it.

interp circuits baseline --model smollm2-135m --task ioi
interp circuits extract --model smollm2-135m --task ioi --method eap-ig --top 200 --out runs/ioi
interp circuits extract --model runs/my_model@2000 --task prompts:my_pairs.jsonl --method eap --out runs/mine
interp circuits ablate --circuit runs/ioi/circuit.json --model smollm2-135m
interp circuits curve --model smollm2-135m --task ioi --method eap-ig --seeds 3 --out runs/ioi_curve
interp circuits show --circuit runs/ioi/circuit.json --out-file graph.html
interp circuits export --circuit runs/ioi/circuit.json --out ct_data          # circuit-tracer's data folder
interp circuits features --model smollm2-135m --task ioi --sae DIR --sae DIR --out runs/ioi_features  # SAE latents
interp circuits graph --model smollm2-135m --transcoders DIR --prompt "The capital of France is" --out runs/graph
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Circuits: EAP / EAP-IG edges, SafeSeek masks, weight-sparse pruning.",
)

MODEL_HELP = "Model: a spec (smollm2-135m), an HF folder, a .gguf or .safetensors file, or PATH@N (step_N of a run)."
TASK_HELP = (
    "ioi, greater-than, capital, python-close (real models); quotes, brackets, backdoor, refusal (toys); "
    "or prompts:FILE.jsonl with rows {clean, corrupt, answer, wrong} or {prompt, answer}."
)


def fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _threads(n: int | None) -> None:
    from interp.cli.options import set_threads

    set_threads(n)


def _out_file(out: str, name: str) -> Path:
    """--out is a folder (the toolkit's convention); a path ending in .json is taken as the file itself."""
    p = Path(out)
    return p if p.suffix == ".json" else p / name


def _hold(writing: ExitStack, folder: str | Path) -> None:
    """Hold the writer lock of output folder `folder` until `writing` closes: a second writer into it is refused,
    naming the holder, instead of racing it; a killed run's temporary files there are removed."""
    from interp.store.errors import StoreLockedError
    from interp.store.lock import holding

    try:
        writing.enter_context(holding(folder, "the output folder"))
    except StoreLockedError as exc:
        fail(str(exc))


def _load(model: str | None, checkpoint: str | None, device: str, allow_torch_load: bool):
    from circuits.model.checkpoint import load_checkpoint

    if checkpoint and not model:
        from interp.cli.options import warn_deprecated

        warn_deprecated("--checkpoint", "--model")
    spec = model or checkpoint
    if not spec:
        fail("give the model with --model SPEC|PATH|PATH@N")
    return load_checkpoint(spec, device=device, allow_torch_load=allow_torch_load)


@app.command()
def baseline(
    model: str | None = typer.Option(None, "--model", help=MODEL_HELP, metavar="SPEC"),
    task: str = typer.Option(..., help=TASK_HELP, metavar="TEXT"),
    metric: str = typer.Option("auto", help="logit-diff, prob, kl, or auto (the task's default)."),
    n: int = typer.Option(64, "--max-rows", help="Prompt rows to measure.", metavar="INT"),
    n_old: int | None = typer.Option(None, "--n", hidden=True),
    seed: int = typer.Option(0),
    device: str = typer.Option(
        "auto", metavar="auto|cpu|cuda[:N]", help="Where the model runs: auto (CUDA when present), cpu, cuda or cuda:N."
    ),
    allow_torch_load: bool = typer.Option(False, help="Read a pickle checkpoint with torch.load(weights_only=True)."),
    threads: int | None = typer.Option(None, help="torch CPU threads."),
) -> None:
    """The model's behaviour on a task (metric on clean and corrupted prompts, accuracy), before any circuit."""
    _threads(threads)
    from circuits.finders.extract import ExtractConfig, task_baseline
    from circuits.model.checkpoint import CheckpointError
    from circuits.tasks.binary import get_task
    from interp.cli.options import deprecated

    n = deprecated(n_old, "--n", "--max-rows", n, 64)

    try:
        the_task = get_task(task)
        cfg = ExtractConfig(method="activation-diff", budget=1, metric=metric, ablation="zero", n_prompts=n, seed=seed)
        m = _load(model, None, device, allow_torch_load)
        report, _ = task_baseline(m, the_task, cfg)
    except (ValueError, FileNotFoundError, CheckpointError) as exc:
        fail(str(exc))
    typer.echo(json.dumps(report, indent=1))


@app.command()
def extract(
    task: str = typer.Option(..., help=TASK_HELP, metavar="TEXT"),
    out: str = typer.Option(
        ..., help="Folder to write circuit.json into (a path ending in .json: that file).", metavar="DIR"
    ),
    model: str | None = typer.Option(None, "--model", help=MODEL_HELP, metavar="SPEC"),
    checkpoint: str | None = typer.Option(None, "--checkpoint", hidden=True, help="Old name of --model."),
    method: str = typer.Option(
        "eap-ig", help="eap, eap-ig (edges); prune, safeseek (unit masks); activation-diff (control)."
    ),
    metric: str = typer.Option("auto", help="logit-diff, prob, kl, or auto (the task's default)."),
    ablation: str = typer.Option(
        "auto",
        help="zero, mean, corrupt, or auto (the method's paper default: eap corrupt, "
        "prune mean, safeseek zero). Recorded in the circuit; `ablate` reuses it.",
    ),
    top_n: int | None = typer.Option(
        None, "--top", help="Edge methods: keep the top N edges by |score| (default 200).", metavar="INT"
    ),
    top_n_old: int | None = typer.Option(None, "--top-n", hidden=True),
    threshold: float | None = typer.Option(None, help="Edge methods: keep edges with |score| >= this."),
    positions: bool = typer.Option(
        False, "--positions", help="eap/eap-ig: nodes per token position (prompts of one length); default summed."
    ),
    ig_steps: int = typer.Option(5, help="eap-ig: interpolation steps.", metavar="INT"),
    n_prompts: int = typer.Option(
        64, "--max-rows", help="Prompt rows for the baseline and edge scores.", metavar="INT"
    ),
    n_prompts_old: int | None = typer.Option(None, "--n-prompts", hidden=True),
    budget: int | None = typer.Option(None, help="activation-diff: number of units to keep.", metavar="INT"),
    min_accuracy: float = typer.Option(0.7, help="Refuse a task the model does with lower accuracy than this."),
    target_loss: float = typer.Option(0.15, help="prune: task loss (nats) the circuit must reach."),
    steps: int | None = typer.Option(None, help="prune/safeseek: mask-training steps.", metavar="INT"),
    lambda_steps: int = typer.Option(3, help="prune: bisection steps over lambda."),
    objective: str = typer.Option("auto", help="safeseek: auto, backdoor or alignment."),
    head_mode: str = typer.Option(
        "true", help="safeseek: true (per-head, before W_O) or compat (official code's slices)."
    ),
    backdoor_weights: str = typer.Option(
        "head-code", help="safeseek backdoor: head-code (only G) or neuron-code (G and H)."
    ),
    seed: int = typer.Option(0, help="Data and mask seed."),
    device: str = typer.Option(
        "auto", metavar="auto|cpu|cuda[:N]", help="Where the model runs: auto (CUDA when present), cpu, cuda or cuda:N."
    ),
    allow_torch_load: bool = typer.Option(False, help="Read a pickle checkpoint with torch.load(weights_only=True)."),
    overwrite: bool = typer.Option(False, help="Replace an existing circuit file."),
    threads: int | None = typer.Option(None, help="torch CPU threads."),
) -> None:
    """Report the model's baseline on the task, then find the task's circuit and write it as circuit JSON."""
    _threads(threads)
    from circuits.evaluation.baseline import TaskTooHard
    from circuits.finders.extract import ExtractConfig
    from circuits.model.checkpoint import CheckpointError
    from circuits.tasks.binary import get_task

    with ExitStack() as writing:
        path = _out_file(out, "circuit.json")
        if Path(out).suffix != ".json":  # the folder form (a path ending in .json is a file in a folder of the user)
            _hold(writing, out)
        if path.exists() and not overwrite:
            fail(f"{path} exists; pass --overwrite to replace it")
        from interp.cli.options import deprecated

        n_prompts = deprecated(n_prompts_old, "--n-prompts", "--max-rows", n_prompts, 64)
        top_n = deprecated(top_n_old, "--top-n", "--top", top_n, None)
        try:
            the_task = get_task(task)
            cfg = ExtractConfig(
                method=method,
                metric=metric,
                ablation=ablation,
                n_prompts=n_prompts,
                top_n=top_n,
                threshold=threshold,
                ig_steps=ig_steps,
                positions=positions,
                budget=budget,
                min_accuracy=min_accuracy,
                seed=seed,
            )
            finder_cfg = _finder_config(cfg, target_loss, steps, lambda_steps, objective, head_mode, backdoor_weights)
            m = _load(model, checkpoint, device, allow_torch_load)
        except (ValueError, FileNotFoundError, CheckpointError) as exc:
            fail(str(exc))
        from circuits.finders.prune import TargetNotReached

        try:
            result = _run(m, the_task, cfg, finder_cfg)
        except TaskTooHard as exc:
            fail(str(exc))
        except TargetNotReached as exc:
            if exc.best is None:
                fail(str(exc))
            exc.best.provenance["model_spec"] = model or checkpoint
            exc.best.save(path)
            fail(f"{exc} The best circuit found so far is saved in {path}.")
        except ValueError as exc:
            fail(str(exc))
        circuit = result["circuit"]
        circuit.provenance["model_spec"] = model or checkpoint
        circuit.save(path)
        summary = {k: v for k, v in circuit.metrics.items() if not isinstance(v, (list, dict))}
    typer.echo(json.dumps({"out": str(path), **summary}, indent=1))


def _finder_config(cfg, target_loss, steps, lambda_steps, objective, head_mode, backdoor_weights):
    if cfg.method == "prune":
        from circuits.finders.prune import PruneConfig

        return PruneConfig(
            target_loss=target_loss,
            lambda_steps=lambda_steps,
            seed=cfg.seed,
            ablation=cfg.ablation,
            **({"steps": steps} if steps else {}),
        )
    if cfg.method == "safeseek":
        from circuits.finders.safeseek import HEAD_CODE_WEIGHTS, NEURON_CODE_WEIGHTS, SafeSeekConfig

        weights = {"head-code": HEAD_CODE_WEIGHTS, "neuron-code": NEURON_CODE_WEIGHTS}
        if backdoor_weights not in weights:
            raise ValueError(f"unknown --backdoor-weights {backdoor_weights!r}; use head-code or neuron-code")
        return SafeSeekConfig(
            objective=objective,
            head_mode=head_mode,
            seed=cfg.seed,
            ablation=cfg.ablation,
            backdoor_weights=weights[backdoor_weights],
            **({"steps": steps} if steps else {}),
        )
    return None


def _run(model, task, cfg, finder_cfg) -> dict:
    """Baseline (printed at once on stderr), ability check, then the finder."""
    from circuits.finders.extract import extract as run_extract

    def show(report):
        typer.echo("baseline: " + json.dumps(report), err=True)

    if finder_cfg is None:
        return run_extract(model, task, cfg, on_baseline=show)
    from circuits.evaluation.baseline import require_ability
    from circuits.finders.extract import task_baseline

    base, _ = task_baseline(model, task, cfg)
    show(base)
    require_ability(base, task.name, cfg.min_accuracy)
    if cfg.method == "prune":
        from circuits.finders.prune import prune

        circuit = prune(model, task, finder_cfg)
    else:
        from circuits.finders.safeseek import safeseek

        circuit = safeseek(model, task, finder_cfg).circuit
    circuit.metrics["baseline"] = base
    return {"baseline": base, "circuit": circuit}


@app.command()
def ablate(
    circuit: str = typer.Option(..., help="Circuit JSON.", metavar="PATH"),
    model: str | None = typer.Option(None, "--model", help=MODEL_HELP, metavar="SPEC"),
    checkpoint: str | None = typer.Option(None, "--checkpoint", hidden=True, help="Old name of --model."),
    task: str | None = typer.Option(None, help="Task (default: the circuit's).", metavar="TEXT"),
    n: int = typer.Option(200, "--max-rows", help="Prompts to evaluate.", metavar="INT"),
    n_old: int | None = typer.Option(None, "--n", hidden=True),
    n_random: int = typer.Option(
        20, help="Random circuits of the same size (the distribution is reported).", metavar="INT"
    ),
    seed: int = typer.Option(123, help="Prompt and random-draw seed."),
    device: str = typer.Option(
        "auto", metavar="auto|cpu|cuda[:N]", help="Where the model runs: auto (CUDA when present), cpu, cuda or cuda:N."
    ),
    allow_torch_load: bool = typer.Option(False, help="Read a pickle checkpoint with torch.load(weights_only=True)."),
    ablation: str = typer.Option("auto", help="zero, mean, corrupt, or auto: the ablation the circuit was found with."),
    threads: int | None = typer.Option(None, help="torch CPU threads."),
) -> None:
    """Necessity (circuit ablated) and sufficiency (only the circuit kept), against random circuits of its size."""
    _threads(threads)
    from circuits.evaluation.ablation import check_ablation
    from circuits.format.circuit import Circuit, check_circuit_model
    from circuits.model.checkpoint import CheckpointError
    from circuits.tasks.binary import get_task
    from interp.cli.options import deprecated

    n = deprecated(n_old, "--n", "--max-rows", n, 200)
    if n < 1 or n_random < 0:
        fail(f"--max-rows must be >= 1 and --n-random >= 0, got {n} and {n_random}")

    try:
        c = Circuit.load(circuit)
        method = c.provenance.get("method", "")
        kind = (
            c.provenance.get("ablation") or check_ablation("auto", method)
            if ablation == "auto"
            else check_ablation(ablation, method)
        )
        the_task = get_task(task or c.provenance.get("task", ""))
        m = _load(model, checkpoint, device, allow_torch_load)
        note = check_circuit_model(c, m)
        if note:
            import logging

            logging.getLogger(__name__).warning(note.removeprefix("warning: "))
        if "graph" in c.extra:
            from circuits.evaluation.faithfulness import edge_circuit_report

            report = edge_circuit_report(m, c, the_task, n=n, seed=seed, ablation=kind, n_random=n_random)
        else:
            report = _node_report(m, c, the_task, n, seed, n_random, kind)
    except (ValueError, FileNotFoundError, CheckpointError) as exc:
        fail(str(exc))
    typer.echo(json.dumps({"task": the_task.name, "ablation": kind, **report}, indent=1))


def _node_report(model, c, task, n, seed, n_random, ablation) -> dict:
    from circuits.evaluation.ablation import ablation_report

    batch = task.make(n, seed, model.tokenizer)
    clean = task.make_clean(n, seed, model.tokenizer) if task.generate_clean else None
    kinds = sorted(set(c.provenance.get("config", {}).get("kinds") or ()) | {node.kind for node in c.nodes})
    means = None
    if ablation == "mean":
        from circuits.finders.masks import site_means, sites_of

        means = site_means(model, sites_of(model, kinds), [(batch.ids, batch.mask)]) if kinds else None
    report = ablation_report(model, c.nodes, batch, n_random=n_random, seed=seed, clean=clean, means=means, kinds=kinds)
    for key in ("random_necessity", "random_sufficiency"):
        if report.get(key):
            report[key]["runs"] = [round(r["metric"], 4) for r in report[key]["runs"]]
    report.pop("circuit", None)
    return report


@app.command()
def curve(
    out: str = typer.Option(
        ..., metavar="DIR", help="Folder to write curve.json, curve.md (the table) and curve.html (the plot) into."
    ),
    model: str | None = typer.Option(
        None, "--model", help=MODEL_HELP + " --quick without it: a tiny random model.", metavar="SPEC"
    ),
    task: str | None = typer.Option(None, help=TASK_HELP + " (--quick: quotes)", metavar="TEXT"),
    method: str = typer.Option("eap-ig", help="eap, eap-ig (sizes in edges); safeseek, prune (sizes in heads)."),
    sizes: str = typer.Option(
        "",
        help="Comma-separated circuit sizes (edges or heads); default a log grid; 'mib': MIB's grid (0.1%-100% of "
        "the graph), on which CPR/CMD are MIB's own.",
        metavar="N,N,...|mib",
    ),
    seeds: int = typer.Option(3, help="Seeds: each scores the method on its own sample of the scoring rows."),
    control_draws: int = typer.Option(
        5, help="Draws of each random control, each nested across sizes (intervals over draws and rows).", metavar="INT"
    ),
    n_prompts: int = typer.Option(
        16, "--max-rows", help="Scoring rows each seed scores the method on (never evaluation rows).", metavar="INT"
    ),
    n_prompts_old: int | None = typer.Option(None, "--n-prompts", hidden=True),
    seed: int = typer.Option(
        0, "--seed", help="Seed of torch's generators (each of --seeds draws its own data).", metavar="INT"
    ),
    n_eval: int = typer.Option(
        16,
        help="Evaluation rows every circuit is evaluated on (bootstrapped), split off the task's rows.",
        metavar="INT",
    ),
    eval_file: str | None = typer.Option(
        None, "--eval-file", help="Evaluation rows from this prompts file instead (JSONL).", metavar="FILE"
    ),
    n_boot: int = typer.Option(1000, help="Bootstrap resamples of the held-out rows.", metavar="INT"),
    metric: str = typer.Option("auto", help="logit-diff, prob, kl, or auto (the task's default)."),
    ablation: str = typer.Option("corrupt", help="corrupt, mean or zero: how edges outside the circuit are ablated."),
    ig_steps: int = typer.Option(5, help="eap-ig: interpolation steps.", metavar="INT"),
    steps: int = typer.Option(30, help="safeseek/prune: mask-training steps.", metavar="INT"),
    quick: bool = typer.Option(False, help="A small run that checks everything works (tiny model, 2 seeds, 8 rows)."),
    device: str = typer.Option(
        "auto", metavar="auto|cpu|cuda[:N]", help="Where the model runs: auto (CUDA when present), cpu, cuda or cuda:N."
    ),
    allow_torch_load: bool = typer.Option(False, help="Read a pickle checkpoint with torch.load(weights_only=True)."),
    threads: int | None = typer.Option(None, help="torch CPU threads."),
) -> None:
    """Faithfulness and complement vs circuit size, against nested random and random-connected circuits (95%
    intervals), on evaluation rows that are never scoring rows; MIB's CPR and CMD of each series."""
    from interp.cli.options import compute, deprecated, sizes_list

    compute(threads, seed)
    n_prompts = deprecated(n_prompts_old, "--n-prompts", "--max-rows", n_prompts, 16)
    from circuits.evaluation.curve import CurveConfig, curve_table, faithfulness_curve
    from circuits.format.curve_plot import write_curve_html
    from circuits.model.checkpoint import CheckpointError
    from circuits.tasks.binary import get_task

    try:
        mib = sizes.strip().lower() == "mib"
        size_list = () if mib else sizes_list(sizes)  # before the lock: a refused run writes nothing
        if eval_file is not None and not Path(eval_file).is_file():
            raise ValueError(f"no prompts file at {eval_file} (--eval-file)")
    except ValueError as exc:
        fail(str(exc))
    with ExitStack() as writing:
        _hold(writing, out)
        try:
            if quick:
                seeds, control_draws, n_prompts, n_eval, n_boot, ig_steps, steps = (
                    min(seeds, 2),
                    min(control_draws, 2),
                    min(n_prompts, 8),
                    min(n_eval, 8),
                    min(n_boot, 200),
                    min(ig_steps, 2),
                    min(steps, 5),
                )
            cfg = CurveConfig(
                method=method,
                sizes=size_list,
                mib_grid=mib,
                n_prompts=n_prompts,
                n_eval=n_eval,
                eval_file=eval_file,
                seeds=seeds,
                control_draws=control_draws,
                n_boot=n_boot,
                metric=metric,
                ablation=ablation,
                ig_steps=ig_steps,
                node_steps=steps,
            )
            the_task = get_task(task or ("quotes" if quick else ""))
            if quick and not model:
                from circuits.finders.weight_sparse import WeightSparseConfig, build_model
                from interp.infra.devices import resolve_device

                dev = resolve_device(device)  # checked here too: the tiny model does not go through _load
                m = build_model(WeightSparseConfig(d_model=32, n_layers=2, n_heads=4, d_mlp=64, steps=1))
                m.hf_model.to(dev)
            else:
                m = _load(model, None, device, allow_torch_load)
            result = faithfulness_curve(m, the_task, cfg, progress=lambda msg: typer.echo(msg, err=True))
        except (ValueError, FileNotFoundError, CheckpointError) as exc:
            fail(str(exc))
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        result["model_spec"] = model or ("tiny random gpt_neox (--quick)" if quick else None)
        (folder / "curve.json").write_text(json.dumps(result, indent=1, default=str))
        table = curve_table(result)
        (folder / "curve.md").write_text(table + "\n")
        write_curve_html(result, folder / "curve.html")
    typer.echo(table)
    typer.echo(f"wrote {folder / 'curve.json'}, {folder / 'curve.md'} and {folder / 'curve.html'}")


@app.command()
def show(
    file_arg: str | None = typer.Argument(None, metavar="CIRCUIT", hidden=True, help="Circuit JSON (as --circuit)."),
    circuit: str | None = typer.Option(None, "--circuit", help="Circuit JSON.", metavar="PATH"),
    out: str = typer.Option(
        "circuit.html", "--out-file", help="HTML file to write (plotly.js embedded).", metavar="PATH"
    ),
    top_k: int = typer.Option(
        200, "--top", help="Edges shown at first (a slider in the page changes it).", metavar="INT"
    ),
    out_old: str | None = typer.Option(None, "--out", hidden=True),
    top_k_old: int | None = typer.Option(None, "--top-k", hidden=True),
) -> None:
    """Draw a circuit (or a feature circuit from `features`) as a self-contained interactive HTML graph."""
    from circuits.format.feature_circuit import load_drawable
    from circuits.format.graph_html import write_html
    from interp.cli.errors import check_out_file
    from interp.cli.options import deprecated, positional

    try:
        file = positional(circuit, file_arg, "--circuit")
        out = deprecated(out_old, "--out FILE", "--out-file", out, "circuit.html")
        top_k = deprecated(top_k_old, "--top-k", "--top", top_k, 200)
        check_out_file(out)  # the page's path first: a folder there is named as the user gave it
        c = load_drawable(file)
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    path = write_html(c, out, top_k=top_k)
    typer.echo(f"wrote {path} ({len(c.nodes)} nodes, {len(c.edges)} edges)")


@app.command()
def export(
    file_arg: str | None = typer.Argument(None, metavar="CIRCUIT", hidden=True, help="Circuit JSON (as --circuit)."),
    circuit: str | None = typer.Option(None, "--circuit", help="Circuit JSON.", metavar="PATH"),
    out: str | None = typer.Option(
        None,
        help="circuit-tracer's data folder (graph-metadata.json + <slug>.json; its `serve` reads it).",
        metavar="DIR",
    ),
    out_file: str | None = typer.Option(
        None, "--out-file", help="Write only the one graph file (.json) instead.", metavar="PATH"
    ),
    format: str = typer.Option("circuit-tracer", help="circuit-tracer (the data its own frontend reads)."),
    overwrite: bool = typer.Option(False, help="Replace an existing graph of the same slug."),
) -> None:
    """Export a circuit (a feature circuit from `features`, or a graph folder from `graph`) to another tool's format."""
    from circuits.format.circuit_tracer import slug_of, write_circuit_tracer, write_circuit_tracer_folder
    from circuits.format.feature_circuit import load_drawable

    if format != "circuit-tracer":
        fail(f"unknown --format {format!r}; use circuit-tracer")
    from interp.cli.options import positional, warn_deprecated

    if out and Path(out).suffix == ".json" and not out_file:  # the old meaning of --out FILE.json
        warn_deprecated("--out FILE.json", "--out-file FILE.json")
        out, out_file = None, out
    if (out is None) == (out_file is None):
        fail("give one of --out DIR (circuit-tracer's data folder) or --out-file FILE.json (one graph file)")
    out = out or out_file
    with ExitStack() as writing:
        try:
            file = positional(circuit, file_arg, "--circuit")
            graph = _graph_frontend(file)  # an attribution graph's folder: their own graph form, not a circuit's
            c = None if graph is not None else load_drawable(file)
            single = Path(out).suffix == ".json"
            if not single:  # the folder form: graph-metadata.json is rewritten, so one writer at a time
                _hold(writing, out)
            slug = graph["metadata"]["slug"] if graph is not None else slug_of(c)
            target = Path(out) if single else Path(out) / f"{slug}.json"
            if target.exists() and not overwrite:
                fail(f"{target} exists; pass --overwrite to replace it")
            if graph is not None:
                path = _write_graph(graph, out, single)
            else:
                path = write_circuit_tracer(c, out) if single else write_circuit_tracer_folder(c, out)
        except (ValueError, FileNotFoundError) as exc:
            fail(str(exc))
    where = "" if single else f" and {Path(out) / 'graph-metadata.json'} (serve this folder with circuit-tracer)"
    typer.echo(f"wrote {path}{where}")


def _graph_frontend(path: str) -> dict | None:
    """circuit-tracer's frontend form of the attribution graph in folder `path` (None: not a graph folder)."""
    p = Path(path)
    if not (p.is_dir() and (p / "graph.json").is_file()):
        return None
    from circuits.graph.export import slug_for, to_frontend
    from circuits.graph.graph import Graph

    g = Graph.load(p)
    return to_frontend(
        g,
        slug_for(g.meta.get("prompt") or p.name),
        f"{g.meta.get('model')}+{Path(str(g.meta.get('transcoders'))).name}",
    )


def _write_graph(d: dict, out: str, single: bool) -> Path:
    from circuits.format.circuit_tracer import check_circuit_tracer, write_graph_data
    from interp.store.atomic import atomic_write_bytes

    if not single:
        return write_graph_data(d, out)
    check_circuit_tracer(d)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(Path(out), json.dumps(d).encode())
    return Path(out)


from circuits.feature_cli import features as _features  # noqa: E402 - its own file (feature circuits)
from circuits.graph_cli import graph as _graph  # noqa: E402 - its own file (attribution graphs)

app.command("features")(_features)
app.command("graph")(_graph)


if __name__ == "__main__":  # pragma: no cover - `python -m circuits.cli ...` before the entry point is installed
    app()
