"""MoE-NoiseFilter demo: iso-parameter top-1 MoE vs dense MLP as feature noise grows; router diagnostics.

    python -m interp.contrib.moe.experiments.noise_filter [--seeds 5] [--steps 2000] [--quick] [--no-lm]

Catalog setting: K = 4 modules, d = 32, signal rank 4 per module, n = 4,000 train / 2,000 test,
σ in {0, 0.5, 1, 2}, Adam (lr 3e-3, batch 128) for 2,000 steps, 5 seeds. MoE: 4 ReLU experts of width 16,
top-1, linear router; dense: one ReLU MLP of the same parameter count (width 68). Metrics: test MSE,
perturbation sensitivity (δ ~ N(0, 0.1² I)), steps until the smoothed train loss first reaches 1.2x the
better model's final loss, noise energy passed by the first layer from outside the module's subspace,
routing purity (tokens of one module sharing an expert).

On SmolLM2 (`smollm2-135m`, cached `blocks.12.hook_resid_post` token rows of stdlib-docs / stdlib /
pydoc-topics, 48 x 64 tokens each, position 0 dropped, top-64 PCs, standardised): classify the corpus
with Gaussian feature noise of σ x the feature scale added (train and test); iso-parameter MoE
(4 experts x 16) vs dense; test accuracy and routing purity with respect to the corpus.
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F

from interp.contrib.common.fit import fit, make_optimizer, random_batches
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.moe.noise_filter import (
    DenseMLP,
    Top1MoE,
    iso_dense_width,
    modular_task,
    n_params,
    noise_energy_fraction,
    perturbation_sensitivity,
    routing_purity,
)
from interp.contrib.report import fmt, markdown_table

D, E, H_E = 32, 4, 16


def train(model, x, y, steps: int, seed: int, loss_fn) -> list[float]:
    res = fit(
        make_optimizer(model.parameters(), lr=3e-3),
        lambda i: loss_fn(model(x[i]), y[i]),
        random_batches(len(x), 128, steps, seed),
        record_losses=True,
    )
    curve, ema = [], None
    for v in res.losses:
        ema = v if ema is None else 0.95 * ema + 0.05 * v
        curve.append(ema)
    return curve


def steps_to(curve: list[float], target: float) -> int:
    return next((i + 1 for i, v in enumerate(curve) if v <= target), len(curve) + 1)


def synthetic(seed: int, sigma: float, steps: int) -> dict[str, float]:
    tr = modular_task(4000, sigma, seed, spec_seed=seed)
    te = modular_task(2000, sigma, seed + 1000, spec_seed=seed)
    out, curves, models = {}, {}, {}
    for name in ("moe", "dense"):
        torch.manual_seed(seed)
        model = Top1MoE(D, 1, H_E, E) if name == "moe" else DenseMLP(D, 1, iso_dense_width(D, 1, H_E, E))
        curves[name] = train(model, tr.x, tr.y, steps, seed, F.mse_loss)
        models[name] = model
        with torch.no_grad():
            out[f"{name} mse"] = float(F.mse_loss(model(te.x), te.y))
        out[f"{name} sensitivity"] = perturbation_sensitivity(model, te.x)
    target = 1.2 * min(c[-1] for c in curves.values())
    for name in curves:
        out[f"{name} steps"] = steps_to(curves[name], target)
    moe, dense = models["moe"], models["dense"]
    with torch.no_grad():
        moe(te.x)
    e = moe.last_experts
    out["moe noise passed"] = sum(
        noise_energy_fraction(moe.w1[int(e[i])].detach(), te.bases[int(te.module[i])]) for i in range(0, len(e), 20)
    ) / len(range(0, len(e), 20))
    out["dense noise passed"] = sum(noise_energy_fraction(dense.fc1.weight.detach(), te.bases[m]) for m in range(4)) / 4
    out["purity"] = routing_purity(e, te.module)
    return out


def lm_run(seeds: int, steps: int) -> dict[str, dict[str, list[float]]]:
    from interp.contrib.lm_features import hook_name, labelled_corpora

    x, y = labelled_corpora(hook_name(12), n_seq=48, per_sequence=False)
    x = x.double() - x.double().mean(0)
    _, _, vh = torch.linalg.svd(x, full_matrices=False)
    z = (x @ vh[:64].T).float()
    z = z / z.std(0)
    res: dict[str, dict[str, list[float]]] = {}
    for sigma in (0.0, 1.0, 2.0):
        row: dict[str, list[float]] = {"moe acc": [], "dense acc": [], "purity": []}
        for s in range(seeds):
            g = torch.Generator().manual_seed(s)
            perm = torch.randperm(len(y), generator=g)
            tr, te = perm[: len(y) * 2 // 3], perm[len(y) * 2 // 3 :]
            zn = z + sigma * torch.randn(z.shape, generator=g)
            for name in ("moe", "dense"):
                torch.manual_seed(s)
                model = Top1MoE(64, 3, H_E, E) if name == "moe" else DenseMLP(64, 3, iso_dense_width(64, 3, H_E, E))
                train(model, zn[tr], y[tr], steps, s, F.cross_entropy)
                with torch.no_grad():
                    row[f"{name} acc"].append(float((model(zn[te]).argmax(-1) == y[te]).float().mean()))
                if name == "moe":
                    row["purity"].append(routing_purity(model.last_experts, y[te]))
        res[f"σ={sigma}"] = row
    return res


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__, seeds=5, steps=2000, quick="1 seed, 150 steps, sigma 0 and 2, no LM run", no_lm="skip the SmolLM2 run"
    )
    a = parse(ap, argv)
    seeds, steps = (1, 150) if a.quick else (a.seeds, a.steps)
    sigmas = (0.0, 2.0) if a.quick else (0.0, 0.5, 1.0, 2.0)
    assert abs(n_params(Top1MoE(D, 1, H_E, E)) - n_params(DenseMLP(D, 1, iso_dense_width(D, 1, H_E, E)))) <= D + 2
    syn = {}
    for sigma in sigmas:
        per = [synthetic(s, sigma, steps) for s in range(seeds)]
        syn[f"σ={sigma}"] = {k: [p[k] for p in per] for k in per[0]}
    keys = ["mse", "sensitivity", "steps", "noise passed"]
    print(f"modular task, iso-parameter top-1 MoE vs dense (mean ± sd over {seeds} seeds, {steps} steps)")
    print(
        markdown_table(
            ["σ", *(f"{m} {k}" for k in keys for m in ("moe", "dense")), "routing purity"],
            [
                [
                    s,
                    *(fmt(r[f"{m} {k}"], 1 if k == "steps" else 3) for k in keys for m in ("moe", "dense")),
                    fmt(r["purity"]),
                ]
                for s, r in syn.items()
            ],
        )
    )
    out = {"synthetic": syn}
    if not (a.quick or a.no_lm):
        lm = lm_run(min(seeds, 3), 600)
        print("\nsmollm2-135m layer 12 (64 PCs), corpus classification with feature noise (3 seeds, 600 steps)")
        print(
            markdown_table(
                ["σ", "moe acc", "dense acc", "routing purity (corpus)"],
                [[s, fmt(r["moe acc"]), fmt(r["dense acc"]), fmt(r["purity"])] for s, r in lm.items()],
            )
        )
        out["smollm2"] = lm
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
