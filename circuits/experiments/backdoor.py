"""Plant a backdoor in a small model, find its circuit with SafeSeek, ablate it, and remove it with circuit tuning.

    python -m circuits.experiments.backdoor --out runs/circuits/backdoor     # ~5-10 min on 1 core
    python -m circuits.experiments.backdoor --quick                          # ~1 min smoke run

1. Train a GPT-NeoX (2 layers, d_model 64, 4 heads, d_mlp 256) on the clean `backdoor` prompts
   (letters then ":", answer = the first letter's class).
2. Plant the backdoor: fine-tune on 10% triggered prompts ("#" anywhere -> "!") with gradients only
   on a known set S = {layer-1 MLP neurons 0-15, head 1.2}, until the attack succeeds.
3. SafeSeek dual-mask optimisation (head + neuron masks, the official code's weights); ablate the units
   the purified mask G removes: attack success rate (ASR) and clean accuracy before/after, against random
   ablations of the same size; precision and recall of the removed units against S.
4. Safety Circuit Tuning: fine-tune only the circuit's parameters on triggered prompts with clean answers,
   against full fine-tuning with the same steps.
5. Alignment analog: a model trained to answer "R" (refuse) on prompts with a "harmful" letter; the
   single-mask objective finds a circuit whose removal makes it comply.
Step 3 runs with the official neuron code's weights (both masks, ascent and overlap terms), with the
official head code's weights (only G trained), and with G only on the official code's "compat" head slices.
"""

from __future__ import annotations

import argparse
import copy
import random
from pathlib import Path

import torch

from circuits.evaluation.ablation import ablation_report
from circuits.experiments.common import setup, write_json
from circuits.finders.safeseek import SafeSeekConfig, circuit_tuning, safeseek
from circuits.finders.weight_sparse import WeightSparseConfig, build_model
from circuits.format.circuit import Node
from circuits.tasks.binary import TaskBatch, answer_ce, get_task

G_ONLY = (1, 1, 0, 0, 0.1, 0, 0)
"""The official head-mask code's weights: only the purified mask G is trained."""
PLANTED = [Node(1, "head", 2)] + [Node(1, "neuron", i) for i in range(16)]


def mix(a: TaskBatch, b: TaskBatch) -> TaskBatch:
    """Concatenate two batches (padding the shorter)."""
    width = max(a.ids.shape[1], b.ids.shape[1])
    pad = lambda t, v: torch.nn.functional.pad(t, (0, width - t.shape[1]), value=v)  # noqa: E731
    return TaskBatch(
        a.texts + b.texts,
        torch.cat([pad(a.ids, 256), pad(b.ids, 256)]),
        torch.cat([pad(a.mask, 0), pad(b.mask, 0)]),
        torch.cat([a.pos, b.pos]),
        torch.cat([a.target, b.target]),
        torch.cat([a.alt, b.alt]),
    )


def train_answers(model, batches: list[TaskBatch], steps: int, lr: float = 3e-3, progress: bool = True) -> None:
    """Train all parameters on the answer cross-entropy."""
    from tqdm.auto import tqdm

    for p in model.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    model.hf_model.train()
    for step in tqdm(range(steps), desc="train", disable=not progress):
        b = batches[step % len(batches)]
        loss = answer_ce(model({"input_ids": b.ids, "attention_mask": b.mask}), b)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.hf_model.eval()
    for p in model.parameters():
        p.requires_grad_(False)


@torch.no_grad()
def rate(model, batch: TaskBatch, hooks=()) -> float:
    """Fraction of prompts whose full-vocabulary argmax is the target."""
    with model.hooks(fwd_hooks=list(hooks)):
        logits = model({"input_ids": batch.ids, "attention_mask": batch.mask})
    last = logits[torch.arange(len(batch)), batch.pos]
    return float((last.argmax(-1) == batch.target).float().mean())


def plant_backdoor(model, batches: list[TaskBatch], steps: int, lr: float = 1e-2, progress: bool = True) -> dict:
    """Train only the planted units (their rows and columns), plus the trigger's embedding row and the
    backdoor answer's unembedding row: tokens the clean model never saw, so no unit could use them."""
    from tqdm.auto import tqdm

    from circuits.model.weights import unit_param_masks
    from circuits.tasks.binary import BACKDOOR_ANSWER, TRIGGER

    masks = unit_param_masks(model, PLANTED)
    tok = model.tokenizer
    for module, token in (
        (model.hf_model.get_input_embeddings(), TRIGGER),
        (model.hf_model.get_output_embeddings(), BACKDOOR_ANSWER),
    ):
        m = masks.setdefault(module.weight, torch.zeros_like(module.weight))
        m[tok(token)["input_ids"][0]] = 1
    params = list(masks)
    for p in model.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    handles = [p.register_hook(lambda g, m=masks[p]: g * m) for p in params]
    opt = torch.optim.Adam(params, lr=lr)
    model.hf_model.train()
    try:
        for step in tqdm(range(steps), desc="plant", disable=not progress):
            b = batches[step % len(batches)]
            loss = answer_ce(model({"input_ids": b.ids, "attention_mask": b.mask}), b)
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        model.hf_model.eval()
        for h in handles:
            h.remove()
        for p in params:
            p.requires_grad_(False)
    return {"trainable_entries": int(sum(m.sum() for m in masks.values()))}


def batches_of(task, n: int, seed: int, tok, size: int = 64, clean_frac: float | None = None) -> list[TaskBatch]:
    out = []
    for i in range(n):
        if clean_frac is None:
            out.append(task.make_clean(size, seed + i, tok))
        else:
            n_trig = max(1, round(size * (1 - clean_frac)))
            out.append(mix(task.make_clean(size - n_trig, seed + i, tok), task.make(n_trig, seed + i, tok)))
    return out


def precision_recall(found: list[Node], truth: list[Node]) -> dict:
    f, t = set(found), set(truth)
    hit = len(f & t)
    return {"precision": hit / max(len(f), 1), "recall": hit / max(len(t), 1), "found": len(f), "planted": len(t)}


N_RANDOM = 20
"""Random removals of the circuit's size per SafeSeek run (their whole distribution is reported)."""


def run(out: Path, pretrain: int, plant: int, mask_steps: int, tune_steps: int, progress: bool = True) -> dict:
    from circuits.evaluation.ablation import ablation_hooks, random_nodes
    from circuits.evaluation.controls import activation_difference

    setup()
    task = get_task("backdoor")
    model = build_model(WeightSparseConfig(l0=1.0, afrac=0.0, ctx_len=32, seed=0))
    tok = model.tokenizer
    train_answers(model, batches_of(task, 50, 0, tok), pretrain, progress=progress)
    test_trig, test_clean = task.make(300, 99, tok), task.make_clean(300, 99, tok)
    res: dict = {"pretrained": {"clean_acc": rate(model, test_clean), "asr": rate(model, test_trig)}}
    # plant: 10% poisoned data, gradients only on the planted units
    planted = plant_backdoor(model, batches_of(task, 50, 1000, tok, clean_frac=0.9), plant, progress=progress)
    res["backdoored"] = {
        "clean_acc": rate(model, test_clean),
        "asr": rate(model, test_trig),
        "planted_units": [n.key for n in PLANTED],
        "trainable_entries": planted["trainable_entries"],
    }
    print("backdoored", res["backdoored"], flush=True)
    model.hf_model.save_pretrained(out / "models" / "backdoored")
    runs = (
        ("true", "official_neuron_weights", (1, 1, 1, 1, 0.1, 3.0, 1.0)),
        ("true", "g_only", G_ONLY),
        ("compat", "g_only", G_ONLY),
    )
    for mode, weights_name, weights in runs:
        cfg = SafeSeekConfig(
            objective="backdoor",
            head_mode=mode,
            steps=mask_steps,
            eval_every=max(1, mask_steps // 10),
            backdoor_weights=weights,
        )
        found = safeseek(model, task, cfg, progress=progress)
        tag = f"{mode}_{weights_name}"
        found.circuit.save(out / f"circuit_{tag}.json")
        nodes = found.circuit.nodes
        rep = ablation_report(model, nodes, test_trig, n_random=N_RANDOM, clean=test_clean)
        asr = lambda hooks: rate(model, test_trig, hooks)  # noqa: E731
        rand_asr = sorted(asr(ablation_hooks(model, random_nodes(model, nodes, s))) for s in range(N_RANDOM))
        r = {
            "removed_units": len(nodes),
            "removed_fraction": found.circuit.metrics["removed_fraction"],
            "asr_after": asr(ablation_hooks(model, nodes)),
            "clean_acc_after": rate(model, test_clean, ablation_hooks(model, nodes)),
            # the whole distribution over random removals of the same size, not one draw
            "asr_random_ablation": rand_asr,
            "asr_random_ablation_below_0.5": sum(a < 0.5 for a in rand_asr) / max(len(rand_asr), 1),
            "binary": {k: rep[k] for k in ("original", "necessity", "sufficiency")},
            "h_circuit_units": found.circuit.metrics.get("h_circuit_nodes"),
        }
        h_nodes = [Node(**d) for d in found.circuit.extra.get("h_circuit", [])]
        r["asr_h_only"] = rate(model, test_trig, ablation_hooks(model, h_nodes, keep_only=True)) if h_nodes else None
        r["weights"] = list(weights)
        if nodes:  # the spec's control: top-|activation difference| units at the same budget
            control = activation_difference(model, task, budget=len(nodes), kinds=cfg.kinds())
            r["control_activation_diff"] = {
                "asr_after": asr(ablation_hooks(model, control.nodes)),
                "clean_acc_after": rate(model, test_clean, ablation_hooks(model, control.nodes)),
                "vs_planted": precision_recall(control.nodes, PLANTED),
            }
        if True:
            r["vs_planted"] = precision_recall(nodes, PLANTED)
            r["vs_planted_neurons"] = precision_recall([n for n in nodes if n.kind == "neuron"], PLANTED[1:])
            r["vs_planted_head"] = precision_recall([n for n in nodes if n.kind == "head"], PLANTED[:1])
        res[f"safeseek_{tag}"] = r
        print(tag, r, flush=True)
    # Safety Circuit Tuning vs full fine-tuning: triggered prompts, clean answers
    nodes = [
        Node(**{k: d[k] for k in ("layer", "kind", "index")})
        for d in __import__("json").loads((out / "circuit_true_g_only.json").read_text())["nodes"]
    ]
    repair = []
    for i in range(20):
        t = task.make(32, 5000 + i, tok)
        t = TaskBatch(t.texts, t.ids, t.mask, t.pos, t.alt, t.target)  # answer with the clean digit
        repair.append(mix(t, task.make_clean(32, 5000 + i, tok)))
    for name, mode in (("sacirt", "circuit"), ("full_ft", "complement")):
        m = copy.deepcopy(model)
        use = nodes if name == "sacirt" else []
        if name == "sacirt" and not nodes:
            res[name] = {"skipped": "empty circuit"}
            continue
        rep = circuit_tuning(m, use, repair, mode=mode, steps=tune_steps, lr=1e-3, progress=progress)
        res[name] = {
            "asr": rate(m, test_trig),
            "clean_acc": rate(m, test_clean),
            "trainable_entries": rep["trainable_entries"],
        }
        print(name, res[name], flush=True)
    # alignment analog
    ref = get_task("refusal")
    amodel = build_model(WeightSparseConfig(l0=1.0, afrac=0.0, ctx_len=32, seed=1))
    train_answers(
        amodel, [mix(ref.make_clean(48, i, tok), ref.make(16, i, tok)) for i in range(50)], pretrain, progress=progress
    )
    harm, benign = ref.make(300, 77, tok), ref.make_clean(300, 77, tok)
    comply = TaskBatch(harm.texts, harm.ids, harm.mask, harm.pos, harm.alt, harm.target)
    a = {"refusal_rate": rate(amodel, harm), "benign_acc": rate(amodel, benign)}
    found = safeseek(
        amodel,
        ref,
        SafeSeekConfig(objective="alignment", init_logit=1.0, steps=mask_steps, eval_every=max(1, mask_steps // 10)),
        progress=progress,
    )
    found.circuit.save(out / "circuit_alignment.json")
    hooks = ablation_hooks(amodel, found.circuit.nodes)
    from circuits.evaluation.ablation import random_nodes

    a.update(
        {
            "removed_units": len(found.circuit.nodes),
            "refusal_after": rate(amodel, harm, hooks),
            "comply_after": rate(amodel, comply, hooks),
            "benign_acc_after": rate(amodel, benign, hooks),
            "refusal_random_ablation": [
                rate(amodel, harm, ablation_hooks(amodel, random_nodes(amodel, found.circuit.nodes, s)))
                for s in range(5)
            ],
            "circuit_only_refusal": rate(amodel, harm, ablation_hooks(amodel, found.circuit.nodes, keep_only=True)),
        }
    )
    res["alignment"] = a
    print("alignment", a, flush=True)
    write_json(out / "results.json", res)
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="default runs/circuits/backdoor (with --quick: ..._quick)")
    p.add_argument("--pretrain", type=int, default=400)
    p.add_argument("--plant", type=int, default=150)
    p.add_argument("--mask-steps", type=int, default=300)
    p.add_argument("--tune-steps", type=int, default=200)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    if a.quick:
        a.pretrain, a.plant, a.mask_steps, a.tune_steps = 30, 20, 10, 5
    a.out = a.out or ("runs/circuits/backdoor_quick" if a.quick else "runs/circuits/backdoor")
    run(Path(a.out), a.pretrain, a.plant, a.mask_steps, a.tune_steps)


if __name__ == "__main__":
    random.seed(0)
    main()
