"""SelfTrain demo: test risk along iterated ridge self-distillation, and the stopping time iterated GCV picks,
on the catalog's spiked-covariance setting and on a self-distilled linear probe over SmolLM2's cache.

    python -m interp.contrib.causal_stats.experiments.self_training [--seeds 5] [--quick] [--no-lm]

Synthetic (catalog): d = 400, n = 200 labelled rows, σ = 4, λ = 0.02, Σ diagonal with 10 eigenvalues 10
and 390 eigenvalues 0.5, β* uniform on the sphere of radius `--signal` (the catalog does not give |β*|;
default 2), T = 12 fresh batches of `--fresh` rows (default 200). Metric: excess risk (β_t - β*)ᵀΣ(β_t - β*).

SmolLM2 (`smollm2-135m`, stdlib-docs 48 x 64 tokens, position 0 dropped, from `../../lm_features.py`):
X = top-64 PCs of `blocks.12.hook_resid_post` (standardised), target = the first PC of
`ln_final.hook_normalized` (standardised), labels observed with noise σ = 2; 100 labelled rows, 12 fresh
batches of 100 unlabelled rows, λ = 0.05; metric: test MSE against the clean target.

Strong baseline (issue 42; synthetic part): plain ridge on the labelled rows alone, its penalty chosen by
ordinary GCV from 13 log-spaced values 0.02-2000 (`RIDGE_LAMS`: as many candidates as the self-training
path t = 0..12 offers its iterated GCV), against self-training stopped by iterated GCV; paired by seed.
"""

from __future__ import annotations

import json

import torch

from interp.contrib.causal_stats.self_training import (
    direction_retention,
    excess_risk,
    ridge_gcv_path,
    self_train,
    spiked_covariance,
)
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.report import fmt, markdown_table

RIDGE_LAMS = tuple(
    float(v) for v in torch.logspace(torch.log10(torch.tensor(0.02)), torch.log10(torch.tensor(2000.0)), 13)
)


def synthetic(seed: int, d: int, n: int, fresh: int, steps: int, sigma: float, lam: float, signal: float) -> dict:
    g = torch.Generator().manual_seed(seed)
    cov = spiked_covariance(d, 10, 10.0, 0.5)
    sd = cov.diag().sqrt()
    beta = torch.randn(d, generator=g, dtype=torch.float64)
    beta = signal * beta / beta.norm()
    xs = [torch.randn(n if t == 0 else fresh, d, generator=g, dtype=torch.float64) * sd for t in range(steps + 1)]
    y = xs[0] @ beta + sigma * torch.randn(n, generator=g, dtype=torch.float64)
    traj = self_train(xs[0], y, xs[1:], lam)
    risk = [excess_risk(b, beta, cov) for b in traj.betas]
    strong, weak = direction_retention(traj, cov, beta, 10)
    base = ridge_gcv_path(xs[0], y, RIDGE_LAMS)
    return {
        "ridge_gcv_risk": excess_risk(base.betas[base.t_gcv], beta, cov),
        "ridge_gcv_lam": RIDGE_LAMS[base.t_gcv],
        "zero_risk": excess_risk(torch.zeros_like(beta), beta, cov),
        "risk": risk,
        "t_oracle": int(torch.tensor(risk).argmin()),
        "t_gcv": traj.t_gcv,
        "gcv": traj.gcv,
        "strong_kept": strong,
        "weak_kept": weak,
    }


def _pcs(x: torch.Tensor, k: int) -> torch.Tensor:
    x = x.double() - x.double().mean(0)
    _, _, vh = torch.linalg.svd(x, full_matrices=False)
    z = x @ vh[:k].T
    return z / z.std(0)


def smollm(seeds: int, steps: int = 12) -> dict:
    from interp.contrib.lm_features import corpus_store, hook_name, load_lm, token_rows

    loaded = load_lm()  # its weights key the cache
    st = corpus_store("stdlib-docs", 48, 64, loaded=loaded)
    x = _pcs(token_rows(st, hook_name(12))[0], 64)
    target = _pcs(token_rows(st, "ln_final.hook_normalized")[0], 1)[:, 0]
    out = {"risk": [], "t_oracle": [], "t_gcv": []}
    for s in range(seeds):
        g = torch.Generator().manual_seed(s)
        perm = torch.randperm(len(x), generator=g)
        lab, rest = perm[:100], perm[100:]
        batches = [rest[i * 100 : (i + 1) * 100] for i in range(steps)]
        test = rest[steps * 100 :]
        y = target[lab] + 2.0 * torch.randn(100, generator=g, dtype=torch.float64)
        traj = self_train(x[lab], y, [x[b] for b in batches], 0.05)
        risk = [float(((x[test] @ b - target[test]) ** 2).mean()) for b in traj.betas]
        out["risk"].append(risk)
        out["t_oracle"].append(int(torch.tensor(risk).argmin()))
        out["t_gcv"].append(traj.t_gcv)
    return out


def _curve_rows(risks: list[list[float]], ts: list[int]) -> list[list[str]]:
    return [[t, fmt([r[t] for r in risks])] for t in ts]


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__,
        seeds=5,
        signal=(2.0, "|β*| (the catalog does not state it)"),
        fresh=(200, "rows per fresh covariate batch"),
        quick="d=100, n=50, 1 seed, no LM run",
        no_lm="skip the SmolLM2 probe run",
    )
    a = parse(ap, argv)
    if a.seeds < 1 or a.signal < 0 or a.fresh < 1:
        ap.error("--seeds and --fresh must be positive and --signal non-negative")
    seeds = 1 if a.quick else a.seeds
    d, n, fresh = (100, 50, a.fresh // 4) if a.quick else (400, 200, a.fresh)
    runs = [synthetic(s, d, n, fresh, 12, 4.0, 0.02, a.signal) for s in range(seeds)]
    risks = [r["risk"] for r in runs]
    print(f"synthetic (d={d}, n={n}, fresh={fresh}, |β*|={a.signal}): excess risk along t ({seeds} seeds)")
    print(markdown_table(["t", "excess risk"], _curve_rows(risks, [0, 1, 2, 4, 6, 8, 12])))
    hits = sum(abs(r["t_gcv"] - r["t_oracle"]) <= 1 for r in runs)
    print(
        markdown_table(
            ["oracle t*", "iterated-GCV t*", "GCV within ±1", "risk at GCV t*", "strong kept", "weak kept"],
            [
                [
                    [r["t_oracle"] for r in runs],
                    [r["t_gcv"] for r in runs],
                    f"{hits}/{seeds}",
                    fmt([r["risk"][r["t_gcv"]] for r in runs]),
                    fmt([r["strong_kept"] for r in runs]),
                    fmt([r["weak_kept"] for r in runs]),
                ]
            ],
        )
    )
    diff = [r["risk"][r["t_gcv"]] - r["ridge_gcv_risk"] for r in runs]
    print("\nstrong baseline: ridge on the labelled rows, penalty by GCV (13 values 0.02-2000), no fresh rows")
    print(
        markdown_table(
            ["estimator", "excess risk", "chosen"],
            [
                [
                    "self-training, iterated-GCV stop",
                    fmt([r["risk"][r["t_gcv"]] for r in runs]),
                    [r["t_gcv"] for r in runs],
                ],
                [
                    "ridge, GCV penalty (strong baseline)",
                    fmt([r["ridge_gcv_risk"] for r in runs]),
                    [round(r["ridge_gcv_lam"], 2) for r in runs],
                ],
                ["β = 0 (β*ᵀΣβ*)", fmt([r["zero_risk"] for r in runs]), "-"],
                ["self-training - ridge, paired", fmt(diff), f"ridge lower in {sum(x > 0 for x in diff)}/{len(diff)}"],
            ],
        )
    )
    out = {"synthetic": runs}
    if not (a.quick or a.no_lm):
        lm = smollm(seeds)
        print(
            f"\nsmollm2-135m self-distilled probe (layer 12 -> output PC1, label noise σ=2): test MSE ({seeds} splits)"
        )
        print(markdown_table(["t", "test MSE"], _curve_rows(lm["risk"], [0, 1, 2, 4, 6, 8, 12])))
        print(f"oracle t* {lm['t_oracle']}, iterated-GCV t* {lm['t_gcv']}")
        out["smollm2"] = lm
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
