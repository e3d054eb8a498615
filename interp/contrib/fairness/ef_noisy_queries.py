"""EF-NoisyQ: envy-free allocation of indivisible goods between two agents from noisy value queries.

Paper: *Envy-Free Allocation of Indivisible Goods via Noisy Queries* (arXiv 2602.06361; no code). Each
query (agent i, good j) returns v_i(j) + N(0, σ²). The paper's algorithm is non-adaptive (query every
pair equally often and average) followed by a polynomial-time *thresholding* allocation on the
estimated value differences; it needs Θ̃(m^2.5 / Δ²) queries when the instance has an allocation with
negative envy -Δ (both agents prefer their own bundle by at least Δ) and Δ ≫ m^{1/4}, against
O(m³ / Δ²) for learning every value to the precision that fixes every item's owner.

Our reconstruction of the thresholding rule (the paper's exact rule was not available offline): order
the goods by estimated difference d_j = v̂_1(j) - v̂_2(j), give agent 1 a prefix of that order, and pick
the prefix length k that maximises the smaller estimated margin min(v̂_1(A_1) - v̂_1(A_2),
v̂_2(A_2) - v̂_2(A_1)) (m + 1 candidates, cumulative sums). The baseline (`per_item_allocation`) gives
each good to the agent with the larger estimated value, which is envy-free here only once every good's
sign is right, the "learn everything" regime.

    inst = planted_instance(m=40, delta=8.0, rng=np.random.default_rng(0))
    est = noisy_estimates(inst, queries=20_000, sigma=1.0, rng=rng)   # [2, m], and queries used
    a1 = threshold_allocation(est.values)                                # bool [m]: goods of agent 1
    is_envy_free(inst.values, a1)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Instance:
    values: np.ndarray
    """[2, m] true additive values of the two agents."""
    planted: np.ndarray
    """bool [m]: the planted allocation's goods of agent 1."""

    @property
    def m(self) -> int:
        return self.values.shape[1]


def envy_margins(values: np.ndarray, a1: np.ndarray) -> tuple[float, float]:
    """(v_1(A_1) - v_1(A_2), v_2(A_2) - v_2(A_1)) for additive values [2, m] and agent 1's goods a1."""
    values = np.asarray(values, dtype=float)
    a1 = np.asarray(a1, dtype=bool)
    if values.ndim != 2 or values.shape[0] != 2 or a1.shape != (values.shape[1],):
        raise ValueError(f"values must be [2, m] and a1 bool [m]; got {values.shape} and {a1.shape}")
    s = np.where(a1, 1.0, -1.0)
    return float(values[0] @ s), float(-(values[1] @ s))


def is_envy_free(values: np.ndarray, a1: np.ndarray) -> bool:
    """Neither agent values the other's bundle above its own."""
    return min(envy_margins(values, a1)) >= 0


def planted_instance(m: int, delta: float, rng: np.random.Generator, share: float | None = None) -> Instance:
    """Shared base values b_j ~ U[0.5, 1.5], a planted split P_1 with b(P_1) ≈ b(P_2), then
    v_1 = b + (Δ/m)·s, v_2 = b - (Δ/m)·s with s = ±1 on P_1 / P_2: the planted allocation has both
    margins Δ ± |b(P_1) - b(P_2)| (about Δ), and each good's preference is only 2Δ/m strong.

    `share=None` (the default) balances by greedy (largest base value to the lighter side: about m/2 goods
    each). `share=f` plants round(f·m) random goods in P_1 and scales their base values so that
    b(P_1) = b(P_2) exactly: fewer, larger goods on one side, which a rule that assumes equal counts misses."""
    if m < 2:
        raise ValueError(f"m={m}: need at least two goods")
    if not 0 < delta <= m / 2:
        raise ValueError(f"delta={delta} must lie in (0, m/2] so that values stay non-negative")
    b = rng.uniform(0.5, 1.5, m)
    planted = np.zeros(m, dtype=bool)
    if share is None:
        load = [0.0, 0.0]
        for j in np.argsort(-b):
            side = 0 if load[0] <= load[1] else 1
            planted[j] = side == 0
            load[side] += b[j]
    else:
        k = round(share * m)
        if not 1 <= k <= m - 1:
            raise ValueError(f"share={share} plants {k} of {m} goods with agent 1; it must leave each agent one")
        planted[rng.permutation(m)[:k]] = True
        b[planted] *= b[~planted].sum() / b[planted].sum()
    s = np.where(planted, 1.0, -1.0)
    return Instance(np.stack([b + delta / m * s, b - delta / m * s]), planted)


@dataclass
class Estimates:
    values: np.ndarray
    """[2, m] averaged noisy answers."""
    queries: int
    """Queries spent (2·m·r)."""


def noisy_estimates(inst: Instance, queries: int, sigma: float, rng: np.random.Generator) -> Estimates:
    """Non-adaptive sampling: r = ⌊queries / 2m⌋ answers per (agent, good), averaged. The mean of r
    answers v + N(0, σ²) is drawn directly as v + N(0, σ²/r), the same distribution."""
    if sigma < 0:
        raise ValueError(f"sigma={sigma} must be >= 0")
    r = queries // (2 * inst.m)
    if r < 1:
        raise ValueError(f"queries={queries} is below one query per (agent, good) pair ({2 * inst.m})")
    noise = rng.standard_normal(inst.values.shape) * sigma / np.sqrt(r)
    return Estimates(inst.values + noise, 2 * inst.m * r)


def threshold_allocation(est: np.ndarray) -> np.ndarray:
    """Agent 1 gets the k goods of largest estimated difference v̂_1 - v̂_2, k maximising the smaller
    estimated margin (ties: smallest k). Returns bool [m]."""
    est = np.asarray(est, dtype=float)
    if est.ndim != 2 or est.shape[0] != 2 or est.shape[1] == 0:
        raise ValueError(f"estimates must be [2, m] with m >= 1; got {est.shape}")
    order = np.argsort(-(est[0] - est[1]), kind="stable")
    v1, v2 = est[0, order], est[1, order]
    c1 = np.concatenate([[0.0], np.cumsum(v1)])  # v̂_1 of the first k goods
    c2 = np.concatenate([[0.0], np.cumsum(v2)])
    m1 = 2 * c1 - c1[-1]  # v̂_1(A_1) - v̂_1(A_2)
    m2 = (c2[-1] - c2) - c2  # v̂_2(A_2) - v̂_2(A_1)
    k = int(np.argmax(np.minimum(m1, m2)))
    a1 = np.zeros(est.shape[1], dtype=bool)
    a1[order[:k]] = True
    return a1


def per_item_allocation(est: np.ndarray) -> np.ndarray:
    """Baseline: each good to the agent with the larger estimate (agent 1 on ties)."""
    est = np.asarray(est, dtype=float)
    if est.ndim != 2 or est.shape[0] != 2:
        raise ValueError(f"estimates must be [2, m]; got {est.shape}")
    return est[0] >= est[1]


def median_allocation(est: np.ndarray) -> np.ndarray:
    """Strong-baseline candidate: agent 1 gets the ⌈m/2⌉ goods of largest estimated difference v̂_1 - v̂_2
    (the same order as the thresholding rule, the cut fixed at half the goods instead of chosen by the
    margins). Returns bool [m]."""
    est = np.asarray(est, dtype=float)
    if est.ndim != 2 or est.shape[0] != 2 or est.shape[1] == 0:
        raise ValueError(f"estimates must be [2, m] with m >= 1; got {est.shape}")
    order = np.argsort(-(est[0] - est[1]), kind="stable")
    a1 = np.zeros(est.shape[1], dtype=bool)
    a1[order[: (est.shape[1] + 1) // 2]] = True
    return a1


def brute_force_best_margin(values: np.ndarray) -> tuple[float, np.ndarray]:
    """max over all 2^m allocations of the smaller margin (for tests: m <= 16)."""
    values = np.asarray(values, dtype=float)
    m = values.shape[1]
    if m > 16:
        raise ValueError(f"brute force is for m <= 16; got {m}")
    masks = ((np.arange(2**m)[:, None] >> np.arange(m)) & 1).astype(bool)
    s = np.where(masks, 1.0, -1.0)
    mins = np.minimum(s @ values[0], -(s @ values[1]))
    i = int(np.argmax(mins))
    return float(mins[i]), masks[i]
