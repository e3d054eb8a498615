"""SAFER demo: open-set class-incremental learning on an SBM graph and on SmolLM2 token features.

    python -m interp.contrib.uncertainty_ood.experiments.safer [--seeds 3] [--quick] [--no-lm]

Graph (catalog setting): SBM with 3,000 nodes, 8 classes (p_in 0.01, p_out 0.002), class-conditional
Gaussian features (d 32, class-mean scale 0.6); encoder: 2-hop SGC propagation (a parameter-free 2-layer
GCN). Tasks {0,1}, {2,3}, {4,5} arrive in turn (60% of their nodes for training, nothing replayed);
classes 6 and 7 are unknown at test. Methods: fine-tuning one linear head over the classes seen so far
with max-softmax (MSP) rejection; nearest class-mean prototypes with an energy score (-logsumexp of
-|x - μ_c|²/2); SAFER (rank 8, γ 1), SAFER with γ 0 (logit energy only) and SAFER without reshaping;
the control that isolates the fingerprints: one frozen head per task on raw features, routed by the plain
logit energy (SAFER without reshaping and with γ 0). Seeds: data seeds (graph, split; heads seeded alike),
then head seeds on graph 0. Strong baseline (issue 42): "Mahalanobis prototypes", the class means plus one
within-class covariance pooled over every task seen (sufficient statistics only, nothing replayed), shrunk 10%
towards its mean eigenvalue (fixed; SAFER's rank and γ are fixed too); nearest class by Mahalanobis distance, the
unknown score -logsumexp(-d²/2). Printed: SAFER minus it, paired by seed (graph only).
Metrics after the last task: accuracy on known test nodes, forgetting (task-1 accuracy just after task 1
minus at the end), open-set AUROC (unknown vs known by the method's score).

SmolLM2 (`smollm2-135m`, cached `blocks.12.hook_resid_post` token rows of stdlib-docs, stdlib and
pydoc-topics, 48 x 64 tokens each, position 0 dropped): classes = the 8 most frequent tokens; tasks
{1st, 2nd}, {3rd, 4th}, {5th, 6th}; the 7th and 8th are unknown. Features: the residual rows,
standardised by the first task's statistics.
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F

from interp.contrib.common.probe import train_linear_probe
from interp.contrib.common.ranks import auroc
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.report import fmt, markdown_table
from interp.contrib.uncertainty_ood.safer import SAFER, sbm_graph, sgc_features

TASKS = ((0, 1), (2, 3), (4, 5))
UNKNOWN = (6, 7)
CONTROL = "control: frozen per-task heads, plain energy"
MAHA = "Mahalanobis prototypes (strong baseline)"
METHODS = ("fine-tune + MSP", "prototype energy", MAHA, CONTROL, "SAFER", "SAFER γ=0", "SAFER no reshape")


def split(y: torch.Tensor, seed: int):
    g = torch.Generator().manual_seed(seed)
    train = torch.zeros(len(y), dtype=torch.bool)
    train[torch.randperm(len(y), generator=g)[: int(0.6 * len(y))]] = True
    known = torch.isin(y, torch.tensor([c for t in TASKS for c in t]))
    return train & known, ~train & known, torch.isin(y, torch.tensor(UNKNOWN))


class FineTune:
    def __init__(self, steps):
        self.w = self.b = None
        self.steps = steps

    def learn_task(self, x, y, seed=0):
        n = int(y.max()) + 1
        w, b = torch.zeros(n, x.shape[1]), torch.zeros(n)
        if self.w is not None:  # keep the old rows, continue training on the new task only
            w[: len(self.w)], b[: len(self.b)] = self.w, self.b
        self.w, self.b = train_linear_probe(x, y, n, self.steps, lr=0.1, weight_decay=1e-4, init=(w, b))

    def predict(self, x):
        p = F.softmax(x @ self.w.T + self.b, -1)
        return p.argmax(-1), -p.max(-1).values


class Prototypes:
    def __init__(self):
        self.mu, self.cls = [], []

    def learn_task(self, x, y, seed=0):
        for c in torch.unique(y):
            self.mu.append(x[y == c].mean(0))
            self.cls.append(int(c))

    def predict(self, x):
        d = torch.cdist(x, torch.stack(self.mu)).pow(2) / 2
        return torch.tensor(self.cls)[d.argmin(1)], torch.logsumexp(-d, 1).neg()


class MahalanobisPrototypes(Prototypes):
    """Class means and a within-class covariance pooled over the tasks seen (sums only), shrunk towards its mean
    eigenvalue by `shrink`; nearest class by Mahalanobis distance, unknown score -logsumexp(-d²/2)."""

    def __init__(self, shrink: float = 0.1):
        super().__init__()
        self.shrink, self.scatter, self.n = shrink, None, 0

    def learn_task(self, x, y, seed=0):
        super().learn_task(x, y, seed)
        x = x.double()
        for c in torch.unique(y):
            z = x[y == c] - x[y == c].mean(0)
            self.scatter = z.T @ z if self.scatter is None else self.scatter + z.T @ z
            self.n += len(z)

    def predict(self, x):
        cov = self.scatter / max(1, self.n - len(self.mu))
        cov = (1 - self.shrink) * cov + self.shrink * cov.diagonal().mean() * torch.eye(len(cov), dtype=cov.dtype)
        white = torch.linalg.cholesky(torch.linalg.inv(cov))  # d² = |(x - μ) L|²
        mu = torch.stack(self.mu).double()
        d = torch.cdist(x.double() @ white, mu @ white).pow(2) / 2
        return torch.tensor(self.cls)[d.argmin(1)], torch.logsumexp(-d, 1).neg().float()


def evaluate(make, feats, y, seed: int, model_seed: int | None = None) -> dict[str, float]:
    """One method's metrics on the split `seed` draws; `model_seed` (default `seed`) seeds the heads."""
    tr, te, unk = split(y, seed)
    m = make()
    first = None
    for i, task in enumerate(TASKS):
        sel = tr & torch.isin(y, torch.tensor(task))
        m.learn_task(feats[sel], y[sel], seed=seed if model_seed is None else model_seed)
        if i == 0:
            t1 = te & torch.isin(y, torch.tensor(TASKS[0]))
            first = float((m.predict(feats[t1])[0] == y[t1]).float().mean())
    pred, score = m.predict(feats)
    t1 = te & torch.isin(y, torch.tensor(TASKS[0]))
    return {
        "acc": float((pred[te] == y[te]).float().mean()),
        "forgetting": first - float((pred[t1] == y[t1]).float().mean()),
        "open-set auroc": auroc(score[unk], score[te]),
    }


def run(feats, y, seeds: int, steps: int, model_seeds: bool = False) -> dict[str, dict[str, list[float]]]:
    """Every method over `seeds` data seeds (graph and split; the heads seeded alike), or with
    `model_seeds` over `seeds` head seeds on data seed 0."""
    makers = {
        "fine-tune + MSP": lambda: FineTune(steps),
        "prototype energy": Prototypes,
        MAHA: MahalanobisPrototypes,
        # the control: SAFER's frozen per-task heads and energy routing without its fingerprints
        # (heads on raw features, no residual term)
        CONTROL: lambda: SAFER(rank=8, gamma=0.0, reshape_features=False, steps=steps),
        "SAFER": lambda: SAFER(rank=8, gamma=1.0, steps=steps),
        "SAFER γ=0": lambda: SAFER(rank=8, gamma=0.0, steps=steps),
        "SAFER no reshape": lambda: SAFER(rank=8, gamma=1.0, reshape_features=False, steps=steps),
    }
    res: dict[str, dict[str, list[float]]] = {}
    for s in range(seeds):
        d, m = (0, s) if model_seeds else (s, s)
        for name, make in makers.items():
            fd, yd = feats(d) if callable(feats) else feats, y(d) if callable(y) else y
            for k, v in evaluate(make, fd, yd, d, m).items():
                res.setdefault(name, {}).setdefault(k, []).append(v)
    return res


def graph_data(seed: int, n: int):
    a, x, y = sbm_graph(n, 8, 0.01 * 3000 / n, 0.002 * 3000 / n, 32, 0.6, seed)
    return sgc_features(a, x), y


def lm_data():
    from interp.contrib.lm_features import CORPORA, corpus_store, hook_name, load_lm, token_rows

    xs, toks, loaded = [], [], load_lm()  # its weights key the caches
    for c in CORPORA:
        x, idx = token_rows(corpus_store(c, 48, 64, loaded=loaded), hook_name(12))
        xs.append(x)
        toks.append(idx["tokens"].long())
    x, tok = torch.cat(xs), torch.cat(toks)
    ids, counts = torch.unique(tok, return_counts=True)
    top = ids[counts.argsort(descending=True)[:8]]  # class c = the c-th most frequent token
    keep = torch.isin(tok, top)
    y = (tok[keep].unsqueeze(1) == top.unsqueeze(0)).float().argmax(1)
    x = x[keep]
    first = torch.isin(y, torch.tensor(TASKS[0]))
    return (x - x[first].mean(0)) / x[first].std(0).clamp_min(1e-6), y


def show(title, res):
    keys = list(next(iter(res.values())))
    print(title)
    print(markdown_table(["method", *keys], [[m, *(fmt(r[k]) for k in keys)] for m, r in res.items()]))


def paired(res, a: str, b: str) -> str:
    """Per-seed differences a - b of every metric, as 'metric +mean ± sd (per seed ...)'."""
    parts = []
    for k in res[a]:
        d = [x - y for x, y in zip(res[a][k], res[b][k])]
        parts.append(f"{k} {fmt(d)} ({', '.join(f'{v:+.3f}' for v in d)})")
    return f"{a} - {b}, paired by seed: " + "; ".join(parts)


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__, seeds=3, quick="1 seed, 600 nodes, 50 head steps, no LM run", no_lm="skip the SmolLM2 run"
    )
    a = parse(ap, argv)
    seeds, n, steps = (1, 600, 50) if a.quick else (a.seeds, 3000, 300)
    data = {s: graph_data(s, n) for s in range(seeds)}
    out = {"graph": run(lambda s: data[s][0], lambda s: data[s][1], seeds, steps)}
    show(
        f"SBM graph, {n} nodes, tasks {TASKS}, unknown {UNKNOWN} (mean ± sd over {seeds} graphs and splits)",
        out["graph"],
    )
    print(paired(out["graph"], "SAFER", CONTROL))
    print(paired(out["graph"], "SAFER", MAHA))
    out["graph, head seeds"] = run(lambda s: data[0][0], lambda s: data[0][1], seeds, steps, model_seeds=True)
    show(f"\nthe same, graph and split 0, {seeds} head seeds", out["graph, head seeds"])
    if not (a.quick or a.no_lm):
        x, y = lm_data()
        out["smollm2"] = run(x, y, seeds, steps)
        show(f"\nsmollm2-135m layer 12 token rows, 8 most frequent tokens as classes ({seeds} splits)", out["smollm2"])
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
