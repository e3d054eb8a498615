"""StreamATE: streaming average-treatment-effect estimation with per-arm discrepancy coresets and kernel
balancing weights.

Paper: *Streaming Covariate Balancing via Discrepancy-Based Feature Coresets* (ICML poster 64305; no code
found; the algorithm below is our reconstruction from the abstract and the catalog):

1. Features: random Fourier features φ(z) of a Gaussian kernel on z = (covariates, stream time), so that
   kernel mean embeddings are vectors and shifts over time are balanced too (`RandomFourier`).
2. Per treatment arm, a bounded-memory coreset by **merge-and-reduce**: blocks of `block` points; two
   blocks of the same level are merged and **halved** by a self-balancing walk over pairs (keep the
   member whose choice keeps the running feature discrepancy small: kernel halving's greedy form);
   a level-k point stands for 2^k units (`HalvingCoreset`). Outcomes travel with their points.
3. **Balancing weights** on each arm's coreset: w on the simplex minimising |Σ_i w_i φ_i - μ|² + α|w|²,
   μ the running mean embedding of *all* units (the target population), by projected gradient
   (`balance_weights`); no propensity model.
4. ATE = Σ w¹ y¹ - Σ w⁰ y⁰.

Memory: O(block · log(n / block)) points per arm plus one D-vector; time linear in n.

    est = StreamATE(d_in=6, n_features=128, block=64, seed=0)
    for z, t, y in stream: est.update(z, t, y)
    est.estimate()
"""

from __future__ import annotations

import math

import numpy as np


class RandomFourier:
    """φ(z) = sqrt(2/D) cos(W z + b), W ~ N(0, 1/ℓ²): E[φ(z)·φ(z')] = exp(-|z - z'|² / 2ℓ²)."""

    def __init__(self, d_in: int, n_features: int, lengthscale: float, seed: int = 0):
        if d_in < 1 or n_features < 1 or lengthscale <= 0:
            raise ValueError(
                f"need d_in >= 1, n_features >= 1, lengthscale > 0; got {d_in}, {n_features}, {lengthscale}"
            )
        rng = np.random.default_rng(seed)
        self.w = rng.normal(scale=1 / lengthscale, size=(d_in, n_features))
        self.b = rng.uniform(0, 2 * math.pi, size=n_features)
        self.scale = math.sqrt(2 / n_features)

    def __call__(self, z: np.ndarray) -> np.ndarray:
        z = np.atleast_2d(z)
        if z.shape[1] != self.w.shape[0]:
            raise ValueError(f"inputs have {z.shape[1]} columns; the features expect {self.w.shape[0]}")
        return self.scale * np.cos(z @ self.w + self.b)


def halve(phi: np.ndarray) -> np.ndarray:
    """Indices of half the rows (one of each consecutive pair) chosen by a self-balancing walk: keep the
    member that keeps the running sum of (kept - dropped) feature differences small. Row count must be even."""
    if len(phi) % 2:
        raise ValueError(f"halve needs an even number of rows; got {len(phi)}")
    s = np.zeros(phi.shape[1])
    keep = []
    for i in range(0, len(phi), 2):
        d = phi[i] - phi[i + 1]
        if s @ d > 0:  # keeping i would push the sum further along d: keep i+1
            keep.append(i + 1)
            s -= d
        else:
            keep.append(i)
            s += d
    return np.asarray(keep)


class HalvingCoreset:
    """Merge-and-reduce coreset of (feature, outcome) rows with blocks of `block` rows per level."""

    def __init__(self, block: int):
        if block < 2 or block % 2:
            raise ValueError(f"block={block} must be an even number >= 2")
        self.block = block
        self.levels: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        self.buf_phi: list[np.ndarray] = []
        self.buf_y: list[float] = []
        self.max_rows = 0

    def add(self, phi: np.ndarray, y: float) -> None:
        self.buf_phi.append(phi)
        self.buf_y.append(y)
        if len(self.buf_phi) == self.block:
            self._push(0, np.stack(self.buf_phi), np.asarray(self.buf_y))
            self.buf_phi, self.buf_y = [], []
        self.max_rows = max(self.max_rows, self.n_rows)

    def _push(self, level: int, phi: np.ndarray, y: np.ndarray) -> None:
        blocks = self.levels.setdefault(level, [])
        blocks.append((phi, y))
        if len(blocks) == 2:
            (p1, y1), (p2, y2) = blocks
            del self.levels[level]
            p, yy = np.concatenate([p1, p2]), np.concatenate([y1, y2])
            keep = halve(p)
            self._push(level + 1, p[keep], yy[keep])

    @property
    def n_rows(self) -> int:
        return len(self.buf_phi) + sum(len(b[0]) for bl in self.levels.values() for b in bl)

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(features [k, D], outcomes [k], multiplicities [k]: 2^level, 1 for the buffer)."""
        ps, ys, ms = [], [], []
        for lvl, bl in self.levels.items():
            for p, y in bl:
                ps.append(p), ys.append(y), ms.append(np.full(len(y), 2.0**lvl))
        if self.buf_phi:
            ps.append(np.stack(self.buf_phi)), ys.append(np.asarray(self.buf_y)), ms.append(np.ones(len(self.buf_y)))
        if not ps:
            raise ValueError("the coreset is empty: no unit of this arm has arrived yet")
        return np.concatenate(ps), np.concatenate(ys), np.concatenate(ms)


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection onto {w >= 0, Σ w = 1} (sort-based)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1
    idx = np.arange(1, len(v) + 1)
    rho = np.nonzero(u - css / idx > 0)[0][-1]
    return np.maximum(v - css[rho] / (rho + 1), 0)


def balance_weights(
    phi: np.ndarray, target: np.ndarray, alpha: float = 1e-3, init: np.ndarray | None = None, iters: int = 500
) -> np.ndarray:
    """w on the simplex minimising |φᵀw - target|² + α |w|², by accelerated projected gradient from `init`
    (default uniform)."""
    k = len(phi)
    if k == 0 or phi.ndim != 2 or target.shape != (phi.shape[1],):
        raise ValueError(f"phi must be [k >= 1, D] and target [D]; got {phi.shape}, {target.shape}")
    if alpha < 0:
        raise ValueError(f"alpha={alpha} must be >= 0")
    lip = 2 * (np.linalg.norm(phi, 2) ** 2 + alpha)
    w = np.full(k, 1 / k) if init is None else init / init.sum()
    v, tk = w.copy(), 1.0
    for _ in range(iters):
        grad = 2 * (phi @ (phi.T @ v - target) + alpha * v)
        w_new = project_simplex(v - grad / lip)
        tk_new = (1 + math.sqrt(1 + 4 * tk * tk)) / 2
        v = w_new + (tk - 1) / tk_new * (w_new - w)
        w, tk = w_new, tk_new
    return w


class StreamATE:
    """The streaming estimator: one coreset per arm and the running mean embedding of all units."""

    def __init__(
        self,
        d_in: int,
        n_features: int = 128,
        block: int = 64,
        lengthscale: float = 2.0,
        alpha: float = 1e-3,
        seed: int = 0,
    ):
        self.rff = RandomFourier(d_in, n_features, lengthscale, seed)
        self.arms = (HalvingCoreset(block), HalvingCoreset(block))
        self.mean = np.zeros(n_features)
        self.n = 0
        self.alpha = alpha

    def update(self, z: np.ndarray, treated: int, y: float) -> None:
        if treated not in (0, 1):
            raise ValueError(f"treatment must be 0 or 1; got {treated!r}")
        phi = self.rff(z)[0]
        self.n += 1
        self.mean += (phi - self.mean) / self.n
        self.arms[treated].add(phi, float(y))

    def update_many(self, z: np.ndarray, treated: np.ndarray, y: np.ndarray) -> None:
        phi = self.rff(z)
        for p, t, yy in zip(phi, treated, y):
            if t not in (0, 1):
                raise ValueError(f"treatment must be 0 or 1; got {t!r}")
            self.n += 1
            self.mean += (p - self.mean) / self.n
            self.arms[int(t)].add(p, float(yy))

    def estimate(self) -> float:
        means = []
        for arm in self.arms:
            phi, y, mult = arm.rows()
            w = balance_weights(phi, self.mean, self.alpha, init=mult)
            means.append(float(w @ y))
        return means[1] - means[0]

    @property
    def memory(self) -> int:
        """Rows held now (both arms)."""
        return sum(a.n_rows for a in self.arms)
