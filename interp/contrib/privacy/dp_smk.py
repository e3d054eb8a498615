"""DP-SMK: differentially private submodular maximisation under a knapsack constraint.

Paper: *Differentially Private Submodular Maximization with a Knapsack Constraint* (arXiv 2606.14951; no
code found). Maximise a monotone submodular f(S) subject to Σ_{j∈S} c_j ≤ B when f depends on private
user data (facility location: f(S) = (1/n) Σ_u max_{j∈S} w_{u j}, so one user moves any f by at most 1/n).

What is implemented here (our reconstruction of the abstract's building block, not the paper's
(1-1/e) continuous algorithm, whose details were not available): the *density greedy with
augmentation* (the "greedy+" that is a 1/2-approximation without privacy), with every choice made by
the exponential mechanism:

1. Greedy steps t = 1..T: among items that still fit, pick j with probability ∝ exp(ε_t s_j / 2Δ),
   where s_j = (f(S ∪ j) - f(S)) · c_min / c_j is the cost-normalised marginal gain (sensitivity
   Δ = 1/n, since c_min / c_j ≤ 1).
2. At each step also pick, by the exponential mechanism on f(S_t ∪ e) (sensitivity 1/n), the best
   single item e that still fits next to S_t: the augmented candidate S_t ∪ {e}. With S_0 = ∅ this is
   the best-singleton fallback.
3. Output the candidate (the full greedy set, which dominates its prefixes as f is monotone, or one
   of the augmented sets) chosen by one more exponential mechanism on f. The budget ε is split evenly
   over the 2T + 1 choices (basic composition), T = ⌊B / c_min⌋ (data-independent, as privacy needs).

Baselines: the same algorithm with ε = ∞ (exact argmax: the non-private greedy+), and the naive DP
greedy (exponential mechanism on raw marginal gains, no cost normalisation, no augmentation). Strong baseline
(issue 42): `dp_density_greedy`, the exponential mechanism on the cost-normalised gains alone (no augmentation,
no final pick) stopped after at most k picks, so each pick gets ε/k; k is its one setting, tuned on separate
instances (the experiment's `--tune-seeds`).

    from interp.contrib.privacy.dp_smk import FacilityLocation, dp_greedy_plus, knapsack_optimum
    f = FacilityLocation(W)                    # W: [users, items] in [0, 1]
    res = dp_greedy_plus(f, costs, budget=2.0, eps=0.5, rng=np.random.default_rng(0))
    res.value, res.items, res.queries
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np


class FacilityLocation:
    """f(S) = (1/n) Σ_u max_{j∈S} W[u, j] (0 for S = ∅); W [users, items] with entries in [0, 1].

    Monotone and submodular; replacing one user's row changes any f(S) or marginal gain by at most 1/n,
    which is the sensitivity the exponential mechanism uses. Counts its evaluations in `queries`.
    """

    def __init__(self, w: np.ndarray):
        w = np.asarray(w, dtype=float)
        if w.ndim != 2 or w.size == 0:
            raise ValueError(f"W must be a non-empty [users, items] matrix; got shape {w.shape}")
        if w.min() < 0 or w.max() > 1:
            raise ValueError("W entries must lie in [0, 1] (the sensitivity 1/n assumes it); rescale W")
        self.w = w
        self.queries = 0

    @property
    def n_users(self) -> int:
        return self.w.shape[0]

    @property
    def n_items(self) -> int:
        return self.w.shape[1]

    @property
    def sensitivity(self) -> float:
        return 1.0 / self.n_users

    def cover(self, items) -> np.ndarray:
        """Per-user coverage max_{j∈S} W[u, j] (zeros for S = ∅)."""
        items = list(items)
        return self.w[:, items].max(1) if items else np.zeros(self.n_users)

    def value(self, items) -> float:
        self.queries += 1
        return float(self.cover(items).mean())

    def gains(self, cover: np.ndarray) -> np.ndarray:
        """Marginal gains f(S ∪ j) - f(S) of every item given S's coverage (one query per item)."""
        self.queries += self.n_items
        return np.maximum(self.w - cover[:, None], 0.0).mean(0)


def exponential_mechanism(scores: np.ndarray, eps: float, sensitivity: float, rng: np.random.Generator) -> int:
    """Index drawn with probability ∝ exp(eps · score / (2 · sensitivity)); eps = inf picks the argmax
    (first on ties)."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1 or len(scores) == 0:
        raise ValueError("the exponential mechanism needs a non-empty 1-D array of scores")
    if not eps > 0 or sensitivity <= 0:
        raise ValueError(f"eps ({eps}) and sensitivity ({sensitivity}) must be positive")
    if math.isinf(eps):
        return int(np.argmax(scores))
    logits = eps * scores / (2.0 * sensitivity)
    p = np.exp(logits - logits.max())
    return int(rng.choice(len(scores), p=p / p.sum()))


def em_probabilities(scores, eps: float, sensitivity: float) -> np.ndarray:
    """The exponential mechanism's output distribution (for tests and analysis)."""
    logits = eps * np.asarray(scores, dtype=float) / (2.0 * sensitivity)
    p = np.exp(logits - logits.max())
    return p / p.sum()


@dataclass
class Selection:
    items: list[int]
    """The chosen items."""
    value: float
    """f of the chosen items (the true, private value: for evaluation only)."""
    cost: float
    queries: int
    """Evaluations of f (a marginal-gain vector counts one per item)."""


def _check(f: FacilityLocation, costs: np.ndarray, budget: float, eps: float) -> np.ndarray:
    costs = np.asarray(costs, dtype=float)
    if costs.shape != (f.n_items,):
        raise ValueError(f"costs must have one entry per item ({f.n_items}); got shape {costs.shape}")
    if (costs <= 0).any():
        raise ValueError("costs must be positive")
    if budget <= 0:
        raise ValueError(f"budget={budget} must be positive")
    if not eps > 0:
        raise ValueError(f"eps={eps} must be positive (use math.inf for the non-private algorithm)")
    return costs


def dp_greedy_plus(f: FacilityLocation, costs, budget: float, eps: float, rng: np.random.Generator) -> Selection:
    """The DP density greedy with augmentation (see the module docstring); eps = inf is non-private."""
    costs = _check(f, costs, budget, eps)
    f.queries = 0
    c_min = costs.min()
    steps = max(1, int(budget // c_min))
    eps_choice = eps / (2 * steps + 1)
    chosen: list[int] = []
    cover = np.zeros(f.n_users)
    spent = 0.0
    candidates: list[list[int]] = []
    for _ in range(steps):
        fits = np.flatnonzero(costs + spent <= budget + 1e-12)
        fits = fits[~np.isin(fits, chosen)]
        if len(fits) == 0:
            break
        gains = f.gains(cover)[fits]
        # augmentation: the best single item that fits next to the current prefix (S_0 = ∅: best singleton)
        e = fits[exponential_mechanism(float(cover.mean()) + gains, eps_choice, f.sensitivity, rng)]
        candidates.append(chosen + [int(e)])
        j = fits[exponential_mechanism(gains * c_min / costs[fits], eps_choice, f.sensitivity, rng)]
        chosen.append(int(j))
        spent += costs[j]
        cover = np.maximum(cover, f.w[:, j])
    candidates.append(list(chosen))  # f is monotone: the full greedy set dominates its own prefixes
    if not chosen:
        return Selection([], 0.0, 0.0, f.queries)
    vals = np.array([f.value(s) for s in candidates])
    best = candidates[exponential_mechanism(vals, eps_choice, f.sensitivity, rng)]
    return Selection(best, float(f.cover(best).mean()), float(costs[best].sum()) if best else 0.0, f.queries)


def naive_dp_greedy(f: FacilityLocation, costs, budget: float, eps: float, rng: np.random.Generator) -> Selection:
    """Baseline: exponential mechanism on raw marginal gains among the items that fit, no cost
    normalisation, no augmentation; ε split over T = ⌊B / c_min⌋ steps."""
    costs = _check(f, costs, budget, eps)
    f.queries = 0
    steps = max(1, int(budget // costs.min()))
    chosen: list[int] = []
    cover, spent = np.zeros(f.n_users), 0.0
    for _ in range(steps):
        fits = np.flatnonzero(costs + spent <= budget + 1e-12)
        fits = fits[~np.isin(fits, chosen)]
        if len(fits) == 0:
            break
        j = fits[exponential_mechanism(f.gains(cover)[fits], eps / steps, f.sensitivity, rng)]
        chosen.append(int(j))
        spent += costs[j]
        cover = np.maximum(cover, f.w[:, j])
    return Selection(chosen, float(cover.mean()), spent, f.queries)


def dp_density_greedy(
    f: FacilityLocation, costs, budget: float, eps: float, rng: np.random.Generator, steps: int | None = None
) -> Selection:
    """Strong baseline: the exponential mechanism on cost-normalised gains Δf_j · c_min / c_j (sensitivity 1/n)
    among the items that fit, for at most `steps` picks with ε/steps each (basic composition); `steps` = None
    means T = ⌊B / c_min⌋. Stops early when nothing fits. No augmentation, no final selection."""
    costs = _check(f, costs, budget, eps)
    f.queries = 0
    c_min = costs.min()
    cap = max(1, int(budget // c_min))
    steps = cap if steps is None else int(steps)
    if steps < 1:
        raise ValueError(f"steps={steps} must be at least 1")
    chosen: list[int] = []
    cover, spent = np.zeros(f.n_users), 0.0
    for _ in range(min(steps, cap)):
        fits = np.flatnonzero(costs + spent <= budget + 1e-12)
        fits = fits[~np.isin(fits, chosen)]
        if len(fits) == 0:
            break
        dens = f.gains(cover)[fits] * c_min / costs[fits]
        j = fits[exponential_mechanism(dens, eps / steps, f.sensitivity, rng)]
        chosen.append(int(j))
        spent += costs[j]
        cover = np.maximum(cover, f.w[:, j])
    return Selection(chosen, float(cover.mean()), spent, f.queries)


def knapsack_optimum(f: FacilityLocation, costs, budget: float) -> Selection:
    """Brute-force optimum over every feasible subset (for tests: at most 16 items)."""
    costs = _check(f, costs, budget, 1.0)
    if f.n_items > 16:
        raise ValueError(f"brute force is for at most 16 items; got {f.n_items}")
    best, best_val = [], 0.0
    for r in range(1, f.n_items + 1):
        for s in itertools.combinations(range(f.n_items), r):
            if costs[list(s)].sum() <= budget + 1e-12:
                v = float(f.cover(s).mean())
                if v > best_val + 1e-15:
                    best, best_val = list(s), v
    return Selection(best, best_val, float(costs[best].sum()) if best else 0.0, 0)
