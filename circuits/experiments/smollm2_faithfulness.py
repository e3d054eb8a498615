"""Faithfulness curves on SmolLM2-135M: EAP, EAP-IG, SafeSeek head masks and weight-sparse (Gao et al.) head
pruning on IOI, EAP and EAP-IG on greater-than, with random circuits of equal size.

    python -m circuits.experiments.smollm2_faithfulness --out /work/runs/circuits/smollm2 [--n 32] [--tasks
    ioi,greater-than]
    python -m circuits.experiments.smollm2_faithfulness --quick      # ~30 s smoke run: a tiny random model on quotes

The default model, `smollm2-135m`, is SmolLM2-135M-Instruct read from its Q4_1 GGUF (dequantised to fp32).
For curves with seeds, controls and bootstrap intervals on any model and task, use `interp circuits curve`.

Writes `results.json` (every number), `curves.html` (one plot: faithfulness vs edges, log x) and the
circuits (`<task>_<method>.json`). One thread; ~15-25 min of CPU for both tasks at the defaults.
Faithfulness is measured with exact edge patching from the corrupted prompts (`circuits.evaluation.faithfulness`).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

SIZES = (30, 100, 300, 1000, 3000, 10000)
HEAD_SIZES = (5, 10, 20, 40, 80)


def _log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def run_task(
    model,
    task_name: str,
    n: int,
    out: Path,
    node_methods: bool,
    steps: int,
    draws: int,
    methods=("eap", "eap-ig", "random", "safeseek", "prune"),
    save=None,
    prune_target: float = 0.3,
) -> dict:
    from circuits.evaluation.baseline import baseline
    from circuits.evaluation.faithfulness import edge_curve, masks_curve, minimal_size, random_masks
    from circuits.finders.eap import eap, eap_ig
    from circuits.tasks.binary import get_task

    task = get_task(task_name)
    batch = task.make_pairs(n, 0, model.tokenizer)
    res: dict = {"task": task_name, "n_prompts": n, "baseline": baseline(model, batch)}
    _log(f"{task_name} baseline {res['baseline']}")
    curves = {}
    cache: dict = {}  # corrupted runs and endpoints shared by every curve of this task
    res["curves"] = curves
    from circuits.model.residual_graph import EdgeGraph

    graph = EdgeGraph.of(model)
    res["n_edges_graph"] = graph.n_edges
    for name, fn in (("eap", lambda: eap(model, batch)), ("eap-ig", lambda: eap_ig(model, batch, steps=5))):
        if name not in methods:
            continue
        t0 = time.perf_counter()
        scores = fn()
        secs = time.perf_counter() - t0
        sizes = [s for s in SIZES if s < scores.graph.n_edges]  # the whole graph is the curve's endpoint (1.0)
        curve = edge_curve(model, batch, scores, sizes, cache=cache)
        curve["score_seconds"] = round(secs, 1)
        curve["minimal_edges_80"] = minimal_size(curve["points"], 0.8)
        curves[name] = curve
        scores.to_circuit(top_n=300, provenance={"task": task_name, "model": model.provenance}).save(
            out / f"{task_name}_{name}.json"
        )
        _log(
            f"{task_name} {name}: {secs:.0f}s {[(p['n_edges'], round(p['faithfulness'], 3)) for p in curve['points']]}"
        )
        if save:
            save(res)
    rand = {}
    if "random" in methods:
        rsizes = [s for s in (300, 3000) if s < graph.n_edges] or [graph.n_edges // 2]
        masks = [m for size in rsizes for m in random_masks(graph, size, draws, seed=size)]
        c = masks_curve(model, batch, graph, masks, cache=cache)
        for j, size in enumerate(rsizes):
            rand[size] = [round(p["faithfulness"], 4) for p in c["points"][j * draws : (j + 1) * draws]]
            _log(f"{task_name} random {size}: {rand[size]}")
    res["random"] = rand
    if ("endpoints", "logit-diff", "corrupt") in cache:
        res["full_metric"], res["ablated_metric"] = cache[("endpoints", "logit-diff", "corrupt")]
    if save:
        save(res)
    if node_methods:
        _node_methods(
            model,
            task,
            batch,
            graph,
            steps,
            out,
            cache,
            methods,
            curves,
            lambda: save(res) if save else None,
            prune_target,
        )
    return res


def _node_methods(
    model,
    task,
    batch,
    graph,
    steps: int,
    out: Path,
    cache: dict,
    methods,
    curves: dict,
    save,
    prune_target: float = 0.3,
) -> dict:

    if "safeseek" in methods:
        _safeseek_curve(model, task, batch, graph, steps, out, cache, curves)
        save()
    if "prune" not in methods:
        return curves
    _prune_curve(model, task, batch, graph, steps, out, cache, curves, prune_target)
    save()
    return curves


def _safeseek_curve(model, task, batch, graph, steps, out, cache, curves):
    from circuits.evaluation.faithfulness import minimal_size, node_curve
    from circuits.finders.safeseek import SafeSeekConfig, safeseek

    t0 = time.perf_counter()
    cfg = SafeSeekConfig(
        units=("head",), steps=steps, batch_size=8, n_train=32, n_val=16, eval_every=max(steps // 4, 1), lr=5e-2
    )
    res = safeseek(model, task, cfg, progress=False)
    logits = res.masks["m"].logits
    order = sorted(
        ((float(v), int(k.split("_")[1]), h) for k, p in logits.items() for h, v in enumerate(p.detach().tolist()))
    )
    head_order = [(layer, h) for _, layer, h in order]  # most removed (lowest logit) first: the circuit's core
    res.circuit.save(out / f"{task.name}_safeseek.json")
    sizes = list(HEAD_SIZES)
    c = node_curve(model, batch, graph, head_order, sizes, cache=cache)
    c.update(
        {
            "score_seconds": round(time.perf_counter() - t0, 1),
            "n_removed": res.circuit.metrics["n_nodes"],
            "minimal_edges_80": minimal_size(c["points"], 0.8),
        }
    )
    curves["safeseek"] = c
    _log(
        f"safeseek: {c['score_seconds']}s removed {c['n_removed']} "
        f"{[(p['n_heads'], p['n_edges'], round(p['faithfulness'], 3)) for p in c['points']]}"
    )


def _prune_curve(model, task, batch, graph, steps, out, cache, curves, target: float = 0.3):
    from circuits.evaluation.faithfulness import minimal_size, node_curve
    from circuits.finders.prune import PruneConfig, prune

    sizes = list(HEAD_SIZES)
    t0 = time.perf_counter()
    pcfg = PruneConfig(
        kinds=("head",),
        steps=steps,
        lambda_steps=1,
        n_train=32,
        n_eval=16,
        batch_size=8,
        target_loss=target,
        k_coef=1e-3,
    )
    circuit = prune(model, task, pcfg, progress=False)
    tau = circuit.extra["node_scores"]
    order = sorted(((-v, int(k.split("_")[1]), h) for k, vals in tau.items() for h, v in enumerate(vals)))
    head_order = [(layer, h) for _, layer, h in order]  # largest tau (kept first) first
    circuit.save(out / f"{task.name}_prune.json")
    c = node_curve(model, batch, graph, head_order, sizes, cache=cache)
    c.update(
        {
            "score_seconds": round(time.perf_counter() - t0, 1),
            "n_kept": circuit.metrics["n_nodes"],
            "task_loss": circuit.metrics["task_loss"],
            "minimal_edges_80": minimal_size(c["points"], 0.8),
        }
    )
    curves["prune"] = c
    _log(
        f"prune: {c['score_seconds']}s kept {c['n_kept']} "
        f"{[(p['n_heads'], p['n_edges'], round(p['faithfulness'], 3)) for p in c['points']]}"
    )


def plot(results: dict, path: Path) -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    tasks = list(results["tasks"])
    fig = make_subplots(rows=1, cols=len(tasks), subplot_titles=tasks)
    colours = {"eap": "#1f77b4", "eap-ig": "#d62728", "safeseek": "#2ca02c", "prune": "#9467bd"}
    for i, t in enumerate(tasks, 1):
        r = results["tasks"][t]
        for name, c in r["curves"].items():
            pts = c["points"]
            fig.add_trace(
                go.Scatter(
                    x=[p["n_edges"] for p in pts],
                    y=[p["faithfulness"] for p in pts],
                    mode="lines+markers",
                    name=f"{name}",
                    legendgroup=name,
                    showlegend=i == 1,
                    line={"color": colours[name]},
                ),
                1,
                i,
            )
        for size, vals in r["random"].items():
            fig.add_trace(
                go.Scatter(
                    x=[int(size)] * len(vals),
                    y=vals,
                    mode="markers",
                    name="random",
                    legendgroup="random",
                    showlegend=i == 1 and size == list(r["random"])[0],
                    marker={"color": "grey", "symbol": "x"},
                ),
                1,
                i,
            )
        fig.update_xaxes(type="log", title="edges kept", row=1, col=i)
    fig.update_yaxes(title="faithfulness (metric recovered)", row=1, col=1)
    fig.update_layout(
        title="SmolLM2-135M: faithfulness vs circuit size (edges; corrupted-run ablation)",
        template="plotly_white",
        height=500,
        width=1200,
    )
    fig.write_html(path, include_plotlyjs="directory")


def table(results: dict) -> str:
    """One markdown table: faithfulness of every method at each size, edges needed for 80%, scoring time."""
    lines = [
        "| task | method | " + " | ".join(f"{n:,} edges" for n in SIZES) + " | edges for 0.8 | seconds |",
        "|---" * (len(SIZES) + 4) + "|",
    ]
    for t, r in results["tasks"].items():
        for name, c in r["curves"].items():
            by = {p["n_edges"]: p["faithfulness"] for p in c["points"]}
            cells = []
            for n in SIZES:
                near = [p for p in c["points"] if (p["n_edges"] == n if name in ("eap", "eap-ig") else False)]
                cells.append(f"{near[0]['faithfulness']:.2f}" if near else "")
            if name not in ("eap", "eap-ig"):  # head rankings: sizes are heads, report (edges: faithfulness)
                cells = [f"{p['n_heads']} heads = {p['n_edges']:,}: {p['faithfulness']:.2f}" for p in c["points"]][
                    : len(cells)
                ]
                cells += [""] * (len(SIZES) - len(cells))
            del by
            lines.append(
                f"| {t} | {name} | "
                + " | ".join(cells)
                + f" | {c.get('minimal_edges_80')} | {c.get('score_seconds')} |"
            )
        rand = "; ".join(f"{k} edges: {v}" for k, v in r["random"].items())
        lines.append(f"| {t} | random (3 draws) | {rand} |" + " |" * (len(SIZES) + 1))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="output folder (required unless --quick)")
    ap.add_argument(
        "--quick", action="store_true", help="tiny random model, quotes task, 8 rows: checks that it all runs"
    )
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--tasks", default="ioi,greater-than")
    ap.add_argument("--node-tasks", default="ioi", help="tasks that also get SafeSeek and pruning curves")
    ap.add_argument("--steps", type=int, default=30, help="SafeSeek and pruning mask steps")
    ap.add_argument("--draws", type=int, default=3, help="random circuits per size")
    ap.add_argument("--prune-target", type=float, default=0.3, help="pruning's target task loss (nats)")
    ap.add_argument(
        "--methods",
        default="eap,eap-ig,random,safeseek,prune",
        help="any of eap, eap-ig, random, safeseek, prune (split them over processes to run in parallel)",
    )
    ap.add_argument(
        "--merge",
        default="",
        help="comma-separated results.json files of earlier runs (one task each) to "
        "combine into --out's results.json and plot, without running anything",
    )
    args = ap.parse_args()
    if args.merge:
        merged = {"model": args.model, "merged_from": args.merge.split(","), "tasks": {}}
        for f in args.merge.split(","):  # runs of the same task (different methods) are merged curve by curve
            for t, r in json.loads(Path(f).read_text())["tasks"].items():
                have = merged["tasks"].setdefault(t, {**r, "curves": {}, "random": {}})
                have["curves"].update(r.get("curves", {}))
                have["random"].update(r.get("random", {}))
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(merged, indent=1))
        plot(merged, out / "curves.html")
        print(table(merged))
        return
    torch.set_num_threads(1)
    import interp

    if args.quick:
        from circuits.finders.weight_sparse import WeightSparseConfig, build_model

        args.out = args.out or "runs/circuits/smollm2_quick"
        args.n, args.tasks, args.node_tasks, args.steps, args.draws = 8, "quotes", "quotes", 3, 2
        args.prune_target = 10.0  # an untrained model reaches no real target: the run only checks the code path
        model = build_model(WeightSparseConfig(d_model=32, n_layers=2, n_heads=4, d_mlp=64, steps=1))
        args.model = model.provenance["spec"]
    elif not args.out:
        ap.error("--out is required (or --quick)")
    else:
        model = interp.load_model(args.model)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {"model": args.model, "args": vars(args), "tasks": {}}

    def save(res):
        results["tasks"][res["task"]] = res
        (out / "results.json").write_text(json.dumps(results, indent=1))

    for t in args.tasks.split(","):
        run_task(
            model,
            t,
            args.n,
            out,
            t in args.node_tasks.split(","),
            args.steps,
            args.draws,
            tuple(args.methods.split(",")),
            save,
            args.prune_target,
        )
    plot(results, out / "curves.html")
    _log(f"wrote {out / 'results.json'} and {out / 'curves.html'}")


if __name__ == "__main__":
    main()
