"""Retraining tasks with known answers for the LDS tests (cheap: closed-form fits, no network)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class RidgeTask:
    """Ridge regression; a query's loss is its squared error. Influence is exact to first order here."""

    n_train: int = 200
    n_query: int = 12
    dim: int = 10
    ridge: float = 1.0
    seed: int = 0
    delay: float = 0.0
    """Seconds slept per subset (the kill -9 test needs a run that is still going)."""

    def data(self):
        g = torch.Generator().manual_seed(self.seed)
        x = torch.randn(self.n_train, self.dim, generator=g, dtype=torch.float64)
        w = torch.randn(self.dim, generator=g, dtype=torch.float64)
        y = x @ w + 0.5 * torch.randn(self.n_train, generator=g, dtype=torch.float64)
        xq = torch.randn(self.n_query, self.dim, generator=g, dtype=torch.float64)
        yq = xq @ w + 0.5 * torch.randn(self.n_query, generator=g, dtype=torch.float64)
        return x, y, xq, yq

    def fit(self, rows: Tensor) -> Tensor:
        x, y, _, _ = self.data()
        a = x[rows].T @ x[rows] + self.ridge * torch.eye(self.dim, dtype=torch.float64)
        return torch.linalg.solve(a, x[rows].T @ y[rows])

    def train_and_eval(self, rows: Tensor) -> Tensor:
        if self.delay:
            time.sleep(self.delay)
        _, _, xq, yq = self.data()
        return (xq @ self.fit(rows) - yq) ** 2

    def identity(self) -> dict:
        return {"model": "ridge", "n_train": self.n_train, "dim": self.dim, "ridge": self.ridge, "seed": self.seed}

    def influence(self) -> Tensor:
        """Helpfulness [n_train, n_query]: grad L_q^T H^-1 grad l_i at the full-data fit."""
        x, y, xq, yq = self.data()
        w = self.fit(torch.arange(self.n_train))
        h = x.T @ x + self.ridge * torch.eye(self.dim, dtype=torch.float64)
        gi = (x @ w - y)[:, None] * x
        gq = 2 * (xq @ w - yq)[:, None] * xq
        return gi @ torch.linalg.solve(h, gq.T)


@dataclass(frozen=True)
class AdditiveTask:
    """A model whose query losses are exactly linear in the subset: L_q(S) = -sum_{i in S} <v_i, u_q>."""

    n_train: int = 100
    n_query: int = 6
    seed: int = 0

    def vectors(self):
        g = torch.Generator().manual_seed(self.seed)
        return torch.randn(self.n_train, 4, generator=g), torch.randn(self.n_query, 4, generator=g)

    def train_and_eval(self, rows: Tensor) -> Tensor:
        v, u = self.vectors()
        return -(v[rows].sum(0) @ u.T)

    def identity(self) -> dict:
        return {"model": "additive", "n_train": self.n_train, "seed": self.seed}

    def exact_scores(self) -> Tensor:
        v, u = self.vectors()
        return v @ u.T
