"""OrchJail demo: pattern-model-guided fuzzing vs random mutation against simulated tool-calling agents
(benign placeholders only).

    python -m interp.contrib.security.experiments.orch_jail [--agents 100] [--budget 1000] [--quick]

Each agent (`ToolAgent(seed)`) has its own random keyword map and filter; both fuzzers get the same
query budget and a fuzzing seed per agent. Reported: queries to the first success (budget + 1 when
none), the fraction of agents broken within the budget with its 95% Wilson interval, and distinct successful
prompts per 1,000 queries; mean ± sd over agents. 100 agents by default: with 10 (the first version) the two
fuzzers' broken fractions at 300 queries (2 of 10 each) had intervals too wide to tell them apart.

Strong baseline (issue 42): the random-mutation hill climber with its two settings tuned, the edits per candidate
(MUTATIONS) and the seed prompts' length (SEED_LENS), by the fraction of separate agents (seeds 500-519, their
own fuzzing streams) broken within the same budget, ties broken by mean queries to the first success.
"""

from __future__ import annotations

import json

import numpy as np

from interp.contrib.experiment import experiment_parser
from interp.contrib.report import fmt, markdown_table
from interp.contrib.security.orch_jail import ToolAgent, orchestration_fuzz, random_fuzz

FUZZERS = {"random mutation": random_fuzz, "orchestration-guided (ours)": orchestration_fuzz}
MUTATIONS, SEED_LENS = (1, 2, 4, 8), (4, 8, 16, 24)
BASELINE = "random mutation, tuned (strong baseline)"


def tune_random(budget: int, agents: int = 20) -> tuple[int, int]:
    """(mutations, seed_len) breaking the most of agents 500.. within `budget` (fewest queries on ties)."""

    def score(cfg):
        res = [random_fuzz(ToolAgent(seed=s), budget, np.random.default_rng(s), *cfg) for s in range(500, 500 + agents)]
        return (sum(r.first_success is not None for r in res), -np.mean([r.first_success or budget + 1 for r in res]))

    return max(((m, n) for m in MUTATIONS for n in SEED_LENS), key=score)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion k / n."""
    p, d = k / n, 1 + z * z / n
    centre, half = (p + z * z / (2 * n)) / d, z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / d
    return max(0.0, centre - half), min(1.0, centre + half)


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=None, agents=100, budget=1000, quick="3 agents, budget 300")
    a = ap.parse_args(argv)
    agents, budget = (3, 300) if a.quick else (a.agents, a.budget)
    out, rows = {}, []
    cfg = tune_random(budget, 5 if a.quick else 20)
    fuzzers = {**FUZZERS, BASELINE: lambda ag, b, g: random_fuzz(ag, b, g, *cfg)}
    for name, fuzz in fuzzers.items():
        res = [fuzz(ToolAgent(seed=s), budget, np.random.default_rng(1000 + s)) for s in range(agents)]
        first = [float(r.first_success or budget + 1) for r in res]
        broken = [float(r.first_success is not None) for r in res]
        rate = [1000.0 * r.successes / budget for r in res]
        lo, hi = wilson(int(sum(broken)), agents)
        out[name] = {"first_success": first, "broken": broken, "broken_ci95": [lo, hi], "successes_per_1000": rate}
        rows.append([name, fmt(first, 0), f"{np.mean(broken):.2f} [{lo:.2f}, {hi:.2f}]", fmt(rate, 1)])
    print(f"{agents} simulated agents, budget {budget} queries each (mean ± sd over agents)")
    print(f"strong baseline's tuned (mutations, seed_len): {cfg}")
    head = ["fuzzer", "queries to first success", "agents broken [95% CI]", "successes per 1,000 queries"]
    print(markdown_table(head, rows))
    out["tuned settings"] = list(cfg)
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
