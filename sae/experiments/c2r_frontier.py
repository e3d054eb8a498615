"""C²R where there is absorption to remove: BatchTopK vs C²R on the parent/child toy, over k around the
data's L0, 3 seeds, trained through `train_sae` (the store path a real run takes). Prints JSON rows and a
markdown frontier (FVU, absorption) per k; writes --out.

    python -m sae.experiments.c2r_frontier --out runs/saeeval/c2r_frontier.json      # ~15 min, busy 2 cores

The toy (`sae.synthetic.hierarchical_split`): parents fire with p 0.10 and, when they do, exactly one of
their 3 children fires with p 0.7; split and plain features besides. Its L0 (active true features per
sample) is printed; absorption can only appear when the SAE's k is below it (NOTES.md: k=3 absorbs,
k=4 hardly).

Two absorption metrics, both on held-out samples of the same features:
- `gt_absorption` (threshold-based): the parent's latent is its best decoder match (cos > 0.5, else the
  parent counts as fully absorbed); absorption = P(latent silent | parent and a child on) - P(silent |
  parent on, no child).
- `mass_absorption` (threshold-free): the parent's latent is the one whose activation correlates best
  with the parent's true magnitude (no cosine cut, no silence test); absorption = 1 - E[z | parent and a
  child] / E[z | parent, no child], the share of the parent latent's activation lost when a child fires.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.infra.argtypes import out_file, positive_float, positive_int
from sae import metrics as M
from sae.baselines import paper_settings
from sae.synthetic import hierarchical_split, write_store
from sae.train import TrainConfig, train_sae


def mass_absorption(z: Tensor, syn: Any) -> float:
    """Threshold-free absorption (see the module docstring), averaged over parents."""
    out = []
    for pi, p in enumerate(syn.info["parents"]):
        a = syn.active[:, p]
        on = a > 0
        zc, ac = z - z.mean(0), a - a.mean()
        corr = (zc * ac[:, None]).sum(0) / (zc.norm(dim=0) * ac.norm()).clamp_min(1e-12)
        lat = int(corr.argmax())
        child = (syn.active[:, syn.info["children"][pi]] > 0).any(1)
        with_c, without = z[on & child, lat], z[on & ~child, lat]
        if len(with_c) and len(without) and float(without.mean()) > 0:
            out.append(1 - float(with_c.mean()) / float(without.mean()))
    return sum(out) / max(len(out), 1)


def run(seed: int, k: int, arch: str, a: argparse.Namespace, work: Path) -> dict[str, Any]:
    from sae.inference import to_inference

    syn = hierarchical_split(n=a.n, seed=seed)
    test = hierarchical_split(n=20_000, seed=seed + 1000, dict_seed=seed)
    store = write_store(work / f"store_s{seed}", syn.x, rows_per_shard=8192)
    lam = {"c2r_lambda": a.c2r_lambda} if arch == "c2r" else {}
    if a.defaults:  # what `interp sae train` gives: every schedule, AuxK and normalisation default
        paper: dict[str, Any] = {}
    else:  # the paper's settings: official AuxK, C²R normalised to batch 2048, its lr, window, 10% warm-up
        paper = {
            "lr": a.lr,
            "dead_window_tokens": a.dead_window_tokens,
            "lr_warmup_steps": min(1000, a.steps // 10),
        }
        lam = {**paper_settings(arch), **lam}
    cfg = TrainConfig(
        arch=arch,
        d_sae=a.d_sae,
        k=k,
        total_tokens=a.steps * a.batch_size,
        batch_size=a.batch_size,
        seed=seed,
        exclude="none",
        checkpoint_every=10_000,
        settings=lam,
        **paper,
    )
    t0 = time.perf_counter()
    sae, _ = train_sae(store, cfg, work / f"{arch}_k{k}_s{seed}", progress=False)
    inf = to_inference(sae)
    z = M.encode(inf, test.x)
    rec = M.reconstruction(inf, [test.x])
    gt = M.gt_absorption(inf, test, z)
    return M.round_dict(
        {
            "seed": seed,
            "k": k,
            "arch": arch,
            "c2r_lambda": a.c2r_lambda if arch == "c2r" else 0.0,
            "settings": "defaults" if a.defaults else "paper",
            "fvu": rec["fvu"],
            "l0": rec["l0"],
            "gt_absorption": gt["absorption"],
            "unmatched_parents": gt["unmatched_parents"],
            "mass_absorption": mass_absorption(z, test),
            "split_count": M.split_count(inf, test, z),
            "dead_frac": rec["dead_frac"],
            "mmcs": M.mmcs(inf, test.directions),
            "seconds": time.perf_counter() - t0,
        }
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="2,3,4")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--c2r-lambda", type=float, default=5.0, help="official lambda (normalised to batch 2048)")
    ap.add_argument("--n", type=positive_int, default=60_000)
    ap.add_argument("--d-sae", type=positive_int, default=256)
    ap.add_argument("--steps", type=positive_int, default=1500)
    ap.add_argument("--batch-size", type=positive_int, default=1024)
    ap.add_argument("--lr", type=positive_float, default=1e-3)
    ap.add_argument("--dead-window-tokens", type=positive_int, default=200_000)
    ap.add_argument(
        "--defaults",
        action="store_true",
        help="train both with the toolkit's defaults (lr rule, AuxK, dead window, warm-up/decay, no batch-2048"
        " normalisation) instead of the paper's settings; --lr and --dead-window-tokens are then unused",
    )
    ap.add_argument("--out", type=out_file, default="runs/saeeval/c2r_frontier.json")
    a = ap.parse_args(argv)
    for opt, text in (("--ks", a.ks), ("--seeds", a.seeds)):
        vals = text.split(",")
        if not all(v.strip().isdigit() for v in vals) or (opt == "--ks" and any(int(v) < 1 for v in vals)):
            ap.error(f"{opt} must be comma-separated whole numbers (--ks >= 1), got {text!r}")
    torch.set_num_threads(1)
    data_l0 = float((hierarchical_split(n=20_000, seed=0).active > 0).sum(-1).float().mean())
    print(json.dumps({"data_l0": round(data_l0, 3)}), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in [int(s) for s in a.seeds.split(",")]:
            for k in [int(v) for v in a.ks.split(",")]:
                for arch in ("batchtopk", "c2r"):
                    rows.append(run(seed, k, arch, a, Path(tmp)))
                    print(json.dumps(rows[-1]), flush=True)
    summary = []
    for k in [int(v) for v in a.ks.split(",")]:
        for arch in ("batchtopk", "c2r"):
            rs = [r for r in rows if r["k"] == k and r["arch"] == arch]
            s = {"k": k, "arch": arch}
            for c in ("fvu", "l0", "gt_absorption", "mass_absorption", "unmatched_parents", "split_count", "dead_frac"):
                v = [r[c] for r in rs]
                s[c] = round(statistics.mean(v), 4)
                s[c + "_sd"] = round(statistics.pstdev(v), 4)
            summary.append(s)
        b = {r["seed"]: r for r in rows if r["k"] == k and r["arch"] == "batchtopk"}
        c = {r["seed"]: r for r in rows if r["k"] == k and r["arch"] == "c2r"}
        for metric in ("gt_absorption", "mass_absorption"):
            wins = sum(c[s][metric] < b[s][metric] for s in b)
            summary.append(
                {
                    "k": k,
                    "metric": metric,
                    "c2r_lower_in_seeds": f"{wins}/{len(b)}",
                    "relative_change": [
                        round((c[s][metric] - b[s][metric]) / max(abs(b[s][metric]), 1e-9), 3) for s in b
                    ],
                    "fvu_relative_change": [round((c[s]["fvu"] - b[s]["fvu"]) / b[s]["fvu"], 3) for s in b],
                }
            )
    res = {"settings": vars(a), "data_l0": data_l0, "rows": rows, "summary": summary}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(
        "| k | arch | FVU | L0 | gt_absorption | mass_absorption | unmatched parents | split count "
        "|\n|---|---|---|---|---|---|---|---|"
    )
    for s in summary:
        if "arch" in s:
            print(
                f"| {s['k']} | {s['arch']} | {s['fvu']:.3f} ± {s['fvu_sd']:.3f} | {s['l0']:.2f} | "
                f"{s['gt_absorption']:.3f} ± {s['gt_absorption_sd']:.3f} | {s['mass_absorption']:.3f} ± "
                f"{s['mass_absorption_sd']:.3f} | "
                f"{s['unmatched_parents']:.1f} | {s['split_count']:.2f} |"
            )
    for s in summary:
        if "metric" in s:
            print(json.dumps(s))
    return res


if __name__ == "__main__":
    main()
