"""OrchJail demo: pattern-model-guided fuzzing vs random mutation against simulated tool-calling agents
(benign placeholders only).

    python -m interp.contrib.security.experiments.orch_jail [--agents 10] [--budget 1000] [--quick]

Each agent (`ToolAgent(seed)`) has its own random keyword map and filter; both fuzzers get the same
query budget and a fuzzing seed per agent. Reported: queries to the first success (budget + 1 when
none), the fraction of agents broken within the budget, and distinct successful prompts per 1,000
queries; mean ± sd over agents.
"""

from __future__ import annotations

import json

import numpy as np

from interp.contrib.experiment import experiment_parser
from interp.contrib.report import fmt, markdown_table
from interp.contrib.security.orch_jail import ToolAgent, orchestration_fuzz, random_fuzz

FUZZERS = {"random mutation": random_fuzz, "orchestration-guided (ours)": orchestration_fuzz}


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=None, agents=10, budget=1000, quick="3 agents, budget 300")
    a = ap.parse_args(argv)
    agents, budget = (3, 300) if a.quick else (a.agents, a.budget)
    out, rows = {}, []
    for name, fuzz in FUZZERS.items():
        res = [fuzz(ToolAgent(seed=s), budget, np.random.default_rng(1000 + s)) for s in range(agents)]
        first = [float(r.first_success or budget + 1) for r in res]
        broken = [float(r.first_success is not None) for r in res]
        rate = [1000.0 * r.successes / budget for r in res]
        out[name] = {"first_success": first, "broken": broken, "successes_per_1000": rate}
        rows.append([name, fmt(first, 0), fmt(float(np.mean(broken)), 2), fmt(rate, 1)])
    print(f"{agents} simulated agents, budget {budget} queries each (mean ± sd over agents)")
    print(markdown_table(["fuzzer", "queries to first success", "agents broken", "successes per 1,000 queries"], rows))
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
