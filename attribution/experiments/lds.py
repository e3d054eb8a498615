"""LDS of every method on both tiny tasks (2-layer GPT-NeoX, looped GPT), as the README's table.

    python -m attribution.experiments.lds --out runs/lds            # ~10 min on the shared 2-core machine
    python -m attribution.experiments.lds --out /tmp/lds_q --quick  # 256 training rows per task

Each task runs in `OUT/<task>` through `attribution.lds_run.run_lds` (resumable: rerun to finish a killed run);
prints one markdown table per task and writes `OUT/<task>/lds.json`.
"""

from __future__ import annotations

import argparse

import torch

from attribution.lds_run import LDSConfig, run_lds
from attribution.lds_task import LMTaskConfig


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", default="neox,looped")
    ap.add_argument("--subsets", type=int, default=50)
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--executor", default="inprocess")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    n_train, n_query = (256, 16) if args.quick else (1024, 32)
    out = {}
    for kind in args.tasks.split(","):
        cfg = LDSConfig(
            out=f"{args.out}/{kind}",
            task=LMTaskConfig(kind=kind, n_train=n_train, n_query=n_query),
            n_subsets=args.subsets,
            alpha=args.alpha,
            executor=args.executor,
        )
        res = run_lds(cfg, progress=False)
        out[kind] = res
        print(f"\n{kind}: M = {args.subsets}, alpha = {args.alpha}, {res['seconds']} s\n")
        print("| method | LDS | 95% CI |\n|---|---|---|")
        for name, r in sorted(res["methods"].items(), key=lambda kv: -kv[1]["lds"]):
            print(f"| {name} | {r['lds']:.3f} | {r['ci95'][0]:.3f} - {r['ci95'][1]:.3f} |")
    return out


if __name__ == "__main__":
    main()
