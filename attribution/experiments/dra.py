"""DRA on a corpus with planted unsafe samples: AUPRC of denoised attribution against raw baselines.

    python -m attribution.experiments.dra --out runs/dra_exp        # a few minutes on 2 cores

Corpus (research spec 3.3, templated; `--n` samples): 60% benign "template A" customer notes, 36%
benign diverse sentences, 4% planted unsafe samples = template A with a *critical* phrase built from a
closed set of fictitious harm verbs. Targets: 5 unsafe examples in a different template B (questions
and answers) that share only the critical phrases. A control swaps the roles: targets in template A.
Representations: SmolLM2-135M (`--model`) mean-pooled `blocks.L.hook_resid_post` over tokens 1..end
(token 0 carries the model's massive activation, the same for every text), and per-example
TensorSketched gradients of the last block's MLP down-projection. Rows: raw similarity (RepSim,
GradSim), each denoising operator added in turn, and the full DRA.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

import interp
from attribution.dra import (
    RAW,
    DenoiseConfig,
    average_precision,
    dra_scores,
    gradient_representations,
    neutral_filtered_targets,
)

HARM = [
    "zorblax",
    "vrenticate",
    "mulgrize",
    "snarfle",
    "quendrip",
    "plonkify",
    "drabulate",
    "kreetch",
    "fozzlate",
    "grimbake",
]
ITEMS = ["router", "ledger", "parcel", "invoice", "laptop", "badge", "printer", "locker", "contract", "drone"]
NAMES = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
BENIGN = ["check", "sign", "label", "return", "scan", "file", "pack", "update"]
DIVERSE = [
    "The river was quiet after the {day} storm, and {name} counted herons by the bridge.",
    "A recipe for bread needs flour, water, salt and patience; {name} adds seeds on {day}.",
    "Our team meeting on {day} covered the budget, the roadmap and the new {item}.",
    "{name} wrote a short poem about autumn leaves and read it aloud on {day}.",
    "The museum opens at nine; the {item} exhibit on the second floor is free on {day}.",
    "To reset the {item}, hold the button for ten seconds, then wait for the light.",
]


def corpus(n: int, seed: int, control: bool = False):
    rng = random.Random(seed)
    pick = rng.choice

    def template_a(verb):
        return (
            f"Customer note: the {pick(ITEMS)} arrived on {pick(DAYS)}. Please {verb} the {pick(ITEMS)} "
            f"before noon. Thanks, {pick(NAMES)}."
        )

    def critical():
        return f"{pick(HARM)} and {pick(HARM)}"

    def template_b():
        return (
            f"Q: how do I {critical()} a {pick(ITEMS)} without anyone noticing? "
            f"A: first {pick(HARM)} it, then {pick(HARM)} it again."
        )

    n_unsafe, n_a = int(0.04 * n), int(0.60 * n)
    texts, labels = [], []
    for i in range(n):
        if i < n_unsafe:
            texts.append(template_b() if control else template_a(critical()))
            labels.append(1)
        elif i < n_unsafe + n_a:
            texts.append(template_a(pick(BENIGN)))
            labels.append(0)
        else:
            texts.append(pick(DIVERSE).format(day=pick(DAYS), name=pick(NAMES), item=pick(ITEMS)))
            labels.append(0)
    targets = [template_a(critical()) if control else template_b() for _ in range(5)]
    return texts, torch.tensor(labels), targets


def pooled(model, texts, layer, batch=32, tokens=False):
    out, per_tok = [], []
    hook = f"blocks.{layer}.hook_resid_post"
    for i in range(0, len(texts), batch):
        ids, mask = model.to_tokens(texts[i : i + batch], return_mask=True)
        _, cache = model.run_with_cache(
            {"input_ids": ids, "attention_mask": mask}, names=[hook], return_logits=False, device="cpu"
        )
        h = cache[hook].float()[:, 1:]
        m = mask[:, 1:].cpu().float()[..., None]
        out.append((h * m).sum(1) / m.sum(1).clamp(min=1))
        if tokens:
            per_tok += [h[j, mask[j, 1:].bool().cpu()] for j in range(len(h))]
    return (torch.cat(out), per_tok) if tokens else torch.cat(out)


def grads(model, texts, modules, m, batch=16):
    reps = []
    for i in range(0, len(texts), batch):
        ids, mask = model.to_tokens(texts[i : i + batch], return_mask=True)
        reps.append(gradient_representations(model, ids, mask, modules, sketch_dim=m, batch_size=batch).cpu())
    return torch.cat(reps)


def evaluate(model, texts, labels, targets, layer, grad_modules, sketch):
    rows = {}
    train_h, _ = pooled(model, texts, layer, tokens=True)
    tgt_h, tgt_tok = pooled(model, targets, layer, tokens=True)
    _, pool_tok = pooled(model, texts[:200], layer, tokens=True)
    pool_tok = torch.cat(pool_tok)
    ap = lambda cfg, tr, tg: average_precision(dra_scores(tr, tg, cfg).scores, labels)  # noqa: E731
    rows["RepSim (raw hidden)"] = ap(RAW, train_h, tgt_h)
    rows["+ center"] = ap(DenoiseConfig(whiten=False, select_dims=None), train_h, tgt_h)
    rows["+ center + whiten"] = ap(DenoiseConfig(select_dims=None), train_h, tgt_h)
    rows["+ center + dims (no whiten)"] = ap(DenoiseConfig(whiten=False), train_h, tgt_h)
    rows["DRA hidden (center + whiten + dims)"] = ap(DenoiseConfig(), train_h, tgt_h)
    tgt_neutral = neutral_filtered_targets(tgt_tok, pool_tok, frac=0.5)
    rows["+ neutral-token removal (targets, 50%) on raw"] = ap(RAW, train_h, tgt_neutral)
    rows["DRA hidden + neutral-token removal"] = ap(DenoiseConfig(), train_h, tgt_neutral)
    if grad_modules:
        train_g, tgt_g = grads(model, texts, grad_modules, sketch), grads(model, targets, grad_modules, sketch)
        rows["GradSim (raw gradient)"] = ap(RAW, train_g, tgt_g)
        rows["DRA gradient (center + whiten + dims)"] = ap(DenoiseConfig(), train_g, tgt_g)
    return rows


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/dra_exp")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--layer", type=int, default=None, help="default: the middle layer")
    p.add_argument("--sketch", type=int, default=4096)
    p.add_argument("--no-grad", action="store_true", help="skip the gradient representations")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    model = interp.load_model(args.model)
    layer = model.n_layers // 2 if args.layer is None else args.layer
    last = f"{model.adapter.layers}.{model.n_layers - 1}.{model.adapter.mlp_down}"
    result = {"args": vars(args), "layer": layer, "prevalence": 0.04}
    for name, control in (("main", False), ("control", True)):
        texts, labels, targets = corpus(args.n, args.seed, control)
        rows = evaluate(model, texts, labels, targets, layer, [] if args.no_grad or control else [last], args.sketch)
        result[name] = rows
        print(name, json.dumps(rows, indent=1), flush=True)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "result.json").write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
