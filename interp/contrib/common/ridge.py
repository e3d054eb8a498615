"""Closed-form ridge regression, and the one-hot ridge classifier the papers use as a cheap probe.

    w = ridge(x, y, lam)                     # argmin |y - x w|^2 + lam |w|^2       [d] or [d, k]
    w = ridge(x, y, lam, mean=True)          # argmin |y - x w|^2 / n + lam |w|^2
    pred = ridge_classify(x_tr, y_tr, x_te, n_classes, lam)   # with a bias column, one-hot targets

All solve the normal equations with `torch.linalg.solve` in the inputs' dtype (float64 in the papers);
the bias column, where there is one, is penalised like any weight.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def with_bias(x: Tensor) -> Tensor:
    """`x` [n, d] with a column of ones appended: [n, d + 1]."""
    return torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], 1)


def ridge_gram(x: Tensor, lam: float, mean: bool = False) -> Tensor:
    """xᵀx + lam I (divided by n before adding lam when `mean`): the ridge normal matrix [..., d, d]."""
    g = x.mT @ x / x.shape[-2] if mean else x.mT @ x
    return g + lam * torch.eye(x.shape[-1], dtype=x.dtype)


def ridge(x: Tensor, y: Tensor, lam: float, mean: bool = False) -> Tensor:
    """Ridge weights [d] (or [d, k] for y [n, k]): solve (xᵀx + lam I) w = xᵀy, with both sides divided by
    n when `mean` (the penalty then does not grow with n). Leading batch axes ([..., n, d]) solve one
    problem each."""
    rhs = x.mT @ y / x.shape[-2] if mean else x.mT @ y
    return torch.linalg.solve(ridge_gram(x, lam, mean), rhs)


def ridge_classify(x_train: Tensor, y_train: Tensor, x_test: Tensor, n_classes: int, lam: float) -> Tensor:
    """Predicted classes of `x_test` by ridge regression, with a bias, onto one-hot labels (float64)."""
    a = with_bias(x_train.double())
    w = ridge(a, F.one_hot(y_train, n_classes).double(), lam)
    return (with_bias(x_test.double()) @ w).argmax(1)
