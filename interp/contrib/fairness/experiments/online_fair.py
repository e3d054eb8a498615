"""OnlineFair demo: fraction of agents reaching their proportional share (PROP) and maximin share (MMS)
under no information, normalisation predictions and frequency predictions, as prediction noise grows.

    python -m interp.contrib.fairness.experiments.online_fair [--seeds 3] [--instances 20] [--quick]

n = 3 agents, m = 60 goods (`valuations`: agent scales 1..10, shared popularity). Arrival orders:
random, increasing total value (the big goods come last) and decreasing. Noise s: each predicted
total is T_i·exp(s·N(0,1)); each predicted multiset value is V[i, g]·exp(s·N(0,1)). A seed is a batch
of independent instances; the table shows mean ± sd over seeds of the per-batch fraction.

Strong baseline (issue 42): `running_quantile`, the frequency-informed rule with no information at all (each
agent's multiset = the goods seen so far, target = the running proportional share); nothing to tune on either
side, so this is the information ablation of the frequency rule. Printed after each order: frequency-informed
minus running-quantile, paired by seed, PROP fraction.
"""

from __future__ import annotations

import json

import numpy as np

from interp.contrib.experiment import experiment_parser
from interp.contrib.fairness.online_fair import (
    frequency_informed,
    max_value,
    mms,
    normalised_deficit,
    running_normalised,
    running_quantile,
    utilities,
    valuations,
)
from interp.contrib.report import fmt, markdown_table

METHODS = (
    "max value (no info)",
    "running-normalised (no info)",
    "running-quantile (no info, strong baseline)",
    "normalised deficit (totals)",
    "frequency-informed (multisets)",
)


def batch(order: str, noise: float, instances: int, seed: int) -> dict[str, tuple[float, float]]:
    rng = np.random.default_rng(seed)
    hits = {k: [0, 0] for k in METHODS}
    for _ in range(instances):
        v = valuations(3, 60, rng)
        tot = v.sum(0)
        o = rng.permutation(60) if order == "random" else np.argsort(tot) if order == "increasing" else np.argsort(-tot)
        v = v[:, o]
        totals = v.sum(1) * np.exp(noise * rng.standard_normal(3))
        multisets = v * np.exp(noise * rng.standard_normal(v.shape))
        share_p = v.sum(1) / 3
        share_m = np.array([mms(v[i], 3) for i in range(3)])
        for k, alloc in zip(
            METHODS,
            (
                max_value(v),
                running_normalised(v),
                running_quantile(v),
                normalised_deficit(v, totals),
                frequency_informed(v, multisets),
            ),
        ):
            u = utilities(v, alloc)
            hits[k][0] += int((u >= share_p - 1e-12).sum())
            hits[k][1] += int((u >= share_m - 1e-12).sum())
    return {k: (a / (3 * instances), b / (3 * instances)) for k, (a, b) in hits.items()}


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=3, instances=20, quick="1 seed, 5 instances, increasing order, noise 0 and 1")
    a = ap.parse_args(argv)
    seeds, inst = (1, 5) if a.quick else (a.seeds, a.instances)
    orders = ("increasing",) if a.quick else ("random", "increasing", "decreasing")
    noises = (0.0, 1.0) if a.quick else (0.0, 0.1, 0.3, 1.0)
    out = {}
    for order in orders:
        rows = []
        for s in noises:
            per = [batch(order, s, inst, 1000 * seed + int(100 * s)) for seed in range(seeds)]
            cell = {k: ([p[k][0] for p in per], [p[k][1] for p in per]) for k in METHODS}
            out[f"{order}/{s}"] = cell
            rows.append([s, *(f"{fmt(cell[k][0], 2)} / {fmt(cell[k][1], 2)}" for k in METHODS)])
        print(
            f"\narrival order: {order}; fraction of agents reaching PROP / MMS (n=3, m=60; {seeds} seeds x {inst} "
            "instances)"
        )
        print(markdown_table(["noise s", *METHODS], rows))
        freq, base = METHODS[-1], METHODS[2]
        diffs = []
        for s in noises:
            cell = out[f"{order}/{s}"]
            d = [a - b for a, b in zip(cell[freq][0], cell[base][0])]
            diffs.append(f"s={s:g}: {fmt(d, 3)} (higher {sum(x > 0 for x in d)}/{seeds})")
        print("frequency-informed - running-quantile (PROP, paired by seed):", "; ".join(diffs))
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
