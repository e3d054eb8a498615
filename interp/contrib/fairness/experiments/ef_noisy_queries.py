"""EF-NoisyQ demo: queries needed for an envy-free allocation (success ≥ 90%) as m and Δ grow, for the
thresholding rule and the per-item baseline; fitted exponents against the paper's m^2.5/Δ² and the
naive m³/Δ².

    python -m interp.contrib.fairness.experiments.ef_noisy_queries [--seeds 3] [--trials 200] [--quick]

Planted instances (`planted_instance`): m goods, planted negative-envy gap Δ, noise σ = 1. The budget
q = 2·m·r, with r answers per (agent, good) on a geometric grid; q90 is the budget where the success
rate first reaches 0.9 (log-linear interpolation between grid points). Each seed is an independent
batch of `trials` instances per budget.
"""

from __future__ import annotations

import json

import numpy as np

from interp.contrib.experiment import experiment_parser
from interp.contrib.fairness.ef_noisy_queries import (
    is_envy_free,
    median_allocation,
    noisy_estimates,
    per_item_allocation,
    planted_instance,
    threshold_allocation,
)
from interp.contrib.report import fmt, markdown_table

RULES = {"thresholding": threshold_allocation, "per-item": per_item_allocation}
# The strong-baseline table (issue 42): the simple cut a referee tries first on the same sorted estimates.
STRONG = {"thresholding": threshold_allocation, "median split": median_allocation, "per-item": per_item_allocation}
SHARES = {"equal counts": None, "30% of goods": 0.3}
R_GRID = np.unique(np.round(np.geomspace(1, 4096, 37)).astype(int))


def q90(m: int, delta: float, trials: int, seed: int, rule, share: float | None = None) -> float:
    """Budget at which the success rate reaches 0.9 (inf if never within the grid)."""
    rng = np.random.default_rng(seed)
    prev_r, prev_s = None, None
    for r in R_GRID:
        ok = 0
        for _ in range(trials):
            inst = planted_instance(m, delta, rng, share)
            est = noisy_estimates(inst, int(2 * m * r), 1.0, rng)
            ok += is_envy_free(inst.values, rule(est.values))
        s = ok / trials
        if s >= 0.9:
            if prev_r is None or s == prev_s:
                return float(2 * m * r)
            t = (0.9 - prev_s) / (s - prev_s)
            return float(2 * m * np.exp(np.log(prev_r) + t * (np.log(r) - np.log(prev_r))))
        prev_r, prev_s = r, s
    return float("inf")


def slope(xs, ys) -> float:
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=3, trials=200, quick="1 seed, 40 trials, m in {20, 40}, no Δ sweep")
    a = ap.parse_args(argv)
    seeds, trials = (1, 40) if a.quick else (a.seeds, a.trials)
    ms = (20, 40) if a.quick else (20, 40, 80, 160)
    out: dict = {"m": {}, "delta": {}}
    rows = []
    for m in ms:
        out["m"][m] = {
            name: [q90(m, 8.0, trials, 100 * s + m, rule) for s in range(seeds)] for name, rule in RULES.items()
        }
        rows.append([m, *(fmt(out["m"][m][n], 0) for n in RULES), fmt(m**2.5 / 64, 0), fmt(m**3 / 64, 0)])
    print(f"queries for 90% envy-free success, Δ = 8, σ = 1 (mean ± sd over {seeds} seeds x {trials} instances)")
    print(markdown_table(["m", *(f"q90 {n}" for n in RULES), "m^2.5/Δ²", "m³/Δ²"], rows))
    fits = {n: [slope(ms, [out["m"][m][n][s] for m in ms]) for s in range(seeds)] for n in RULES}
    print(
        "fitted exponent of m: " + ", ".join(f"{n} {fmt(v, 2)}" for n, v in fits.items()) + " (paper: 2.5 vs naive 3)"
    )
    out["exponent_m"] = fits
    if not a.quick:
        deltas = (4.0, 8.0, 16.0)
        drows = []
        for d in deltas:
            out["delta"][d] = {
                n: [q90(80, d, trials, 7 + 100 * s, rule) for s in range(seeds)] for n, rule in RULES.items()
            }
            drows.append([d, *(fmt(out["delta"][d][n], 0) for n in RULES)])
        print("\nm = 80, varying Δ")
        print(markdown_table(["Δ", *(f"q90 {n}" for n in RULES)], drows))
        dfit = {n: [slope(deltas, [out["delta"][d][n][s] for d in deltas]) for s in range(seeds)] for n in RULES}
        print("fitted exponent of Δ: " + ", ".join(f"{n} {fmt(v, 2)}" for n, v in dfit.items()) + " (paper: -2)")
        out["exponent_delta"] = dfit
    out["strong"] = strong_baseline((20, 40) if a.quick else (20, 40, 80, 160), seeds, trials)
    return json.loads(json.dumps(out, default=float))


def _cell(q: list[float]) -> str:
    never = sum(not np.isfinite(v) for v in q)
    return fmt(q, 0) if not never else f"not within the grid (r ≤ 4096) on {never} of {len(q)} seeds"


def strong_baseline(ms, seeds: int, trials: int) -> dict:
    """q90 of the thresholding rule, the median split and the per-item rule on planted splits with equal
    counts (the default generator) and with agent 1's planted bundle 30% of the goods (`share=0.3`)."""
    out: dict = {}
    rows = []
    for label, share in SHARES.items():
        for m in ms:
            got = {
                n: [q90(m, 8.0, trials, 100 * s + m + 1, rule, share) for s in range(seeds)]
                for n, rule in STRONG.items()
            }
            out[f"{label}/m={m}"] = got
            rows.append([label, m, *map(_cell, got.values())])
    print(f"\nstrong baseline: the median split of the same sorted estimates; Δ = 8, σ = 1, {seeds} seeds x {trials}")
    print(markdown_table(["planted split", "m", *(f"q90 {n}" for n in STRONG)], rows))
    for label in SHARES:
        fits = {}
        for n in STRONG:
            qs = [[out[f"{label}/m={m}"][n][s] for m in ms] for s in range(seeds)]
            fits[n] = [slope(ms, q) for q in qs if np.isfinite(q).all()]
        out[f"{label}/exponent_m"] = fits
        print(
            f"fitted exponent of m, {label}: " + ", ".join(f"{n} {fmt(v, 2) if v else 'none'}" for n, v in fits.items())
        )
    return out


if __name__ == "__main__":
    main()
