"""SDI with TensorSketch against exact per-step influence on a small looped transformer.

    python -m attribution.experiments.sdi --out runs/sdi_exp      # ~1-3 min on 2 cores

Setup (the official repository's toy example): looped GPT, vocab 64, seq 32, d 64, 4 heads, tau = 6,
trained 40 AdamW steps at lr 1e-3 on random tokens, checkpoints every 10 steps (eta from the optimiser).
Influence of 32 training sequences on 8 queries through the shared block. For each sketch size m and 5
hash seeds: relative Frobenius error of sketched SDI [n_train, n_query, tau] and of TracIn against the
exact values (the paper reports 0.039 and 0.022 at m = 2048 on a 134.6M-parameter model), the log-log
slope of error against m (theory: -0.5), the bias of the mean over many seeds, conservation, and how
often the sketched and exact trajectories peak at the same step.

    python -m attribution.experiments.sdi --sizes 2048 --init torch --out runs/sdi_torch_init

`--init torch` re-initialises the same model with torch's module defaults (Kaiming-uniform Linears, N(0, 1)
embeddings) instead of the official toy's N(0, 0.02). The sketch's error on one inner product <a, b> is about
sqrt(1 + 1/cos^2(a, b)) / sqrt(m) of it, so the relative error at a given m is set by how aligned the training
and query gradients are; the run reports their root-mean-square cosine (`rms_cosine_train_query`, over training
example x query x query step x checkpoint, from the exact features) beside the error.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from attribution.looped import random_looped_gpt
from attribution.sdi import looped_featurizer, sdi_from_features, step_decomposed_influence
from attribution.tracin import features
from attribution.train import train_lm
from interp.infra.argtypes import positive_int


def loglog_slope(ms: list[float], errs: list[float]) -> float | None:
    """Least-squares slope of log(error) against log(m); None with fewer than two distinct sizes (no slope), or
    when an error is 0 (exact at that size: the log is undefined)."""
    if len(set(ms)) < 2 or min(errs) <= 0:
        return None
    xs, ys = [math.log(m) for m in ms], [math.log(e) for e in errs]
    xm, ym = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - xm) * (y - ym) for x, y in zip(xs, ys)) / sum((x - xm) ** 2 for x in xs)


def sizes(text: str) -> list[int]:
    """`--sizes 256,2048`: comma-separated whole numbers >= 1."""
    return [positive_int(t) for t in text.split(",") if t.strip()] or [positive_int(text)]


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/sdi_exp")
    p.add_argument("--sizes", type=sizes, default="256,1024,2048,4096,16384", help="sketch sizes m, e.g. 256,2048")
    p.add_argument("--seeds", type=positive_int, default=5)
    p.add_argument("--bias-seeds", type=positive_int, default=64)
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--init", choices=("official", "torch"), default="official", help="N(0, 0.02) or torch's defaults")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model = random_looped_gpt(
        vocab_size=64,
        hidden_size=64,
        num_attention_heads=4,
        num_hidden_layers=6,
        intermediate_size=256,
        max_position_embeddings=32,
    )
    if args.init == "torch":
        torch.manual_seed(0)
        for module in model.modules():
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()
    g = torch.Generator().manual_seed(0)
    pool = torch.randint(0, 64, (256, 32), generator=g)
    out = Path(args.out)
    train_lm(model, pool, steps=40, batch_size=8, lr=1e-3, save_steps=(10, 20, 30, 40), out=out / "run")
    from attribution.tracin import checkpoints_from, run_checkpoints

    cks = checkpoints_from(run_checkpoints(out / "run"))
    train, queries = pool[:32], torch.randint(0, 64, (8, 32), generator=g)
    exact = step_decomposed_influence(model, cks, train, queries, sketch_dim=None)
    n_body = sum(p.numel() for p in model.body_parameters().values())

    # Sketched features per checkpoint, computed once per (m, seed).
    def sketched(m, seed):
        feat = looped_featurizer(model, m, seed)
        total = None
        for ck in cks:
            work = ck.load(model)
            f = feat.rebind(model, work)
            part = sdi_from_features(features(work, f, train), features(work, f, queries), ck.lr)
            total = part if total is None else type(part)(total.sdi + part.sdi, total.tracin + part.tracin)
        return total

    def rel(a, b):
        return float((a - b).norm() / b.norm())

    def rms_cosine() -> float:
        """Root-mean-square cosine between a training example's summed step features and a query step's."""
        exact_feat, sq = looped_featurizer(model, None, 0), []
        for ck in cks:
            work = ck.load(model)
            f = exact_feat.rebind(model, work)
            a = torch.nn.functional.normalize(features(work, f, train).sum(1), dim=-1)  # [n_train, dim]
            b = torch.nn.functional.normalize(features(work, f, queries), dim=-1)  # [n_query, tau, dim]
            sq.append(torch.einsum("id,jtd->ijt", a, b).square().mean())
        return float(torch.stack(sq).mean().sqrt())

    rows = []
    for m in args.sizes:
        errs, terrs, cons, agree = [], [], [], []
        for s in range(args.seeds):
            r = sketched(m, s)
            errs.append(rel(r.sdi, exact.sdi))
            terrs.append(rel(r.tracin, exact.tracin))
            cons.append(float((r.sdi.sum(-1) - r.tracin).abs().max() / r.tracin.abs().max()))
            agree.append(float((r.sdi.argmax(-1) == exact.sdi.argmax(-1)).float().mean()))
        mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
        std = lambda xs: (sum((x - mean(xs)) ** 2 for x in xs) / max(1, len(xs) - 1)) ** 0.5  # noqa: B023, E731
        rows.append(
            {
                "m": m,
                "sdi_rel_err": mean(errs),
                "sdi_rel_err_std": std(errs),
                "tracin_rel_err": mean(terrs),
                "tracin_rel_err_std": std(terrs),
                "max_conservation_gap": max(cons),
                "peak_step_agreement": mean(agree),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    slope = loglog_slope([r["m"] for r in rows], [r["sdi_rel_err"] for r in rows])
    mean_sdi = sum(sketched(2048, 1000 + s).sdi for s in range(args.bias_seeds)) / args.bias_seeds
    single = next(r["sdi_rel_err"] for r in rows if r["m"] == 2048) if any(r["m"] == 2048 for r in rows) else None
    result = {
        "model": {"body_params": n_body, "tau": 6, "checkpoints": len(cks), "lrs": [c.lr for c in cks]},
        "init": args.init,
        "rms_cosine_train_query": rms_cosine(),
        "n_train": len(train),
        "n_query": len(queries),
        "rows": rows,
        "loglog_slope": slope,
        "bias_mean_of_seeds_rel_err_m2048": rel(mean_sdi, exact.sdi),
        "bias_seeds": args.bias_seeds,
        "single_seed_rel_err_m2048": single,
        "exact_step_share": (exact.sdi.abs().sum((0, 1)) / exact.sdi.abs().sum()).tolist(),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    (out / "result.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    return result


if __name__ == "__main__":
    main()
