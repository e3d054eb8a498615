"""KUMA-lite: an *input-dependent* Koopman forecaster (KUMA: input-dependent Koopman operator + U-shaped
multilevel attention; title and code not found) against a *global* Koopman operator and DLinear.

Koopman view of a series: on delay coordinates s_t = (x_{t-m+1}, ..., x_t) the dynamics are (close to)
linear, s_{t+1} ≈ A s_t. A global model (Koopa-lite) fits one A on all training data; a non-stationary
series (regime switches) needs A to follow the input. KUMA-lite fits A from the lookback window itself
(per-window DMD: ridge least squares on the window's own delay pairs, eigenvalues clipped to modulus ≤ 1
for stability), forecasts by iterating it, and adds a residual branch: a global ridge map from the part of
the window the local operator does not explain to the forecast's correction ("Koopman dynamics plus
residual dynamics"). The U-shaped multilevel attention is not implemented (see the README).

    F = local_koopman_forecast(windows, horizon=48, m=16)          # [N, H]
    G = GlobalKoopman(m=16).fit(train_series).forecast(windows, 48)
    D = DLinear(lookback, horizon).fit(train_windows, train_targets).predict(windows)
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp.contrib.common.ridge import ridge as ridge_weights


def delay_pairs(w: Tensor, m: int) -> tuple[Tensor, Tensor]:
    """Windows [N, L] -> (S [N, L-m, m], S_next [N, L-m, m]) of consecutive delay vectors."""
    if w.ndim != 2 or w.shape[1] <= m or m < 1:
        raise ValueError(f"windows must be [N, L] with L > m >= 1; got {tuple(w.shape)}, m={m}")
    S = w.unfold(1, m, 1)  # [N, L-m+1, m]
    return S[:, :-1], S[:, 1:]


def _stabilise(A: Tensor) -> Tensor:
    lam, V = torch.linalg.eig(A.to(torch.complex128))
    lam = lam / lam.abs().clamp_min(1.0)
    return (V @ torch.diag_embed(lam) @ torch.linalg.inv(V)).real


def _iterate(A: Tensor, s: Tensor, horizon: int) -> Tensor:
    """Roll s [N, m] forward with A [N or 1, m, m]; the forecast is the last delay coordinate. [N, H]."""
    out = []
    for _ in range(horizon):
        s = (A @ s.unsqueeze(2)).squeeze(2)
        out.append(s[:, -1])
    return torch.stack(out, 1)


def local_operators(w: Tensor, m: int = 16, ridge: float = 1e-3) -> Tensor:
    """Per-window Koopman operators A_n [N, m, m] minimising Σ‖A s_t - s_{t+1}‖² + ridge‖A‖² on window n."""
    S, S1 = delay_pairs(w.double(), m)
    A = ridge_weights(S, S1, ridge).transpose(1, 2)
    return _stabilise(A)


def local_koopman_forecast(w: Tensor, horizon: int, m: int = 16, ridge: float = 1e-3) -> Tensor:
    """Forecast each window with its own operator (input-dependent Koopman). [N, H]."""
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1; got {horizon}")
    A = local_operators(w, m, ridge)
    return _iterate(A, w.double()[:, -m:], horizon)


def local_residual(w: Tensor, m: int = 16, ridge: float = 1e-3) -> Tensor:
    """One-step in-window residuals of the local operator, at the last L-m steps. [N, L-m]."""
    A = local_operators(w, m, ridge)
    S, S1 = delay_pairs(w.double(), m)
    return (S1 - S @ A.transpose(1, 2))[:, :, -1]


class GlobalKoopman:
    """One operator A on delay coordinates, fit by ridge on every delay pair of the training series."""

    def __init__(self, m: int = 16, ridge: float = 1e-3):
        if m < 1 or ridge < 0:
            raise ValueError(f"need m >= 1 and ridge >= 0; got {m}, {ridge}")
        self.m, self.ridge, self.A = m, ridge, None

    def fit(self, series: Tensor) -> GlobalKoopman:
        """series [C, T] (channels share the operator)."""
        S, S1 = delay_pairs(series.double(), self.m)
        S, S1 = S.reshape(-1, self.m), S1.reshape(-1, self.m)
        self.A = _stabilise(ridge_weights(S, S1, self.ridge).T)
        return self

    def forecast(self, w: Tensor, horizon: int) -> Tensor:
        if self.A is None:
            raise ValueError("fit the model first")
        return _iterate(self.A.unsqueeze(0), w.double()[:, -self.m :], horizon)


def moving_average(w: Tensor, k: int = 25) -> Tensor:
    """DLinear's trend: a centred moving average with edge replication. [N, L]."""
    if k < 1 or k % 2 == 0:
        raise ValueError(f"kernel must be odd and positive; got {k}")
    pad = torch.cat([w[:, :1].expand(-1, k // 2), w, w[:, -1:].expand(-1, k // 2)], 1)
    return pad.unfold(1, k, 1).mean(2)


class DLinear:
    """DLinear (Zeng et al.): trend + seasonal decomposition, one linear map each, fit by ridge."""

    def __init__(self, kernel: int = 25, ridge: float = 1e-1):
        self.kernel, self.ridge, self.W = kernel, ridge, None

    def _features(self, w: Tensor) -> Tensor:
        t = moving_average(w.double(), self.kernel)
        return torch.cat([t, w.double() - t, torch.ones(len(w), 1, dtype=torch.float64)], 1)

    def fit(self, w: Tensor, y: Tensor) -> DLinear:
        if len(w) != len(y) or len(w) == 0:
            raise ValueError("windows and targets must have the same non-zero length")
        X = self._features(w)
        self.W = ridge_weights(X, y.double(), self.ridge)
        return self

    def predict(self, w: Tensor) -> Tensor:
        if self.W is None:
            raise ValueError("fit the model first")
        return self._features(w) @ self.W


class KoopmanResidual:
    """KUMA-lite: local Koopman forecast + a global ridge map (in-window residuals + window) -> correction."""

    def __init__(self, m: int = 16, ridge: float = 1.0):
        self.m, self.ridge, self.W = m, ridge, None

    def _parts(self, w: Tensor, horizon: int) -> tuple[Tensor, Tensor]:
        base = local_koopman_forecast(w, horizon, self.m)
        X = torch.cat([local_residual(w, self.m), w.double(), torch.ones(len(w), 1, dtype=torch.float64)], 1)
        return base, X

    def fit(self, w: Tensor, y: Tensor) -> KoopmanResidual:
        base, X = self._parts(w, y.shape[1])
        self.W = ridge_weights(X, y.double() - base, self.ridge)
        return self

    def predict(self, w: Tensor, horizon: int) -> Tensor:
        if self.W is None:
            raise ValueError("fit the model first")
        base, X = self._parts(w, horizon)
        return base + X @ self.W
