"""`interp circuits features`: a sparse feature circuit (Marks et al. 2024) over SAE latents, with its faithfulness.

interp circuits features --model smollm2-135m --task ioi --sae runs/sae_l5 --sae runs/sae_l10 --sae runs/sae_l15 \
    --dashboard - --dashboard - --dashboard runs/dash/l15 --out runs/ioi_features --method eap-ig
interp circuits features --quick --out /tmp/fc            # a tiny random model with random dictionaries

Writes `feature_circuit.json` (nodes with their dashboard pages, edges, the faithfulness curve against random
latents, with what the error nodes carry: the error nodes alone, the top latents with every error node kept and
with every error node ablated) and `curve.md` (the table). Nodes are scored on rows that are never evaluation rows
(`circuits.evaluation.split`; `--eval-file` for a separate file). `interp circuits show` and `export` draw the
file (`circuits.format.feature_circuit`). The SAE folders are read with sae-lens's loader
(`circuits.model.dictionary.load_dictionary`), never through the `sae` family.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import typer

SIZES = (1, 3, 10, 30, 100, 300, 1000, 3000)


def fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _hold(writing: ExitStack, folder: str) -> None:
    """Hold the output folder's writer lock (a second writer is refused, naming the holder), as `circuits.cli`."""
    from interp.store.errors import StoreLockedError
    from interp.store.lock import holding

    try:
        writing.enter_context(holding(folder, "the output folder"))
    except StoreLockedError as exc:
        fail(str(exc))


def _load(spec: str | None, device: str):
    from circuits.model.checkpoint import load_checkpoint

    if not spec:
        fail("give the model with --model SPEC|PATH|PATH@N (or --quick)")
    return load_checkpoint(spec, device=device)


def features(
    out: str = typer.Option(..., metavar="DIR", help="Folder to write feature_circuit.json and curve.md into."),
    model: str | None = typer.Option(None, "--model", help="Model spec or path (--quick without it: a tiny one)."),
    task: str | None = typer.Option(None, help="A task with aligned clean/corrupt pairs (ioi, ...; --quick: quotes)."),
    sae: list[str] = typer.Option([], "--sae", metavar="DIR", help="SAE folder (repeat: one per hook)."),
    dashboard: list[str] = typer.Option(
        [], "--dashboard", metavar="DIR", help="Dashboard folder of the --sae at the same position ('-': none)."
    ),
    method: str = typer.Option("eap", help="eap or eap-ig (Marks et al.'s integrated gradients, per hook)."),
    ig_steps: int = typer.Option(5, help="eap-ig: interpolation steps.", metavar="INT"),
    top: int = typer.Option(20, "--top", help="Nodes per hook kept for edges and listed in the JSON.", metavar="INT"),
    metric: str = typer.Option("auto", help="logit-diff, prob, kl, or auto (the task's default)."),
    ablation: str = typer.Option("corrupt", help="corrupt or mean: the value of the nodes outside the circuit."),
    errors: str = typer.Option("rank", help="Error nodes: rank (nodes like latents), keep (always in) or ablate."),
    sizes: str = typer.Option("", help="Circuit sizes in nodes, comma-separated (default 1,3,10,...).", metavar="N,.."),
    seeds: int = typer.Option(3, help="Draws of random latents per size.", metavar="INT"),
    n_prompts: int = typer.Option(16, "--max-rows", help="Prompt rows the nodes are scored on.", metavar="INT"),
    n_eval: int = typer.Option(
        16, help="Evaluation rows the circuits are evaluated on (never scoring rows).", metavar="INT"
    ),
    eval_file: str | None = typer.Option(
        None, "--eval-file", help="Evaluation rows from this prompts file instead (JSONL).", metavar="FILE"
    ),
    seed: int = typer.Option(0, help="Seed of the scoring rows drawn from the scoring side.", metavar="INT"),
    quick: bool = typer.Option(False, help="A tiny random model with random dictionaries: checks that it runs."),
    device: str = typer.Option("auto", metavar="auto|cpu|cuda[:N]", help="Where the model runs."),
    threads: int | None = typer.Option(None, help="torch CPU threads."),
) -> None:
    """Feature circuit over SAE latents: node scores (EAP / EAP-IG), edges between top latents, faithfulness."""
    from interp.cli.options import compute, sizes_list

    compute(threads, seed)
    from circuits.evaluation.feature_faithfulness import feature_curve
    from circuits.evaluation.split import disjoint_split
    from circuits.finders.feature_circuit import feature_scores
    from circuits.model.checkpoint import CheckpointError
    from circuits.model.dictionary import dashboard_pages, load_dictionary, random_dictionary
    from circuits.tasks.binary import get_task
    from interp.cli.errors import CliError, check_out_dir

    try:
        check_out_dir(out)  # before the lock or any load, so a refused run writes nothing
        size_list = sizes_list(sizes) or SIZES
        if quick and not model and (sae or dashboard):  # no command succeeds on an input it ignored
            ignored = "--sae" if sae else "--dashboard"
            raise ValueError(
                f"--quick without --model runs a tiny random model with random dictionaries and would ignore "
                f"{ignored}: drop {ignored}, or give --model SPEC for your SAEs"
            )
    except (CliError, ValueError) as exc:
        fail(str(exc))
    with ExitStack() as writing:
        _hold(writing, out)
        try:
            if len(dashboard) > len(sae):
                raise ValueError(
                    f"{len(dashboard)} --dashboard folders for {len(sae)} --sae folders; one per SAE at most"
                )
            if quick and not model:
                from circuits.finders.weight_sparse import WeightSparseConfig, build_model
                from interp.infra.devices import resolve_device

                dev = resolve_device(device)
                m = build_model(WeightSparseConfig(d_model=32, n_layers=3, n_heads=4, d_mlp=64, steps=1))
                m.hf_model.to(dev)
                dicts = [random_dictionary(32, 64, f"blocks.{i}.hook_resid_post", seed=i) for i in range(3)]
                n_prompts, n_eval, seeds, ig_steps = min(n_prompts, 8), min(n_eval, 8), min(seeds, 2), min(ig_steps, 2)
                size_list = tuple(s for s in size_list if s <= 200)
            else:
                if not sae:
                    raise ValueError("give the SAE folders with --sae DIR (one per hook), or use --quick")
                from interp.infra.devices import resolve_device
                from interp.infra.sae_folder import check_compatible

                if not model:
                    fail("give the model with --model SPEC|PATH|PATH@N (or --quick)")
                # the folders first (config, weights, NaN): a damaged SAE is refused before the model loads
                dicts = [load_dictionary(p, device=resolve_device(device)) for p in sae]
                m = _load(model, device)
                for p, d in zip(sae, dicts):
                    try:  # the SAE records its model and hook: a model it cannot run on is named with the fix
                        check_compatible(d.sae, m, d.hook)
                    except ValueError as exc:
                        raise ValueError(f"--sae {p}: {exc}") from None
                    if d.model_name and d.model_name != model:
                        typer.echo(f"warning: {p} was trained on {d.model_name!r}, not {model!r}", err=True)
            pages = {}
            for d, dash in zip(dicts, dashboard):
                if dash != "-":
                    pages[d.hook] = dashboard_pages(dash)
            the_task = get_task(task or ("quotes" if quick else ""))
            metric_name = the_task.default_metric if metric == "auto" else metric
            split = disjoint_split(the_task, n_prompts, n_eval, eval_file)  # evaluation rows are never scored on
            batch = split.task.make_pairs(n_prompts, seed, m.tokenizer, aligned_for="features")
            held = split.eval_batch(m.tokenizer, align=ablation == "corrupt")
            typer.echo(f"scoring {sum(d.d_sae for d in dicts)} latents at {len(dicts)} hooks ({method})", err=True)
            scores = feature_scores(m, dicts, batch, metric_name, method, ig_steps, top)
            typer.echo(f"scored in {scores.info['seconds']} s; faithfulness curve", err=True)
            curve = feature_curve(m, dicts, held, scores, size_list, metric_name, ablation, errors, seeds)
        except (ValueError, FileNotFoundError, CheckpointError, TypeError) as exc:
            fail(str(exc))
        result = scores.to_json(pages, top)
        result.update(
            {
                "model": model or ("tiny random gpt_neox (--quick)" if quick else None),
                "task": the_task.name,
                "saes": list(sae),
                "dashboards": list(dashboard),
                "split": split.info,
                "curve": curve,
            }
        )
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "feature_circuit.json").write_text(json.dumps(result, indent=1, default=str))
        table = curve_table(curve)
        (folder / "curve.md").write_text(table + "\n")
    typer.echo(table)
    typer.echo(f"rows: {split.info['split']}; {len(held)} evaluation rows, {len(batch)} scoring rows")
    typer.echo(
        f"wrote {folder / 'feature_circuit.json'} and {folder / 'curve.md'} (draw it: interp circuits show "
        f"--circuit {folder / 'feature_circuit.json'}; export it: interp circuits export ... --out DIR)"
    )


def curve_table(curve: dict) -> str:
    """The faithfulness curve as a markdown table (method vs random latents), with what the error nodes carry:
    the error nodes alone, and the top latents with every error node kept and with every error node ablated."""
    share = curve.get("error_share") or {}
    lines = [
        f"faithfulness ({curve['metric']}, ablation {curve['ablation']}, error nodes {curve['errors']}; "
        f"full {curve['full_metric']:.4f}, all ablated {curve['ablated_metric']:.4f}, {curve['n_rows']} held-out rows)",
        "",
    ]
    if "error_only" in share:
        lines += [error_share_text(share), ""]
    lines += [
        "| nodes | top-n by \\|score\\| | top-n latents + every error node | top-n latents, errors ablated "
        "| random latents (mean; runs) | random active latents (mean; runs) |",
        "|---|---|---|---|---|---|",
    ]
    for p, r, a in zip(curve["points"], curve["random"], curve["random_active"]):
        lines.append(
            f"| {p['n']} | {p['faithfulness']:.3f} | {_num(p.get('errors_kept'))} | {_num(p.get('latents_only'))} "
            f"| {r['mean']:.3f}; {r['runs']} | {a['mean']:.3f}; {a['runs']} |"
        )
    return "\n".join(lines)


def _num(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def error_share_text(share: dict) -> str:
    """One sentence: how much of the behaviour the error nodes alone recover, and the latents without them."""
    text = f"Error nodes alone (every latent ablated) recover {share['error_only']:.3f} of the behaviour"
    if "largest_n" not in share:
        return text + "."
    return (
        text + f"; the top {share['largest_n']} latents recover {share['errors_kept']:.3f} with every error node kept "
        f"and {share['latents_only']:.3f} with every error node ablated (latents alone: at best "
        f"{share['latents_only_best']:.3f}, at {share['latents_only_best_n']} nodes)."
    )
