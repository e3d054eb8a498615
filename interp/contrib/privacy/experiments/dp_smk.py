"""DP-SMK demo: DP greedy+ (cost-normalised, augmented) vs the naive DP greedy, as a fraction of the
non-private greedy+, on facility location under a knapsack.

    python -m interp.contrib.privacy.experiments.dp_smk [--seeds 5] [--quick]

Catalog setting: 200 users x 100 items, W_uj = exp(-|p_u - q_j|² / 0.1) for random points in the unit
square (a location problem), costs uniform in [0.2, 1], budget 3; ε ∈ {0.1, 0.5, 1, 4, 16}. The reported
ratio is f(DP solution) / f(non-private greedy+); the optimum over all subsets is out of reach at 100
items, so the non-private greedy+ is the reference (it is within 1/2 of the optimum, and on small
instances the tests check it against brute force).
"""

from __future__ import annotations

import json
import math

import numpy as np

from interp.contrib.experiment import experiment_parser
from interp.contrib.privacy.dp_smk import FacilityLocation, dp_greedy_plus, naive_dp_greedy
from interp.contrib.report import fmt, markdown_table


def instance(seed: int, users: int, items: int):
    rng = np.random.default_rng(seed)
    pu, qj = rng.random((users, 2)), rng.random((items, 2))
    w = np.exp(-((pu[:, None] - qj[None]) ** 2).sum(-1) / 0.1)
    return FacilityLocation(w), rng.uniform(0.2, 1.0, items)


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__, seeds=5, draws=(20, "DP runs per instance and ε"), quick="3 seeds, 5 draws, 60 users x 30 items"
    )
    ap.add_argument("--users", type=int, nargs="+", default=[200], help="user counts (one table each)")
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.5, 1.0, 4.0, 16.0])
    a = ap.parse_args(argv)
    if a.quick:
        return run(60, 30, 3, 5, (0.1, 0.5, 1.0, 4.0, 16.0))
    return {str(u): run(u, 100, a.seeds, a.draws, tuple(a.eps)) for u in a.users}


def run(users: int, items: int, seeds: int, draws: int, eps_grid) -> dict:
    budget = 3.0
    res = {e: {"greedy+": [], "naive": [], "queries": []} for e in eps_grid}
    ref_q = []
    for s in range(seeds):
        f, c = instance(s, users, items)
        ref = dp_greedy_plus(f, c, budget, math.inf, np.random.default_rng(0))
        ref_q.append(ref.queries)
        rng = np.random.default_rng(1000 + s)
        for e in eps_grid:
            g = [dp_greedy_plus(f, c, budget, e, rng) for _ in range(draws)]
            n = [naive_dp_greedy(f, c, budget, e, rng) for _ in range(draws)]
            res[e]["greedy+"].append(float(np.mean([x.value for x in g])) / ref.value)
            res[e]["naive"].append(float(np.mean([x.value for x in n])) / ref.value)
            res[e]["queries"].append(float(np.mean([x.queries for x in g])))
    print(
        f"f(DP) / f(non-private greedy+), {users} users x {items} items, budget {budget}; "
        f"mean ± sd over {seeds} instances ({draws} DP draws each)"
    )
    print(
        markdown_table(
            ["ε", "DP greedy+ (ours)", "naive DP greedy", "f queries (greedy+)"],
            [[e, fmt(r["greedy+"]), fmt(r["naive"]), fmt(r["queries"], 0)] for e, r in res.items()],
        )
    )
    print(f"non-private greedy+ queries: {fmt([float(q) for q in ref_q], 0)}")
    return json.loads(json.dumps({str(k): v for k, v in res.items()}))


if __name__ == "__main__":
    main()
