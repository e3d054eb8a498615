"""L2M: active feature acquisition by conditional mutual information, with an in-context predictor.

Paper: *Learning-To-Measure: In-Context Active Feature Acquisition* (arXiv 2510.12624; Kobayashi, Jing,
Yao, Namkoong, Joshi; no public code). L2M pretrains a sequence model on (feature-id, value) tokens from
many tasks with missing values, so that it gives p(y | x_obs) and p(x_j | x_obs) in context, and then
acquires features greedily by the conditional mutual information

    I(y; x_j | x_obs) = E_{x_j ~ p(.|x_obs)} KL( p(y | x_obs, x_j) || p(y | x_obs) ).

This file is the catalog's stage 1: the in-context predictor is a closed-form Gaussian model fitted to
one task's *retrospective* data (missing at random, few labels): feature mean and covariance from
pairwise-complete moments, a logistic label model fitted on the labeled rows after conditional-mean
imputation; p(x_j | x_obs) is the Gaussian conditional and p(y | x_obs) the probit approximation
σ(m / sqrt(1 + π s² / 8)) of E[σ(wᵀx) | x_obs]. The CMI of a candidate feature is computed by
Gauss-Hermite quadrature over x_j. Stage 2 (a pretrained set transformer) is not implemented.

    model = GaussianLogisticModel.fit(x_retro, mask_retro, y_retro, labeled)   # NaN-free, mask = observed
    order = acquire(model, x_row, budget=4, policy="cmi")                      # feature ids in order
    p = model.predict(x_row, observed)                                          # p(y = 1 | x_obs)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

_GH_X, _GH_W = (torch.tensor(v, dtype=torch.float64) for v in np.polynomial.hermite_e.hermegauss(24))
_GH_W = _GH_W / _GH_W.sum()  # nodes and weights of E[f(z)], z ~ N(0, 1)


def _probit_sigmoid(m: Tensor, s2: Tensor) -> Tensor:
    return torch.sigmoid(m / torch.sqrt(1 + math.pi * s2 / 8))


def binary_entropy(p: Tensor) -> Tensor:
    p = p.clamp(1e-12, 1 - 1e-12)
    return -(p * p.log() + (1 - p) * (1 - p).log())


@dataclass
class GaussianLogisticModel:
    mean: Tensor
    """Feature mean [d]."""
    cov: Tensor
    """Feature covariance [d, d] (positive definite)."""
    w: Tensor
    """Logistic weights [d]."""
    b: float
    """Logistic bias."""

    @classmethod
    def fit(
        cls, x: Tensor, observed: Tensor, y: Tensor, labeled: Tensor, ridge: float = 1e-2, steps: int = 300
    ) -> GaussianLogisticModel:
        """Fit from retrospective rows x [n, d] (values where `observed`), labels y [n] used where `labeled`."""
        if x.ndim != 2 or observed.shape != x.shape or y.shape != (len(x),) or labeled.shape != (len(x),):
            raise ValueError("x and observed must be [n, d], y and labeled [n]")
        if int(labeled.sum()) < 2:
            raise ValueError("need at least two labeled rows to fit the label model")
        if (observed.sum(0) < 2).any():
            raise ValueError("every feature needs at least two observed values")
        x, m = x.double() * observed, observed.double()
        mean = x.sum(0) / m.sum(0)
        c = (x - mean) * m
        both = m.T @ m
        cov = (c.T @ c) / both.clamp_min(1)
        cov = (cov + cov.T) / 2
        evals, evecs = torch.linalg.eigh(cov)  # pairwise-complete moments may be indefinite: clip
        cov = evecs @ torch.diag(evals.clamp_min(1e-3 * float(evals.max()))) @ evecs.T
        model = cls(mean, cov, torch.zeros(x.shape[1], dtype=torch.float64), 0.0)
        xl = torch.stack([model.conditional_mean(x[i], observed[i]) for i in torch.nonzero(labeled).flatten()])
        yl = y[labeled].double()
        w = torch.zeros(x.shape[1] + 1, dtype=torch.float64, requires_grad=True)
        # L-BFGS with a closure, not common.fit (first-order steps over batches)
        opt = torch.optim.LBFGS([w], max_iter=steps, line_search_fn="strong_wolfe")
        z = torch.cat([xl, torch.ones(len(xl), 1, dtype=torch.float64)], 1)

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(z @ w, yl) + ridge * w[:-1].pow(2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        model.w, model.b = w.detach()[:-1], float(w.detach()[-1])
        return model

    def _split(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        return torch.nonzero(obs).flatten(), torch.nonzero(~obs).flatten()

    def conditional(self, x: Tensor, observed: Tensor) -> tuple[Tensor, Tensor]:
        """(E[x | x_obs] [d], Cov[x | x_obs] [d, d]) (observed entries exact, zero variance)."""
        o, u = self._split(observed.bool())
        mean, cov = self.mean.clone(), torch.zeros_like(self.cov)
        if len(o) == 0:
            return mean, self.cov.clone()
        x = x.double()
        mean[o] = x[o]
        if len(u):
            k = torch.linalg.solve(self.cov[o][:, o], self.cov[o][:, u]).T  # [u, o]
            mean[u] = self.mean[u] + k @ (x[o] - self.mean[o])
            cu = self.cov[u][:, u] - k @ self.cov[o][:, u]
            cov[u.unsqueeze(1), u.unsqueeze(0)] = (cu + cu.T) / 2
        return mean, cov

    def conditional_mean(self, x: Tensor, observed: Tensor) -> Tensor:
        return self.conditional(x, observed)[0]

    def predict(self, x: Tensor, observed: Tensor) -> float:
        """p(y = 1 | x_obs) by the probit approximation over the unobserved features."""
        mean, cov = self.conditional(x, observed)
        return float(_probit_sigmoid(self.w @ mean + self.b, self.w @ cov @ self.w))

    def cmi(self, x: Tensor, observed: Tensor, j: int) -> float:
        """I(y; x_j | x_obs) for an unobserved feature j, by Gauss-Hermite quadrature over x_j."""
        if bool(observed[j]):
            raise ValueError(f"feature {j} is already observed")
        mean, cov = self.conditional(x, observed)
        p0 = _probit_sigmoid(self.w @ mean + self.b, self.w @ cov @ self.w)
        vj = cov[j, j].clamp_min(1e-12)
        gain = cov[:, j] / vj  # E[x | x_obs, x_j] = mean + gain (x_j - mean_j); Cov shrinks by gain cov_jᵀ
        cov_after = cov - torch.outer(gain, cov[:, j])
        s2 = self.w @ cov_after @ self.w
        xs = mean[j] + vj.sqrt() * _GH_X
        p = _probit_sigmoid(self.w @ mean + self.b + (self.w @ gain) * (xs - mean[j]), s2)
        return float(binary_entropy(p0) - (_GH_W * binary_entropy(p)).sum())


def acquire(
    model: GaussianLogisticModel,
    x: Tensor,
    budget: int,
    policy: str = "cmi",
    order: list[int] | None = None,
    seed: int = 0,
) -> list[int]:
    """Features acquired for one row x [d], in order: "cmi" (greedy CMI), "random", or "fixed" (`order`)."""
    d = x.shape[0]
    if not 0 <= budget <= d:
        raise ValueError(f"budget={budget} must be between 0 and the number of features {d}")
    if policy == "fixed":
        if order is None or sorted(order) != list(range(d)):
            raise ValueError("policy 'fixed' needs `order`, a permutation of the feature ids")
        return list(order[:budget])
    if policy == "random":
        return torch.randperm(d, generator=torch.Generator().manual_seed(seed))[:budget].tolist()
    if policy != "cmi":
        raise ValueError(f"unknown policy {policy!r}; use cmi, random or fixed")
    observed = torch.zeros(d, dtype=torch.bool)
    taken: list[int] = []
    for _ in range(budget):
        j = max((j for j in range(d) if not observed[j]), key=lambda j: model.cmi(x, observed, j))
        observed[j] = True
        taken.append(j)
    return taken


def forward_selection_order(
    model: GaussianLogisticModel, x: Tensor, observed: Tensor, y: Tensor, labeled: Tensor, budget: int
) -> list[int]:
    """Strong baseline (issue 42): one global order chosen on the task's own labelled retrospective rows by greedy
    forward selection: at each step the feature whose addition gives the highest mean log-likelihood of the labels
    under `model.predict` (each row uses only its observed values among the chosen features)."""
    d = x.shape[1]
    if not 0 <= budget <= d:
        raise ValueError(f"budget={budget} must be between 0 and the number of features {d}")
    rows = torch.nonzero(labeled).flatten()
    if len(rows) == 0:
        raise ValueError("forward selection needs labelled rows")
    chosen: list[int] = []
    for _ in range(budget):
        best, best_ll = -1, -math.inf
        for j in range(d):
            if j in chosen:
                continue
            cols = torch.zeros(d, dtype=torch.bool)
            cols[chosen + [j]] = True
            ll = 0.0
            for i in rows.tolist():
                p = min(max(model.predict(x[i], cols & observed[i]), 1e-9), 1 - 1e-9)
                ll += math.log(p if int(y[i]) == 1 else 1 - p)
            if ll > best_ll:
                best, best_ll = j, ll
        chosen.append(best)
    return chosen


def global_importance_order(model: GaussianLogisticModel) -> list[int]:
    """A fixed order by |w_j| sd_j (the baseline 'global feature importance')."""
    return torch.argsort(model.w.abs() * model.cov.diagonal().sqrt(), descending=True).tolist()
