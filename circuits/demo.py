"""`interp demo` step of the circuits family: a refusal circuit found with SafeSeek in a tiny model trained here.

The demo's own model (SmolLM2 by default) is far too slow to search on 2 CPU cores within a demo, so
the step trains a tiny GPT-NeoX on the `refusal` toy (a few seconds), finds the circuit whose removal
makes it comply, ablates it against random ablations of the same size, and writes the circuit JSON and
its graph under `workdir/circuits/`.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch


def step(model, workdir: Path) -> dict:
    from circuits.evaluation.ablation import ablation_hooks, random_nodes
    from circuits.experiments.backdoor import mix, rate, train_answers
    from circuits.finders.safeseek import SafeSeekConfig, safeseek
    from circuits.finders.weight_sparse import WeightSparseConfig, build_model
    from circuits.format.graph_html import write_html
    from circuits.tasks.binary import TaskBatch, get_task

    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = Path(workdir) / "circuits"
        task = get_task("refusal")
        tiny = build_model(
            WeightSparseConfig(d_model=32, n_heads=2, d_mlp=64, n_layers=2, l0=1.0, afrac=0.0, ctx_len=32)
        )
        tok = tiny.tokenizer
        train_answers(
            tiny, [mix(task.make_clean(48, i, tok), task.make(16, i, tok)) for i in range(20)], 150, progress=False
        )
        harm, benign = task.make(200, 7, tok), task.make_clean(200, 7, tok)
        found = safeseek(
            tiny, task, SafeSeekConfig(steps=150, lr=5e-2, eval_every=25, n_train=64, n_val=64), progress=False
        )
        circuit = found.circuit
        circuit.save(out / "circuit.json")
        write_html(circuit, out / "circuit.html")
        hooks = ablation_hooks(tiny, circuit.nodes)
        rand = [rate(tiny, harm, ablation_hooks(tiny, random_nodes(tiny, circuit.nodes, s))) for s in range(3)]
        comply = TaskBatch(harm.texts, harm.ids, harm.mask, harm.pos, harm.alt, harm.target)
        return {
            "model": "tiny GPT-NeoX (2 layers, d_model 32) trained on the refusal toy",
            "circuit": str(out / "circuit.json"),
            "graph": str(out / "circuit.html"),
            "units_removed": f"{len(circuit.nodes)} of {circuit.metrics['n_units']}",
            "refusal_rate": round(rate(tiny, harm), 3),
            "refusal_with_circuit_removed": round(rate(tiny, harm, hooks), 3),
            "comply_with_circuit_removed": round(rate(tiny, comply, hooks), 3),
            "refusal_with_random_removal": round(sum(rand) / len(rand), 3),
            "benign_accuracy_with_circuit_removed": round(rate(tiny, benign, hooks), 3),
            "seconds": round(time.perf_counter() - t0, 1),
        }
    finally:
        torch.set_num_threads(threads)
