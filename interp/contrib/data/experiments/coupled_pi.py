"""CoupledPI demo: coupled vs two-step vs labeled-only ridge, on the paper's linear-Gaussian setting and on
SmolLM2's cached residual stream (a shallow layer deployable, a deep layer privileged).

    python -m interp.contrib.data.experiments.coupled_pi [--seeds 10] [--quick] [--no-lm]

Synthetic (catalog spec): x in R^20, privileged w in R^10 (independent N(0, I)), y = x·a + w·θ + ε
(σ_ε 0.5), |θ| in {0, 1, 3}, w observed with extra noise τ in {0, 2}; 50 labeled rows, 2,000 unlabeled.
Metric: excess risk of f, |α - a|² (the test MSE above the best x-only predictor).

SmolLM2 (`smollm2-135m`, stdlib-docs + stdlib, 48 x 64 tokens each, position 0 dropped): x = top-20 PCs
of `blocks.6.hook_resid_post`, w = top-10 PCs of `blocks.24.hook_resid_post`; y = the first principal
component of `ln_final.hook_normalized` (the model's output state; standardised). 50 labeled rows, 2,000 unlabeled, the
rest test;
metric: test MSE of f. Control: w rows shuffled (a privileged view with no information).

Strong baselines (issue 42), in both parts: every estimator with its ridge penalty ρ chosen by 5-fold CV on
the labeled rows over one grid (`DEFAULT_RHOS`, same folds): labeled-only ridge, two-step (one ρ for both
stages) and coupled ((λ, κ, ρ) together); printed with each one's paired difference to the paper's coupled
fit (mean ± sd over seeds, and in how many seeds the coupled fit is better).
"""

from __future__ import annotations

import json

import torch

from interp.contrib.common.ridge import ridge
from interp.contrib.data.coupled_pi import DEFAULT_RHOS, fit_coupled_cv, fit_ridge_cv, fit_two_step, fit_two_step_cv
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.report import fmt, markdown_table

D_X, D_W, N_LAB, N_UNLAB, SIGMA = 20, 10, 50, 2000, 0.5
LM_LAB = N_LAB
METHODS = ("ridge on labeled x", "two-step", "coupled (CV λ, κ)", "joint only κ=1 (CV λ)")
STRONG = ("ridge (CV ρ)", "two-step (CV ρ)", "coupled (CV λ, κ, ρ)")


def strong_fits(xl, wl, yl, xu, wu, seed: int, rhos=DEFAULT_RHOS) -> dict[str, torch.Tensor]:
    """The strong-baseline rows: α of every estimator with its penalty chosen by 5-fold CV on the labeled rows
    (one grid and one set of folds for all)."""
    return {
        STRONG[0]: fit_ridge_cv(xl, yl, rhos, seed=seed).alpha,
        STRONG[1]: fit_two_step_cv(xl, wl, yl, xu, wu, rhos, seed=seed).alpha,
        STRONG[2]: fit_coupled_cv(xl, wl, yl, xu, wu, seed=seed, rhos=rhos).alpha,
    }


PAIRS = (
    (METHODS[2], STRONG[0]),
    (STRONG[2], STRONG[0]),
    (STRONG[2], STRONG[1]),
)
"""(method, baseline) pairs printed paired by seed: the paper's coupled fit (fixed ρ) against CV ridge, and the
coupled fit with every penalty CV'd against the CV'd baselines."""


def paired(method: list[float], baseline: list[float]) -> str:
    """`method - baseline` per seed as mean ± sd, and in how many seeds the method is lower (errors: better)."""
    d = [a - b for a, b in zip(method, baseline, strict=True)]
    return f"{fmt(d)} ({sum(x < 0 for x in d)}/{len(d)})"


def synthetic_trial(seed: int, strength: float, w_noise: float, n_unlab: int = N_UNLAB) -> dict[str, float]:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(D_X, generator=g, dtype=torch.float64) / D_X**0.5
    theta = torch.randn(D_W, generator=g, dtype=torch.float64)
    theta = strength * theta / theta.norm()
    n = N_LAB + n_unlab
    x = torch.randn(n, D_X, generator=g, dtype=torch.float64)
    w = torch.randn(n, D_W, generator=g, dtype=torch.float64)
    y = x @ a + w @ theta + SIGMA * torch.randn(n, generator=g, dtype=torch.float64)
    w_obs = w + w_noise * torch.randn(n, D_W, generator=g, dtype=torch.float64)
    xl, wl, yl, xu, wu = x[:N_LAB], w_obs[:N_LAB], y[:N_LAB], x[N_LAB:], w_obs[N_LAB:]
    fits = {
        METHODS[0]: ridge(xl.double(), yl.double(), 1e-3, mean=True),
        METHODS[1]: fit_two_step(xl, wl, yl, xu, wu).alpha,
    }
    cv = fit_coupled_cv(xl, wl, yl, xu, wu, seed=seed)
    fits[METHODS[2]] = cv.alpha
    fits[METHODS[3]] = fit_coupled_cv(xl, wl, yl, xu, wu, kappas=(1.0,), seed=seed).alpha
    fits.update(strong_fits(xl, wl, yl, xu, wu, seed))
    out = {m: float(((al - a) ** 2).sum()) for m, al in fits.items()}
    out["lambda"], out["kappa"] = cv.lam, cv.kappa
    return out


def run_synthetic(seeds: int, quick: bool) -> list[dict]:
    rows = []
    for strength, w_noise in ((3.0, 0.0), (1.0, 0.0), (3.0, 2.0), (0.0, 0.0)):
        per = [synthetic_trial(s, strength, w_noise, 500 if quick else N_UNLAB) for s in range(seeds)]
        rows.append({"|θ|": strength, "τ": w_noise, **{k: [p[k] for p in per] for k in per[0]}})
    return rows


def _pca(x: torch.Tensor, k: int) -> torch.Tensor:
    x = x.double() - x.double().mean(0)
    _, _, vh = torch.linalg.svd(x, full_matrices=False)
    z = x @ vh[:k].T
    return z / z.std(0)


def run_lm(seeds: int) -> list[dict]:
    from interp.contrib.lm_features import corpus_store, hook_name, load_lm, token_rows

    xs, ws, ys = [], [], []
    loaded = load_lm()  # its weights key the caches
    for corpus in ("stdlib-docs", "stdlib"):
        st = corpus_store(corpus, 48, 64, loaded=loaded)
        x6, idx = token_rows(st, hook_name(6))
        x24, _ = token_rows(st, hook_name(24))
        out, _ = token_rows(st, "ln_final.hook_normalized")
        xs.append(x6), ws.append(x24), ys.append(out)
    x, w = _pca(torch.cat(xs), D_X), _pca(torch.cat(ws), D_W)
    y = _pca(torch.cat(ys), 1)[:, 0]  # the output state's first principal component, standardised
    keys = (*METHODS[:3], "two-step (shuffled w)", "coupled (shuffled w)", "lambda", "lambda (shuffled w)", *STRONG)
    res = {k: [] for k in keys}
    for s in range(seeds):
        g = torch.Generator().manual_seed(s)
        perm = torch.randperm(len(y), generator=g)
        lab, unl, test = perm[:LM_LAB], perm[LM_LAB : LM_LAB + N_UNLAB], perm[LM_LAB + N_UNLAB :]
        w_shuf = w[torch.randperm(len(y), generator=g)]

        def mse(alpha):
            return float(((x[test] @ alpha - y[test]) ** 2).mean())  # noqa: B023

        res[METHODS[0]].append(mse(ridge(x[lab].double(), y[lab].double(), 1e-3, mean=True)))
        for ww, tag in ((w, ""), (w_shuf, " (shuffled w)")):
            res["two-step" + tag].append(mse(fit_two_step(x[lab], ww[lab], y[lab], x[unl], ww[unl]).alpha))
            cv = fit_coupled_cv(x[lab], ww[lab], y[lab], x[unl], ww[unl], seed=s)
            res[(METHODS[2] if not tag else "coupled" + tag)].append(mse(cv.alpha))
            res["lambda" + tag].append(min(cv.lam, 100.0))
            for k, alpha in strong_fits(x[lab], ww[lab], y[lab], x[unl], ww[unl], s).items():
                res.setdefault(k + tag, []).append(mse(alpha))
    return [res]


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__, seeds=10, quick="3 seeds, 500 unlabeled rows, no LM run", no_lm="skip the SmolLM2 run"
    )
    a = parse(ap, argv)
    seeds = 3 if a.quick else a.seeds
    syn = run_synthetic(seeds, a.quick)
    print(f"synthetic: excess risk |α - a|² of f (mean ± sd over {seeds} seeds)")
    print(
        markdown_table(
            ["|θ|", "w noise τ", *METHODS, "CV λ", "CV κ"],
            [[r["|θ|"], r["τ"], *(fmt(r[m]) for m in METHODS), fmt(r["lambda"], 1), fmt(r["kappa"], 1)] for r in syn],
        )
    )
    print("\nstrong baselines: every penalty ρ by 5-fold CV on the labeled rows (one grid); paired by seed:")
    print("method minus baseline, mean ± sd (seeds where the method is better)")
    print(
        markdown_table(
            ["|θ|", "w noise τ", *STRONG, *(f"{m} - {b}" for m, b in PAIRS)],
            [[r["|θ|"], r["τ"], *(fmt(r[m]) for m in STRONG), *(paired(r[m], r[b]) for m, b in PAIRS)] for r in syn],
        )
    )
    out = {"synthetic": syn}
    if not (a.quick or a.no_lm):
        lm = run_lm(seeds)[0]
        cols = [*METHODS[:3], "two-step (shuffled w)", "coupled (shuffled w)"]
        print(f"\nsmollm2-135m: test MSE of f (x = layer 6, w = layer 24; {seeds} splits)")
        print(markdown_table(cols, [[fmt(lm[c]) for c in cols]]))
        print(f"CV λ: real w {fmt(lm['lambda'], 2)}, shuffled w {fmt(lm['lambda (shuffled w)'], 2)}")
        print(f"shuffled w, every ρ CV'd: two-step {fmt(lm[STRONG[1] + ' (shuffled w)'])}, coupled", end=" ")
        print(fmt(lm[STRONG[2] + " (shuffled w)"]))
        print("strong baselines (every ρ by 5-fold CV); paired: method minus baseline (seeds where the method wins)")
        print(
            markdown_table(
                [*STRONG, *(f"{m} - {b}" for m, b in PAIRS)],
                [[*(fmt(lm[m]) for m in STRONG), *(paired(lm[m], lm[b]) for m, b in PAIRS)]],
            )
        )
        out["smollm2"] = lm
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
