"""Synthetic benchmark with ground-truth features: each variant against its baseline, on the metric its
paper claims, over seeds. Prints JSON and writes it to --out (default runs/sae/synthetic.json).

    python -m sae.experiments.synthetic                 # full (about 15 minutes on a busy 2-core machine)
    python -m sae.experiments.synthetic --quick         # a smoke run (about a minute)

C²R (hierarchical + split toy): BatchTopK vs C²R at several lambdas: FVU, ground-truth absorption,
split count, duplicate pairs, dead fraction, MMCS. PolySAE (compositional toy): TopK vs PolySAE vs
PolySAE without QR: FVU overall / on compound samples, monolithic compound latents, MMCS, interaction
AUROC and its Spearman with co-occurrence. Coh (double circle): ReLU autoencoder vanilla / L1 / Coh /
Coh+L1: MSE, locality, covering, %tuned, %pure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from sae import make_sae
from sae import metrics as M
from sae.synthetic import compositional_pairs, double_circle, hierarchical_split
from sae.train import train_on_tensor


def run_c2r(
    seed: int, steps: int, lambdas: list[float], n: int = 60_000, d_sae: int = 256, k: int = 4, interval: int = 5
) -> list[dict[str, Any]]:
    syn = hierarchical_split(n=n, seed=seed)
    test = hierarchical_split(n=20_000, seed=seed + 1000, dict_seed=seed)  # same features, new samples
    rows = []
    for lam in lambdas:
        arch = "batchtopk" if lam == 0 else "c2r"
        kw = {} if lam == 0 else {"c2r_lambda": lam, "c2r_interval": interval}
        sae = make_sae(arch, syn.x.shape[1], d_sae, seed=seed, k=k, rescale_acts_by_decoder_norm=True, **kw)
        t0 = time.perf_counter()
        train_on_tensor(sae, syn.x, steps, batch_size=1024, lr=1e-3, seed=seed)
        z = M.encode(sae, test.x)
        rec = M.reconstruction(sae, [test.x])
        rows.append(
            M.round_dict(
                {
                    "seed": seed,
                    "arch": arch,
                    "c2r_lambda": lam,
                    "fvu": rec["fvu"],
                    "l0": rec["l0"],
                    "absorption": M.gt_absorption(sae, test, z)["absorption"],
                    "split_count": M.split_count(sae, test, z),
                    "duplicate_pairs": M.duplicate_pairs(sae, z),
                    "dead_frac": rec["dead_frac"],
                    "mmcs": M.mmcs(sae, test.directions),
                    "seconds": time.perf_counter() - t0,
                }
            )
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def run_poly(seed: int, steps: int, n: int = 60_000, d_sae: int = 128, k: int = 4) -> list[dict[str, Any]]:
    syn = compositional_pairs(n=n, seed=seed)
    rows = []
    for name, arch, kw in [
        ("topk", "topk", {"rescale_acts_by_decoder_norm": False}),
        ("poly", "poly", {"rank1": 64, "rank2": 8, "rank3": 8}),
        ("poly_noqr", "poly", {"rank1": 64, "rank2": 8, "rank3": 8, "retract": False}),
    ]:
        sae = make_sae(arch, syn.x.shape[1], d_sae, seed=seed, k=k, **kw)
        t0 = time.perf_counter()
        train_on_tensor(sae, syn.x, steps, batch_size=1024, lr=1e-3, seed=seed)
        spec = M.interaction_specificity(sae, syn)
        rows.append(
            M.round_dict(
                {
                    "seed": seed,
                    "model": name,
                    **M.compound_fvu(sae, syn),
                    "monolithic": M.monolithic_compound_latents(sae, syn),
                    "mmcs": M.mmcs(sae, syn.directions),
                    "statistic": spec["statistic"],
                    "auroc_P": spec["auroc_P"],
                    "spearman_cooc": spec["spearman_with_cooccurrence_PQ"],
                    "seconds": time.perf_counter() - t0,
                }
            )
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def run_coh(
    seed: int,
    epochs: int,
    n_train: int = 8000,
    n_latents: int = 32,
    coh_lambdas: tuple[float, ...] = (0.1, 1.0),
    l1: float = 0.1,
) -> list[dict[str, Any]]:
    data = double_circle(n=n_train + 2000, seed=seed)
    x, xt = data.x[:n_train], data.x[n_train:]
    theta, comp = data.info["theta"][n_train:], data.info["component"][n_train:]
    steps = epochs * n_train // 256
    rows = []
    models = [("vanilla", "relu", {"l1_coefficient": 0.0}), ("l1", "relu", {"l1_coefficient": l1})]
    models += [(f"coh_{lam:g}", "coh", {"l1_coefficient": 0.0, "coh_lambda": lam}) for lam in coh_lambdas]
    models += [(f"coh_{coh_lambdas[-1]:g}+l1", "coh", {"l1_coefficient": l1, "coh_lambda": coh_lambdas[-1]})]
    for name, arch, kw in models:
        sae = make_sae(arch, x.shape[1], n_latents, seed=seed, **kw)
        t0 = time.perf_counter()
        train_on_tensor(sae, x, steps, batch_size=256, lr=1e-3, seed=seed)
        z = M.encode(sae, xt)
        mse = float((sae.decode(z) - xt).square().mean().detach())
        rows.append(
            M.round_dict(
                {
                    "seed": seed,
                    "model": name,
                    "mse": mse,
                    **M.coherence_metrics(z, theta, comp),
                    "seconds": time.perf_counter() - t0,
                }
            )
        )
    return rows


def summarise(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Mean ± sd over seeds of every numeric column, grouped by `key`."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r[key], []).append(r)
    out = []
    for g, rs in groups.items():
        row: dict[str, Any] = {key: g, "seeds": len(rs)}
        for col, v in rs[0].items():
            if isinstance(v, (int, float)) and col not in ("seed", key):
                vals = [r[col] for r in rs]
                row[col] = f"{statistics.mean(vals):.4g} ± {statistics.stdev(vals) if len(vals) > 1 else 0:.2g}"
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--only", choices=["c2r", "poly", "coh"], default=None)
    ap.add_argument("--out", default="runs/sae/synthetic.json")
    ap.add_argument("--steps", type=int, default=None, help="training steps per model (default 300 quick, 2000 full)")
    ap.add_argument("--lambdas", default="0,0.3,1,3", help="C²R lambdas (0 is the BatchTopK baseline)")
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads (1 is fastest for these small matmuls on a busy machine)"
    )
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    seeds = range(1 if a.quick else a.seeds)
    steps = a.steps or (300 if a.quick else 2000)
    res: dict[str, Any] = {"settings": {"quick": a.quick, "seeds": len(seeds), "steps": steps}}
    if a.only in (None, "c2r"):
        rows = [
            r
            for s in seeds
            for r in run_c2r(s, steps, [float(v) for v in a.lambdas.split(",")] if not a.quick else [0.0, 1.0])
        ]
        res["c2r"] = {"rows": rows, "summary": summarise(rows, "c2r_lambda")}
    if a.only in (None, "poly"):
        rows = [r for s in seeds for r in run_poly(s, steps)]
        res["poly"] = {"rows": rows, "summary": summarise(rows, "model")}
    if a.only in (None, "coh"):
        rows = [r for s in seeds for r in run_coh(s, 4 if a.quick else 40)]
        res["coh"] = {"rows": rows, "summary": summarise(rows, "model")}
    text = json.dumps(res, indent=1)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(text + "\n")
    print(
        json.dumps({k: v["summary"] if isinstance(v, dict) and "summary" in v else v for k, v in res.items()}, indent=1)
    )
    return res


if __name__ == "__main__":
    main()
