"""`interp circuits graph`: the attribution graph of one prompt over trained transcoders (circuit-tracer's method).

interp circuits graph --model smollm2-135m --transcoders runs/transcoders/smollm2_plt \
    --prompt "The capital of France is" --out runs/graphs/france
interp circuits graph --quick --out /tmp/graph          # a tiny random model with random transcoders
interp circuits graph --model smollm2-135m --transcoders DIR --prompt-file long.txt --out DIR   # any length

A long prompt's graph is traced one block at a time and its rows stream to a file in the output folder when memory
asks for it (`--mode auto`, the plan printed first says which); `--mode` forces one (`circuits.graph.attribute`).

Writes `graph.safetensors` + `graph.json` (the whole graph: every computed row, scores, settings), `graph.html` (our
page of the pruned graph, by token position; `interp circuits show --circuit DIR` redraws it) and `ct/`, the data
folder circuit-tracer's own frontend serves (the pruned graph, `circuits.graph.export`). Prints the plan (tokens,
active features, bytes) before the backward passes, then the replacement and completeness scores.
"""

from __future__ import annotations

import re
from contextlib import ExitStack
from pathlib import Path

import typer


def fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def quick_setup(seed: int = 0):
    """A tiny random Llama (2 layers, width 64, byte tokens) and random per-layer transcoders for it."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    import interp
    from circuits.model.transcoders import random_transcoders
    from interp.data import byte_tokenizer

    config = LlamaConfig(
        vocab_size=257,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = interp.HookedModel(LlamaForCausalLM(config).eval(), byte_tokenizer())
    return model, random_transcoders(2, 64, 96, "plt", seed=seed, threshold=0.3)


def graph(
    out: str = typer.Option(..., metavar="DIR", help="Folder to write the graph into (created)."),
    model: str | None = typer.Option(None, "--model", help="Model spec or path (--quick without it: a tiny one)."),
    transcoders: str | None = typer.Option(
        None, "--transcoders", metavar="DIR", help="Transcoder folder (`interp sae train --arch transcoder|clt`)."
    ),
    prompt: str | None = typer.Option(None, "--prompt", help="The prompt (its next token is explained)."),
    prompt_file: str | None = typer.Option(
        None, "--prompt-file", metavar="FILE", help="Read the prompt from a UTF-8 text file (long prompts)."
    ),
    max_feature_nodes: int = typer.Option(7500, help="Feature rows to compute, by influence (circuit-tracer: 7500)."),
    max_n_logits: int = typer.Option(10, help="At most this many logit targets."),
    desired_logit_prob: float = typer.Option(0.95, help="Logit targets until their probabilities sum to this."),
    batch_size: int = typer.Option(32, help="Targets per backward pass (memory grows with it)."),
    node_threshold: float = typer.Option(0.8, help="Pruning: cumulative influence share of nodes kept (ct/ export)."),
    edge_threshold: float = typer.Option(0.98, help="Pruning: cumulative influence share of edges kept."),
    slug: str | None = typer.Option(None, help="The graph's name in the ct/ folder (default: from the prompt)."),
    threads: int | None = typer.Option(None, help="Torch threads (default: all cores)."),
    mode: str = typer.Option(
        "auto",
        help="auto: the fastest that fits memory; memory: one frozen forward of --batch-size copies; layerwise: "
        "the backward one block at a time; offload: layerwise, rows streamed to disk in the output folder.",
    ),
    quick: bool = typer.Option(False, help="A tiny random model with random transcoders (seconds)."),
) -> None:
    """Trace the attribution graph of one prompt over transcoders; write it and circuit-tracer's frontend data."""
    for name, value, low, high in (
        ("--node-threshold", node_threshold, 0.0, 1.0),
        ("--edge-threshold", edge_threshold, 0.0, 1.0),
        ("--desired-logit-prob", desired_logit_prob, 0.0, 1.0),
    ):
        if not low <= value <= high:
            fail(f"{name} must be between {low} and {high}, not {value}")
    for name, value in (
        ("--max-feature-nodes", max_feature_nodes),
        ("--max-n-logits", max_n_logits),
        ("--batch-size", batch_size),
    ):
        if value < 1:
            fail(f"{name} must be at least 1, not {value}")
    modes = {"auto": (None, None), "memory": (False, False), "layerwise": (True, False), "offload": (True, True)}
    if mode not in modes:
        fail(f"--mode must be one of {', '.join(modes)}, not {mode!r}")
    if threads is not None and threads < 1:
        fail(f"--threads must be at least 1, not {threads}")
    if slug is not None and not re.fullmatch(r"[A-Za-z0-9._-]+", slug):
        fail(f"--slug {slug!r}: it names a file of the frontend; use only letters, digits, '.', '_' and '-'")
    if quick and (model or transcoders):
        fail("--quick uses a tiny random model and random transcoders: drop --model and --transcoders, or --quick")
    if not quick and (not model or not transcoders):
        fail("give --model SPEC and --transcoders DIR (or --quick for a tiny random example)")
    if prompt is not None and prompt_file is not None:
        fail("give the prompt once: --prompt TEXT or --prompt-file FILE")
    if prompt_file is not None:
        try:
            prompt = Path(prompt_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            fail(f"--prompt-file {prompt_file}: {e}")
    if quick and prompt is None:
        prompt = "Hello world, this is"
    if not prompt or not prompt.strip():
        fail("give the prompt with --prompt TEXT or --prompt-file FILE (it is empty)")
    from interp.cli.errors import CliError, check_out_dir

    try:
        check_out_dir(out)  # before any load, so a refused run writes nothing
    except CliError as exc:
        fail(str(exc))
    from interp.cli.options import set_threads

    set_threads(threads)
    import json

    from circuits.format.circuit_tracer import write_graph_data
    from circuits.graph import attribute
    from circuits.graph.export import slug_for, to_frontend
    from circuits.model.transcoders import load_transcoders
    from interp.infra.logs import progress

    if quick:
        m, tc = quick_setup()
    else:
        try:
            tc = load_transcoders(transcoders)
        except (FileNotFoundError, ValueError) as e:
            fail(str(e))
        from circuits.model.checkpoint import CheckpointError, load_checkpoint

        try:
            m = load_checkpoint(model)
        except (CheckpointError, FileNotFoundError, ValueError) as e:
            fail(str(e))

    bar: dict = {}

    def on_plan(plan: dict) -> None:
        gb = plan["total_bytes"] / 1e9
        how = "layer-wise backward" if plan["layerwise"] else "one frozen forward"
        how += ", rows streamed to disk" if plan["offload"] else ", rows in memory"
        typer.echo(
            f"plan: {plan['tokens']} tokens x {plan['active_features']} active features -> "
            f"{plan['visited_features']} feature rows + {plan['logits']} logit rows, {plan['nodes']} nodes; {how}; "
            f"~{gb:.2f} GB in memory (rows {plan['rows_bytes'] / 1e9:.2f}, graph {plan['graph_bytes'] / 1e9:.2f}, "
            f"forward {plan['forward_bytes'] / 1e9:.2f}), {plan['disk_bytes'] / 1e9:.2f} GB on disk",
            err=True,
        )
        bar["bar"] = stack.enter_context(progress(total=plan["visited_features"], desc="feature rows"))

    with ExitStack() as stack:
        from interp.store.errors import StoreLockedError
        from interp.store.lock import holding

        try:  # one writer per output folder; a second is refused naming the holder
            stack.enter_context(holding(out, "the output folder"))
        except StoreLockedError as exc:
            fail(str(exc))
        try:
            g = attribute(
                m,
                tc,
                prompt,
                max_n_logits=max_n_logits,
                desired_logit_prob=desired_logit_prob,
                batch_size=batch_size,
                max_feature_nodes=max_feature_nodes,
                on_plan=on_plan,
                progress=lambda n: bar["bar"].update(n),
                layerwise=modes[mode][0],
                offload=modes[mode][1],
                offload_dir=out,
            )
        except (ValueError, MemoryError, OSError) as e:
            fail(str(e))
        from circuits.format.graph_html import write_html
        from circuits.graph.as_circuit import graph_circuit

        folder = g.save(out)  # written while the folder's lock is held
        name = slug or slug_for(prompt)
        scan = f"{g.meta['model']}+{Path(tc.source).name}"
        data = to_frontend(g, name, scan, node_threshold, edge_threshold)
        write_graph_data(data, folder / "ct")
        write_html(graph_circuit(g, node_threshold, edge_threshold), folder / "graph.html")
    s = g.meta["scores"]
    summary = {
        "tokens": g.n_pos,
        "active_features": len(g.features),
        "feature_nodes": g.n_features,
        "logits": g.meta["logit_strings"],
        "replacement": round(s["replacement"], 4),
        "completeness": round(s["completeness"], 4),
        "error_share": round(s["error_share"], 4),
        "pruned_nodes": len(data["nodes"]),
        "pruned_edges": len(data["links"]),
        "seconds": g.meta["seconds"],
    }
    typer.echo(json.dumps(summary))
    typer.echo(
        f"wrote {folder}/graph.safetensors, graph.json, graph.html (our page) and {folder}/ct/{name}.json "
        "(circuit-tracer's frontend)"
    )
