"""L2M demo (stage 1): CMI-greedy acquisition vs random order vs a global importance order.

    python -m interp.contrib.uncertainty_ood.experiments.l2m [--tasks 5] [--test-rows 100] [--quick]

Catalog setting: synthetic tabular tasks, d = 8 Gaussian features with a random correlation matrix,
logistic y (|w| = 3, weights spread unevenly), 2,000 retrospective rows with missing-at-random values
(feature 0 always seen; each other feature missing with probability p + 0.1 sign(x_0), p in {0.3, 0.6})
and n_lab in {30, 500} labels. The in-context predictor is the closed-form Gaussian-logistic model fitted
to that retrospective data (`l2m.GaussianLogisticModel`). 5 tasks, 100 test rows per task start with nothing
observed; each policy acquires features one at a time; metric: accuracy of p(y | x_obs) > 0.5 after k
acquisitions (k = 1, 2, 3, 4), and its mean over k = 1..4. Reference: the same agent with the true model.
No learned sequence model (stage 2): this checks the acquisition rule, not in-context pretraining.

Strong baseline (issue 42): "forward selection", one global order chosen on the task's own labelled retrospective
rows (the data the predictor is fitted on; no test rows) by greedy forward selection of the labels'
log-likelihood under the same predictor. Printed after the table: CMI greedy minus each fixed order, mean over
k = 1..4, paired by task, with the tasks where CMI greedy is higher.
"""

from __future__ import annotations

import json

import torch

from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.report import fmt, markdown_table
from interp.contrib.uncertainty_ood.l2m import (
    GaussianLogisticModel,
    acquire,
    forward_selection_order,
    global_importance_order,
)

D, N_RETRO, KS = 8, 2000, (1, 2, 3, 4)
POLICIES = (
    "random",
    "global importance",
    "forward selection (strong baseline)",
    "CMI greedy",
    "CMI greedy (true model)",
)


def make_task(seed: int):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(D, D, generator=g, dtype=torch.float64)
    cov = a @ a.T / D + 0.2 * torch.eye(D, dtype=torch.float64)
    sd = cov.diagonal().sqrt()
    cov = cov / torch.outer(sd, sd)
    w = torch.randn(D, generator=g, dtype=torch.float64) * torch.linspace(1.5, 0.2, D, dtype=torch.float64)
    w = 3.0 * w / w.norm()
    chol = torch.linalg.cholesky(cov)

    def sample(n, gen):
        x = torch.randn(n, D, generator=gen, dtype=torch.float64) @ chol.T
        y = (torch.rand(n, generator=gen, dtype=torch.float64) < torch.sigmoid(x @ w)).long()
        return x, y

    return sample, GaussianLogisticModel(torch.zeros(D, dtype=torch.float64), cov, w, 0.0)


def trial(seed: int, p_miss: float, n_lab: int, n_test: int) -> dict[str, dict[int, float]]:
    sample, truth = make_task(seed)
    g = torch.Generator().manual_seed(seed + 1)
    x, y = sample(N_RETRO, g)
    prob = (p_miss + 0.1 * torch.sign(x[:, :1])).expand(-1, D)
    observed = torch.rand(N_RETRO, D, generator=g, dtype=torch.float64) >= prob
    observed[:, 0] = True
    labeled = torch.zeros(N_RETRO, dtype=torch.bool)
    labeled[:n_lab] = True
    model = GaussianLogisticModel.fit(x, observed, y, labeled)
    xt, yt = sample(n_test, g)
    glob = global_importance_order(model)
    fwd = forward_selection_order(model, x, observed, y, labeled, max(KS))
    fwd += [j for j in glob if j not in fwd]  # a full permutation; only the first max(KS) are acquired
    out = {p: {k: 0.0 for k in KS} for p in POLICIES}
    for i in range(n_test):
        orders = {
            "random": acquire(model, xt[i], max(KS), "random", seed=seed * 10_000 + i),
            "global importance": acquire(model, xt[i], max(KS), "fixed", order=glob),
            "forward selection (strong baseline)": acquire(model, xt[i], max(KS), "fixed", order=fwd),
            "CMI greedy": acquire(model, xt[i], max(KS), "cmi"),
            "CMI greedy (true model)": acquire(truth, xt[i], max(KS), "cmi"),
        }
        for pol, order in orders.items():
            m = truth if pol.endswith("(true model)") else model
            obs = torch.zeros(D, dtype=torch.bool)
            for k, j in enumerate(order, 1):
                obs[j] = True
                if k in KS:
                    out[pol][k] += float((m.predict(xt[i], obs) > 0.5) == bool(yt[i])) / n_test
    return out


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=None, tasks=5, test_rows=100, quick="2 tasks, 30 test rows, one setting")
    a = parse(ap, argv)
    tasks, n_test = (2, 30) if a.quick else (a.tasks, a.test_rows)
    settings = [(0.3, 500)] if a.quick else [(0.3, 500), (0.3, 30), (0.6, 500), (0.6, 30)]
    res, rows = {}, []
    for p_miss, n_lab in settings:
        per = [trial(s, p_miss, n_lab, n_test) for s in range(tasks)]
        key = f"missing {p_miss}, {n_lab} labels"
        res[key] = {pol: {k: [t[pol][k] for t in per] for k in KS} for pol in POLICIES}
        for pol in POLICIES:
            mean_k = [sum(t[pol][k] for k in KS) / len(KS) for t in per]
            rows.append([key, pol, *(fmt(res[key][pol][k]) for k in KS), fmt(mean_k)])
    print(f"accuracy after k acquisitions (mean ± sd over {tasks} tasks, {n_test} test rows each)")
    print(markdown_table(["setting", "policy", *(f"k={k}" for k in KS), "mean k=1..4"], rows))
    for key, r in res.items():
        mean_k = {pol: [sum(r[pol][k][t] for k in KS) / len(KS) for t in range(tasks)] for pol in POLICIES}
        diffs = []
        for base in ("global importance", POLICIES[2]):
            d = [a - b for a, b in zip(mean_k["CMI greedy"], mean_k[base])]
            diffs.append(f"- {base.split(' (')[0]}: {fmt(d, 3)} (higher {sum(v > 0 for v in d)}/{tasks})")
        print(f"{key}, CMI greedy minus (mean k=1..4, paired by task):", "; ".join(diffs))
    return json.loads(json.dumps(res))


if __name__ == "__main__":
    main()
