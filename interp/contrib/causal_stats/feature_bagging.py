"""FI-Bagging: feature instability of a learner, and feature bagging as its stabiliser (ridge learners).

Paper: *Feature Bagging Provides Stability* (ICML poster 63336; no code found). Definitions as the catalog
states them:

* **Feature instability** FI_j = mean over test points |f(x) - f^{(-j)}(x)|, where f^{(-j)} is the model
  refit with feature j removed; we report its max over features (worst case) and mean.
* **Instance instability** II_i: the same for removing one training sample i.
* **Feature bagging**: average B learners, learner b trained on a random subset of ceil(q d) features.
  Removing feature j refits only the learners that held j. The paper's theory: bagging strictly lowers FI
  (and II), more for small q; a modest B approaches B = ∞.

Ridge makes both refits exact and cheap (no approximation): with A = XᵀX + λI, H = A⁻¹, β = H Xᵀy,

    β^{(-j)} = β_{∖j} - H_{∖j,j} β_j / H_{jj}          (drop feature j: block inverse)
    β^{(-i)} = β - H x_i r_i / (1 - x_iᵀ H x_i)         (drop sample i: Sherman-Morrison, r_i = y_i - x_iᵀβ)

both tested against brute-force refits. Features are centred and y centred by the caller's data (no
intercept). Applied to a probe over cached activations, FI_j says how much the probe leans on neuron j.

    bag = BaggedRidge.fit(X, y, lam=1.0, q=0.5, n_bags=20, seed=0)
    fi = feature_instability(bag, X_test)        # [d]: FI_j for every feature

Strong baseline (issue 42): bagging with q < 1 also shrinks the fit, so a referee compares it with plain
ridge at the penalty that costs the same accuracy, not at the same λ. `ridge_at_mse` walks the penalty path
to the λ whose test MSE equals a target (the bagged model's), on the side of more shrinkage:

    lam, plain = ridge_at_mse(X, y, X_test, y_test, target_mse=mse_of_bag)
    feature_instability(plain, X_test)          # stability at matched accuracy
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from interp.contrib.common.ridge import ridge_gram


def _check(x: Tensor, y: Tensor, lam: float) -> None:
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"X must be a non-empty [n, d] matrix; got {tuple(x.shape)}")
    if y.shape != (x.shape[0],):
        raise ValueError(f"y must be [n] = [{x.shape[0]}]; got {tuple(y.shape)}")
    if lam <= 0:
        raise ValueError(f"lam={lam} must be positive (the refit formulas need an invertible XᵀX + λI)")


@dataclass
class Ridge:
    """One ridge learner on the feature subset `feats`."""

    feats: Tensor  # [k] feature ids
    beta: Tensor  # [k]
    h: Tensor  # [k, k] (X_SᵀX_S + λI)⁻¹

    @classmethod
    def fit(cls, x: Tensor, y: Tensor, lam: float, feats: Tensor | None = None) -> Ridge:
        _check(x, y, lam)
        feats = torch.arange(x.shape[1]) if feats is None else feats
        xs = x[:, feats].double()
        h = torch.linalg.inv(ridge_gram(xs, lam))
        return cls(feats, h @ xs.T @ y.double(), h)

    def predict(self, x: Tensor) -> Tensor:
        return x[:, self.feats].double() @ self.beta

    def drop_feature(self, j: int) -> Ridge:
        """The exact refit without feature j (j a global feature id held by this learner)."""
        pos = (self.feats == j).nonzero()
        if len(pos) == 0:
            return self
        k = int(pos[0, 0])
        keep = torch.arange(len(self.feats)) != k
        beta = self.beta[keep] - self.h[keep, k] * self.beta[k] / self.h[k, k]
        hk = self.h[keep][:, keep] - torch.outer(self.h[keep, k], self.h[k, keep]) / self.h[k, k]
        return Ridge(self.feats[keep], beta, hk)

    def drop_sample(self, x: Tensor, y: Tensor, i: int) -> Tensor:
        """The coefficients of the exact refit without training row i (x, y: the training data)."""
        xi = x[i, self.feats].double()
        hx = self.h @ xi
        r = float(y[i]) - float(xi @ self.beta)
        return self.beta - hx * r / (1 - float(xi @ hx))


@dataclass
class BaggedRidge:
    """The mean of ridge learners, each on a random ceil(q d) subset of the features."""

    learners: list[Ridge]
    d: int

    @classmethod
    def fit(cls, x: Tensor, y: Tensor, lam: float, q: float = 1.0, n_bags: int = 1, seed: int = 0) -> BaggedRidge:
        _check(x, y, lam)
        if not 0 < q <= 1:
            raise ValueError(f"the feature fraction q={q} must lie in (0, 1]")
        if n_bags < 1:
            raise ValueError(f"n_bags={n_bags} must be at least 1")
        d = x.shape[1]
        k = max(1, math.ceil(q * d))
        g = torch.Generator().manual_seed(seed)
        subsets = [
            torch.randperm(d, generator=g)[:k].sort().values if k < d else torch.arange(d) for _ in range(n_bags)
        ]
        return cls([Ridge.fit(x, y, lam, s) for s in subsets], d)

    def predict(self, x: Tensor) -> Tensor:
        return torch.stack([m.predict(x) for m in self.learners]).mean(0)

    def drop_feature(self, j: int) -> BaggedRidge:
        return BaggedRidge([m.drop_feature(j) for m in self.learners], self.d)


def feature_instability(model: BaggedRidge, x_test: Tensor) -> Tensor:
    """FI_j = mean_x |f(x) - f^{(-j)}(x)| for every feature j: [d]."""
    if x_test.ndim != 2 or x_test.shape[1] != model.d or x_test.shape[0] == 0:
        raise ValueError(f"x_test must be a non-empty [n, {model.d}] matrix; got {tuple(x_test.shape)}")
    base = model.predict(x_test)
    return torch.stack([(model.drop_feature(j).predict(x_test) - base).abs().mean() for j in range(model.d)])


def instance_instability(
    model: BaggedRidge, x: Tensor, y: Tensor, x_test: Tensor, rows: Tensor | None = None
) -> Tensor:
    """II_i = mean_x |f(x) - f^{(-i)}(x)| for training rows i (all, or `rows`): [len(rows)]."""
    rows = torch.arange(x.shape[0]) if rows is None else rows
    base = model.predict(x_test)
    out = []
    for i in rows.tolist():
        pred = torch.stack([x_test[:, m.feats].double() @ m.drop_sample(x, y, i) for m in model.learners]).mean(0)
        out.append((pred - base).abs().mean())
    return torch.stack(out)


def _mse(model: BaggedRidge, x: Tensor, y: Tensor) -> float:
    return float(((model.predict(x) - y.double()) ** 2).mean())


def ridge_at_mse(
    x: Tensor,
    y: Tensor,
    x_test: Tensor,
    y_test: Tensor,
    target_mse: float,
    lam_range: tuple[float, float] = (1e-3, 1e7),
    steps: int = 60,
) -> tuple[float, BaggedRidge]:
    """Plain ridge (B = 1, q = 1) at the penalty whose test MSE equals `target_mse`: (λ, model).

    The path's best λ on a log grid over `lam_range` is found first; from there λ grows (more shrinkage) and
    the crossing of `target_mse` is refined by bisection in log λ. A target below the path's best MSE cannot
    be matched: the best λ is returned (the plain model is then the more accurate one, by the gap); a target
    above the MSE at the largest λ returns that λ."""
    lo_lam, hi_lam = lam_range
    if not 0 < lo_lam < hi_lam or steps < 2:
        raise ValueError(f"need 0 < lam_range[0] < lam_range[1] and steps >= 2; got {lam_range}, {steps}")
    grid = torch.logspace(math.log10(lo_lam), math.log10(hi_lam), steps, dtype=torch.float64).tolist()

    def fit(lam: float) -> BaggedRidge:
        return BaggedRidge([Ridge.fit(x, y, lam)], x.shape[1])

    errs = [_mse(fit(lam), x_test, y_test) for lam in grid]
    best = min(range(steps), key=errs.__getitem__)
    if target_mse <= errs[best]:
        return grid[best], fit(grid[best])
    above = next((i for i in range(best + 1, steps) if errs[i] >= target_mse), None)
    if above is None:
        return grid[-1], fit(grid[-1])
    lo, hi = math.log(grid[above - 1]), math.log(grid[above])  # MSE(lo) < target <= MSE(hi)
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _mse(fit(math.exp(mid)), x_test, y_test) < target_mse else (lo, mid)
    return math.exp(hi), fit(math.exp(hi))
