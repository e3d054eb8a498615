"""Weight-sparse vs dense: prune both on the same task at the same target loss and compare circuit sizes.

    python -m circuits.experiments.sparse_vs_dense --out runs/circuits/sparse_vs_dense   # ~40 min on a shared core
    python -m circuits.experiments.sparse_vs_dense --prune-only --out runs/circuits/sparse_vs_dense  # reuse its models
    python -m circuits.experiments.sparse_vs_dense --quick     # ~1 min smoke run, into
    runs/circuits/sparse_vs_dense_quick

Both models (GPT-NeoX, 2 layers, d_model 64, 4 heads x 16, d_mlp 256, AbsTopK 1/4) train for the same steps;
the sparse one keeps 1/16 of each matrix (min 4 per neuron,
annealed over 1%-50% of training), by default on the `quotes` answers (`--objective task`; `--objective lm`: next-token
loss on tiny Python). Each is pruned on the task to task loss 0.15 (mean ablation); the
result reports nodes, edges (nonzero weights between kept nodes) and the dense/sparse ratio (the paper:
~16x smaller circuits at matched pretraining loss). Controls: the circuit's necessity (ablating only the
circuit), and a randomly initialised sparse model, which should need far more nodes or fail.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from circuits.evaluation.ablation import evaluate
from circuits.experiments.common import packed_lines, sampler, setup, tiny_python, write_json
from circuits.finders.prune import PruneConfig, TargetNotReached, prune
from circuits.finders.weight_sparse import WeightSparseConfig, build_model, train_weight_sparse
from circuits.tasks.binary import get_task
from interp.data import tokenize_texts


def run(
    out: Path,
    steps: int,
    prune_steps: int,
    lambda_steps: int,
    task_name: str = "quotes",
    target: float = 0.15,
    progress: bool = True,
    prune_only: bool = False,
    objective: str = "lm",
) -> dict:
    setup()
    task = get_task(task_name)
    texts = packed_lines(tiny_python(40_000, 0), 64)
    val_texts = packed_lines(tiny_python(2_000, 1), 64)
    results: dict = {"task": task_name, "target_loss": target, "train_steps": steps, "objective": objective}
    models = {}
    if prune_only:  # reuse the models a previous run saved (and its training numbers)
        from circuits.model.checkpoint import load_checkpoint

        previous = out / "results.json"
        if previous.exists():
            old = json.loads(previous.read_text())
            results.update(
                {k: {kk: vv for kk, vv in old[k].items() if kk != "circuit"} for k in ("dense", "sparse") if k in old}
            )
        for name in ("dense", "sparse"):
            models[name] = (load_checkpoint(out / "models" / name), None)
    for name, l0 in () if prune_only else (("dense", 1.0), ("sparse", 1 / 16)):
        cfg = WeightSparseConfig(l0=l0, steps=steps, batch_size=32, ctx_len=64, lr=3e-3 if l0 < 1 else 1e-3)
        model = build_model(cfg)
        val = [tokenize_texts(model.tokenizer, val_texts[i : i + 64]) for i in range(0, 256, 64)]
        if objective == "task":  # train on the task's answers (both splits of a fresh batch each step)
            tok = model.tokenizer
            from circuits.tasks.binary import answer_ce

            def task_loss(m, b):
                return answer_ce(m({"input_ids": b.ids, "attention_mask": b.mask}), b)

            model, report = train_weight_sparse(
                cfg,
                lambda step: task.make(64, 100 + step, tok),  # noqa: B023
                model=model,
                progress=progress,
                loss_fn=task_loss,  # noqa: B023
            )
            report.val_loss = evaluate(model, task.make(256, 10_000, tok))["loss"]
        else:
            model, report = train_weight_sparse(
                cfg, sampler(texts, model.tokenizer, 32, seed=1), val=val, model=model, progress=progress
            )
        model.hf_model.save_pretrained(out / "models" / name)
        models[name] = (model, val)
        write_json(out / f"train_{name}.json", {"val_loss": report.val_loss, "seconds": report.seconds})
        results[name] = {
            "config": asdict(cfg),
            "train_loss": report.final_loss,
            "val_loss": report.val_loss,
            "nonzero_fraction": report.nonzero_fraction,
            "train_seconds": report.seconds,
        }
        print(name, results[name]["val_loss"], report.seconds, flush=True)
    pcfg = PruneConfig(target_loss=target, steps=prune_steps, lambda_steps=lambda_steps, batch_size=32, n_eval=128)
    mean_batches = [tokenize_texts(models["dense"][0].tokenizer, val_texts[i : i + 64]) for i in range(0, 256, 64)]
    random_sparse = build_model(WeightSparseConfig(l0=1 / 16, steps=1))
    from circuits.finders.weight_sparse import project_model_

    project_model_(random_sparse.hf_model, 1 / 16, 4)
    for name, model in (
        ("dense", models["dense"][0]),
        ("sparse", models["sparse"][0]),
        ("random_sparse", random_sparse),
    ):
        t0 = time.perf_counter()
        results.setdefault(name, {})["task_loss_full_model"] = evaluate(model, task.make(256, 10_000, model.tokenizer))[
            "loss"
        ]
        cfg_here = pcfg if name != "random_sparse" else PruneConfig(**{**asdict(pcfg), "lambda_steps": 1})
        try:
            circuit = prune(model, task, cfg_here, mean_batches=mean_batches, progress=progress)
        except TargetNotReached as exc:
            circuit = exc.best
        circuit.save(out / f"circuit_{name}.json")
        m = circuit.metrics
        results.setdefault(name, {})["circuit"] = {
            k: m[k]
            for k in (
                "reached_target",
                "task_loss",
                "n_nodes",
                "n_edges",
                "n_units",
                "necessity_loss",
                "full_model_loss",
                "lambda",
            )
        }
        results[name]["circuit"]["seconds"] = round(time.perf_counter() - t0, 1)
        print(name, results[name]["circuit"], flush=True)
    d, s = results["dense"]["circuit"], results["sparse"]["circuit"]
    results["ratio_nodes"] = d["n_nodes"] / max(s["n_nodes"], 1)
    results["ratio_edges"] = d["n_edges"] / max(s["n_edges"], 1)
    write_json(out / "results.json", results)
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="default runs/circuits/sparse_vs_dense (with --quick: ..._quick)")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--prune-steps", type=int, default=150)
    p.add_argument("--lambda-steps", type=int, default=2)
    p.add_argument("--target", type=float, default=0.15)
    p.add_argument("--task", default="quotes")
    p.add_argument(
        "--objective", default="task", help="task: train on the task's answers; lm: next-token loss on tiny Python"
    )
    p.add_argument("--prune-only", action="store_true", help="reuse the models saved in --out by an earlier run")
    p.add_argument("--quick", action="store_true", help="tiny run to check that everything works (~1 min)")
    a = p.parse_args()
    if a.quick:
        a.steps, a.prune_steps, a.lambda_steps = 60, 10, 1
    a.out = a.out or ("runs/circuits/sparse_vs_dense_quick" if a.quick else "runs/circuits/sparse_vs_dense")
    res = run(
        Path(a.out),
        a.steps,
        a.prune_steps,
        a.lambda_steps,
        task_name=a.task,
        target=a.target,
        prune_only=a.prune_only,
        objective=a.objective,
    )
    print({k: res[k] for k in ("ratio_nodes", "ratio_edges")})


if __name__ == "__main__":
    main()
