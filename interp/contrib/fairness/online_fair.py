"""OnlineFair: online fair allocation of indivisible goods with normalisation or frequency predictions.

Paper: online fair allocation with future information (title and code not found; catalog spec only).
Goods arrive one by one and must be given away at once, irrevocably; agents have additive values
V[i, g] >= 0. Without information about the future no online rule can guarantee proportionality
(PROP: u_i >= T_i / n, T_i the agent's total) or maximin share (MMS); with *normalisation*
information (each T_i) or *frequency* predictions (the multiset of each agent's values, not their
order) the paper gives algorithms whose guarantees degrade gracefully with prediction noise.

Implemented here (our reconstructions; the paper's exact rules were not available offline):

- `max_value` (no information): each good to the agent who values it most.
- `running_normalised` (no information): normalise by the total seen so far, T̂_i(t) = Σ_{s<=t} V[i, s],
  and run the normalised-deficit rule below with it.
- `normalised_deficit` (knows T_i, or a noisy prediction of it): among agents still below their
  proportional share (u_i / T_i < 1/n), the good goes to the one with the largest normalised value
  V[i, g] / T_i; when every agent has reached its share, to the largest normalised value overall.
- `running_quantile` (no information; the strong baseline of issue 42): the frequency-informed rule with each
  agent's multiset replaced by the goods seen so far and its target by the running proportional share
  (u_i < seen_i / n): the good goes to the agent below target for whom it ranks highest among its own values so
  far, else to the highest such quantile overall.
- `frequency_informed` (knows each agent's multiset of values, or a noisy one): each agent's target is
  its MMS computed offline from the multiset (the "share-based" guarantee being lifted online); the
  good goes to the agent still below target for whom it ranks highest among its own future values
  (its quantile in the multiset), else to the highest quantile overall.

    V = valuations(n=3, m=60, rng=np.random.default_rng(0))
    alloc = normalised_deficit(V, totals=V.sum(1))    # int [m]: the agent of each good
    prop_fraction(V, alloc), mms_fraction(V, alloc)
"""

from __future__ import annotations

import itertools

import numpy as np


def _check(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    if v.ndim != 2 or v.shape[0] < 1 or v.shape[1] < 1:
        raise ValueError(f"valuations must be [agents, goods] with at least one of each; got {v.shape}")
    if (v < 0).any() or not np.isfinite(v).all():
        raise ValueError("valuations must be finite and non-negative (goods)")
    return v


def valuations(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """Random additive values with agent scales 1..10 (so raw comparisons mislead) and a shared
    popularity per good: V[i, g] = scale_i · pop_g · LogNormal(0, 0.5), pop_g ~ Exp(1)."""
    if n < 1 or m < 1:
        raise ValueError(f"need n >= 1 agents and m >= 1 goods; got n={n}, m={m}")
    scale = np.geomspace(1.0, 10.0, n)[rng.permutation(n)]
    pop = rng.exponential(1.0, m)
    return scale[:, None] * pop[None] * rng.lognormal(0.0, 0.5, (n, m))


def utilities(v: np.ndarray, alloc: np.ndarray) -> np.ndarray:
    """u_i = Σ_{g: alloc[g] = i} V[i, g]."""
    v = _check(v)
    alloc = np.asarray(alloc)
    if alloc.shape != (v.shape[1],) or alloc.min() < 0 or alloc.max() >= v.shape[0]:
        raise ValueError(f"alloc must hold one agent index in [0, {v.shape[0]}) per good")
    return np.array([v[i, alloc == i].sum() for i in range(v.shape[0])])


def max_value(v: np.ndarray) -> np.ndarray:
    return _check(v).argmax(0)


def normalised_deficit(v: np.ndarray, totals) -> np.ndarray:
    """The normalisation-informed rule (see the module docstring); `totals` may be a noisy prediction."""
    v = _check(v)
    totals = np.asarray(totals, dtype=float)
    if totals.shape != (v.shape[0],) or (totals <= 0).any():
        raise ValueError(f"totals must be {v.shape[0]} positive numbers (each agent's predicted total value)")
    n = v.shape[0]
    u = np.zeros(n)
    alloc = np.zeros(v.shape[1], dtype=int)
    for g in range(v.shape[1]):
        score = v[:, g] / totals
        below = u / totals < 1.0 / n
        i = int(np.argmax(np.where(below, score, -np.inf))) if below.any() else int(np.argmax(score))
        alloc[g], u[i] = i, u[i] + v[i, g]
    return alloc


def running_normalised(v: np.ndarray) -> np.ndarray:
    """No information: the normalised-deficit rule with each total estimated by what has arrived so far."""
    v = _check(v)
    n, m = v.shape
    u, seen = np.zeros(n), np.zeros(n)
    alloc = np.zeros(m, dtype=int)
    for g in range(m):
        seen += v[:, g]
        tot = np.maximum(seen * m / (g + 1), 1e-12)
        score = v[:, g] / tot
        below = u / tot < 1.0 / n
        i = int(np.argmax(np.where(below, score, -np.inf))) if below.any() else int(np.argmax(score))
        alloc[g], u[i] = i, u[i] + v[i, g]
    return alloc


def running_quantile(v: np.ndarray) -> np.ndarray:
    """No information: the frequency-informed rule on the empirical multiset of the goods seen so far, with the
    running proportional share seen_i / n as each agent's target (see the module docstring)."""
    v = _check(v)
    n, m = v.shape
    u, seen = np.zeros(n), np.zeros(n)
    alloc = np.zeros(m, dtype=int)
    for g in range(m):
        seen += v[:, g]
        q = (v[:, : g + 1] <= v[:, g : g + 1]).mean(1)  # each agent's quantile of this good among those seen
        below = u < seen / n
        i = int(np.argmax(np.where(below, q, -np.inf))) if below.any() else int(np.argmax(q))
        alloc[g], u[i] = i, u[i] + v[i, g]
    return alloc


def mms(values, n: int, exact_up_to: int = 10) -> float:
    """Maximin share of one agent: the best over partitions into n bundles of the worst bundle. Exact by
    enumeration for at most `exact_up_to` goods (n^(goods-1) partitions); otherwise a lower bound (largest-first greedy,
    then single-good
    moves and pairwise swaps that raise the worst bundle)."""
    x = np.sort(np.asarray(values, dtype=float))[::-1]
    if n < 1:
        raise ValueError(f"n={n} must be >= 1")
    if len(x) <= exact_up_to:
        best = 0.0
        for lab in itertools.product(range(n), repeat=len(x)):
            if lab and lab[0] != 0:
                break  # symmetry: the largest good is in bundle 0
            best = max(best, np.bincount(lab, weights=x, minlength=n).min())
        return float(best)
    lab = np.zeros(len(x), dtype=int)
    load = np.zeros(n)
    for j, val in enumerate(x):
        lab[j] = int(np.argmin(load))
        load[lab[j]] += val
    improved = True
    while improved:
        improved = False
        lo = int(np.argmin(load))
        for j in range(len(x)):
            b = lab[j]
            if b == lo:
                continue
            if load[b] - x[j] > load[lo]:  # move good j to the worst bundle
                load[b] -= x[j]
                load[lo] += x[j]
                lab[j] = lo
                improved = True
                break
            for k in np.flatnonzero(lab == lo):  # swap a bigger good in, a smaller one out
                d = x[j] - x[k]
                if d > 0 and load[b] - d > load[lo]:
                    load[b] -= d
                    load[lo] += d
                    lab[j], lab[k] = lo, b
                    improved = True
                    break
            if improved:
                break
    return float(load.min())


def frequency_informed(v: np.ndarray, multisets: np.ndarray | None = None) -> np.ndarray:
    """The frequency-informed rule; `multisets` [n, m] is each agent's predicted multiset of values
    (any order; default: the true values)."""
    v = _check(v)
    n, m = v.shape
    ms = v if multisets is None else _check(multisets)
    if ms.shape != v.shape:
        raise ValueError(f"multisets must have the valuations' shape {v.shape}; got {ms.shape}")
    target = np.array([mms(ms[i], n) for i in range(n)])
    sorted_ms = np.sort(ms, axis=1)
    u = np.zeros(n)
    alloc = np.zeros(m, dtype=int)
    for g in range(m):
        q = np.array([np.searchsorted(sorted_ms[i], v[i, g], side="right") / m for i in range(n)])
        below = u < target
        i = int(np.argmax(np.where(below, q, -np.inf))) if below.any() else int(np.argmax(q))
        alloc[g], u[i] = i, u[i] + v[i, g]
    return alloc


def prop_fraction(v: np.ndarray, alloc: np.ndarray, alpha: float = 1.0) -> float:
    """Fraction of agents with u_i >= alpha · T_i / n."""
    v = _check(v)
    return float((utilities(v, alloc) >= alpha * v.sum(1) / v.shape[0] - 1e-12).mean())


def mms_fraction(v: np.ndarray, alloc: np.ndarray, alpha: float = 1.0) -> float:
    """Fraction of agents with u_i >= alpha · MMS_i (MMS exact up to 10 goods, a lower bound beyond)."""
    v = _check(v)
    n = v.shape[0]
    share = np.array([mms(v[i], n) for i in range(n)])
    return float((utilities(v, alloc) >= alpha * share - 1e-12).mean())
