"""DeepUFM and DNC-Spectra demos.

Part A (DeepUFM): deep unconstrained-feature models, K=6 classes x 20 samples, width 32, depths 1/2/4/6,
3 seeds, 4000 full-batch GD steps on unregularized cross-entropy, random and spectral initialisation; plus a
width sweep (16/32/64) at depth 4. Reported: effective rank and numerical rank (singular values > 0.1 x
the largest) of the class-mean logit matrix, and NC2 (distance of the penultimate class means to a simplex).
Claim: depth 1 ends at neural collapse (rank K-1 = 5); deeper models end lower-rank and further from the
simplex; wider random-init models move back towards higher rank.

Part B (DNC-Spectra): an MLP 64 -> 128 -> 128 -> 10 (ReLU) on a synthetic 10-class Gaussian-mixture task
(1000 samples, 64 features, within-class noise 3; the catalog's sklearn digits is not installed here), trained with
weight decay
into the terminal phase (100% train accuracy). At init, mid-training and the end we compute the exact
last-layer Gauss-Newton matrix (1280 x 1280) and measure how much of its top eigenspace lies in the
subspace predicted from the class means, against the random-subspace baseline.

    python -m interp.contrib.geometry.experiments.collapse [--quick] [--spectra-seeds N]

`--spectra-seeds N` runs Part B alone over N MLP trainings (data draw and init; seed 0 is the default run's).

`--equal-loss N` runs the DeepUFM equal-loss comparison alone over N seeds (issue 42; the paper proposes no
method, so the referee's first alternative is the account "deeper models only train faster": depth 1 trained
at lr 1.0 until its loss reaches depth 4's final loss, and depth 4 read at the first checkpoint where its loss
is at most depth 1's final loss; effective rank of the class-mean logits at equal loss).

Strong baseline for Part B (issue 42; `kfac_subspace`): the top-r eigenspace of the Kronecker-factored
Gauss-Newton A (x) B (K-FAC: A the mean softmax Hessian, B the feature second moment), the same dimension r,
no labels and nothing to tune. Printed as a column beside the class-mean overlap, with the paired difference.
"""

from __future__ import annotations

import json

import torch
from torch import nn
from tqdm import tqdm

from interp.contrib.common.fit import fit, make_optimizer
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.geometry.neural_collapse import UFMConfig, nc_metrics, spectrum_check, train_deep_ufm
from interp.contrib.report import fmt


def ufm_sweep(seeds: int = 3, steps: int = 4000) -> dict:
    jobs = [("depth", init, L, 32, s) for init in ("random", "spectral") for L in (1, 2, 4, 6) for s in range(seeds)]
    jobs += [("width", "random", 4, d, s) for d in (16, 64) for s in range(seeds)]
    raw: dict[tuple, list] = {}
    for _kind, init, depth, width, seed in tqdm(jobs, desc="deep UFM"):
        cfg = UFMConfig(
            depth=depth, width=width, init=init, steps=steps, seed=seed, init_scale=0.1 if init == "random" else 0.8
        )
        h = train_deep_ufm(cfg, record_every=steps)
        sv = torch.tensor(h["sv"][-1])
        raw.setdefault((init, depth, width), []).append(
            {"eff_rank": h["eff_rank"][-1], "rank": int((sv > 0.1).sum()), "nc2": h["nc2"][-1], "loss": h["loss"][-1]}
        )
    out = {}
    for (init, depth, width), runs in raw.items():
        out[f"{init}/L={depth}/d={width}"] = {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]}
    return out


def mixture(n: int, d: int = 64, k: int = 10, noise: float = 3.0, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(k, d, generator=g)
    y = torch.arange(n) % k
    return centres[y] + noise * torch.randn(n, d, generator=g), y


def spectra(steps: int = 3000, checkpoints=(0, 20, 200, 3000), seed: int = 0) -> dict:
    x, y = mixture(1000, seed=seed)
    torch.manual_seed(seed)
    body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
    head = nn.Linear(128, 10)
    opt = make_optimizer([*body.parameters(), *head.parameters()], lr=0.05, name="sgd", momentum=0.9, weight_decay=5e-4)
    out = {}

    def checkpoint(step: int, _loss=None) -> None:
        if step in checkpoints:
            with torch.no_grad():
                feats = body(x)
                acc = float((head(feats).argmax(1) == y).float().mean())
                check = spectrum_check(feats, y, head.weight, head.bias)
                nc = nc_metrics(feats, y, head.weight)
            out[f"step {step}"] = {
                "train_acc": acc,
                "nc1": nc["nc1"],
                "nc2": nc["nc2"],
                "nc3": nc["nc3"],
                **{k: v for k, v in check.items() if k != "top_eigs"},
                "top_eig_ratio_r_over_r+1": check["top_eigs"][check["predicted_dim"] - 1]
                / check["top_eigs"][check["predicted_dim"]],
            }

    checkpoint(0)
    fit(
        opt,
        lambda _: nn.functional.cross_entropy(head(body(x)), y),
        tqdm(range(steps), desc="MLP"),
        callback=checkpoint,
    )
    return out


def spectra_seeds(seeds: int) -> None:
    """Part B alone over `seeds` MLP trainings (seed s: its own mixture draw and init; seed 0 is the default
    run's): mean ± sd per checkpoint of the overlap, its random baseline, the trace share and NC1."""
    runs = [spectra(seed=s) for s in range(seeds)]
    print(json.dumps(runs, indent=1))
    print(
        f"\n| checkpoint ({seeds} MLP seeds) | train acc | NC1 | overlap of top-r GN eigvecs with class-mean subspace"
        " | random baseline | GN trace in subspace | eigengap outliers | strong baseline: overlap with K-FAC top-r |"
        " class-mean - K-FAC, paired |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for key in runs[0]:
        rs = [r[key] for r in runs]
        col = {k: fmt([r[k] for r in rs]) for k in ("train_acc", "nc1", "overlap_top", "random_baseline")}
        diff = [r["overlap_top"] - r["overlap_kfac"] for r in rs]
        print(
            f"| {key} | {col['train_acc']} | {col['nc1']} | {col['overlap_top']} (r={rs[0]['predicted_dim']}) | "
            f"{col['random_baseline']} | {fmt([r['trace_in_subspace'] for r in rs])} | {[r['outliers'] for r in rs]} | "
            f"{fmt([r['overlap_kfac'] for r in rs])} | {fmt(diff)} ({sum(d > 0 for d in diff)}/{len(diff)} higher) |"
        )


def first_at_or_below(hist: dict, loss: float) -> dict:
    """The first recorded checkpoint of a `train_deep_ufm` history with loss <= `loss` (else the last)."""
    i = next((i for i, v in enumerate(hist["loss"]) if v <= loss), len(hist["loss"]) - 1)
    return {"step": hist["step"][i], "loss": hist["loss"][i], "eff_rank": hist["eff_rank"][i]}


def equal_loss(seeds: int, steps: int = 4000, long_steps: int = 40_000, depth: int = 4) -> dict:
    """DeepUFM at equal loss (random init 0.1, width 32): per seed, depth 1 and `depth` after `steps` (lr 0.2),
    depth 1 continued at lr 1.0 for up to `long_steps` until it reaches the deep model's final loss, and the
    deep model at the first checkpoint (every 10 steps) where its loss is at most depth 1's final loss."""
    rows = {f"depth 1, {steps} steps": [], f"depth {depth}, {steps} steps": [], "depth 1 at the deep loss": []}
    rows[f"depth {depth} at the depth-1 loss"] = []
    for s in range(seeds):
        cfg = dict(width=32, init="random", init_scale=0.1, seed=s)
        h1 = train_deep_ufm(UFMConfig(depth=1, steps=steps, **cfg), record_every=steps)
        hd = train_deep_ufm(UFMConfig(depth=depth, steps=steps, **cfg), record_every=10)
        hl = train_deep_ufm(UFMConfig(depth=1, steps=long_steps, lr=1.0, **cfg), record_every=1000)
        last = lambda h: {"step": h["step"][-1], "loss": h["loss"][-1], "eff_rank": h["eff_rank"][-1]}  # noqa: E731
        rows[f"depth 1, {steps} steps"].append(last(h1))
        rows[f"depth {depth}, {steps} steps"].append(last(hd))
        rows["depth 1 at the deep loss"].append(first_at_or_below(hl, hd["loss"][-1]))
        rows[f"depth {depth} at the depth-1 loss"].append(first_at_or_below(hd, h1["loss"][-1]))
    print(f"\n| DeepUFM at equal loss ({seeds} seeds; K = 6, width 32, random init 0.1) | step | loss | eff. rank |")
    print("|---|---|---|---|")
    for name, rs in rows.items():
        print(
            f"| {name} | {fmt([r['step'] for r in rs], 0)} | {fmt([r['loss'] for r in rs], 6)} | "
            f"{fmt([r['eff_rank'] for r in rs], 2)} |"
        )
    return rows


def main(argv=None) -> None:
    ap = experiment_parser(__doc__, seeds=None, quick="1 seed, 800 UFM steps, 600 MLP steps")
    ap.add_argument(
        "--spectra-seeds", type=int, default=0, help="run Part B alone over this many MLP seeds (mean ± sd)"
    )
    ap.add_argument("--equal-loss", type=int, default=0, help="run the DeepUFM equal-loss comparison alone, N seeds")
    a = parse(ap, argv)
    if a.spectra_seeds < 0 or a.equal_loss < 0:
        ap.error("--spectra-seeds and --equal-loss must be non-negative")
    if a.equal_loss:
        equal_loss(a.equal_loss, *((400, 4000) if a.quick else ()))
        return
    if a.spectra_seeds:
        spectra_seeds(a.spectra_seeds)
        return
    ufm = ufm_sweep(1, 800) if a.quick else ufm_sweep()
    spec = spectra(600, (0, 20, 600)) if a.quick else spectra()
    print(json.dumps({"deep_ufm": ufm, "spectra": spec}, indent=1))
    print("\n| UFM init / depth / width | eff. rank of class-mean logits | rank (sv > 0.1) | NC2 | final loss |")
    print("|---|---|---|---|---|")
    for key, r in ufm.items():
        print(f"| {key} | {r['eff_rank']:.2f} | {r['rank']:.1f} | {r['nc2']:.3f} | {r['loss']:.1e} |")
    print(
        "\n| checkpoint | train acc | NC1 | overlap of top-r GN eigvecs with class-mean subspace | random baseline | "
        "GN trace in subspace | eigengap outliers | strong baseline: overlap with K-FAC top-r |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for key, r in spec.items():
        print(
            f"| {key} | {r['train_acc']:.3f} | {r['nc1']:.3f} | {r['overlap_top']:.3f} (r={r['predicted_dim']}) | "
            f"{r['random_baseline']:.3f} | {r['trace_in_subspace']:.3f} | {r['outliers']} | {r['overlap_kfac']:.3f} |"
        )


if __name__ == "__main__":
    main()
