"""SWM (*Building Social World Models with Large Language Models*, arXiv 2606.11482): a latent state-space
model of belief dynamics (e.g. prediction-market prices) driven by event embeddings, trained by maximising
an ELBO over belief time series, with no event-to-shift annotations.

    z_t ~ p(z_t | z_{t-1}, e_t) = N(z_{t-1} + f(z_{t-1}, e_t), diag σ_p²)       transition (learned)
    b_t ~ p(b_t | z_t)          = N(C z_t + d, diag σ_b²)                      emission (learned)
    q(z_t | b_{≤t}, e_{≤t})     = N(μ_t, diag σ_t²) from a GRU over (b_t, e_t)    filter (learned)
    ELBO = Σ_t E_q[log p(b_t | z_t)] - KL(q(z_t | ·) || p(z_t | z_{t-1}, e_t)),  z_{t-1} ~ q

In the paper an LLM encodes the events; here e_t is any event embedding (the experiment uses generated
vectors; `--lm` would use SmolLM2 sentence means, not run at this scale). Forecasting: filter up to t,
then roll the prior transition forward with the known upcoming event embeddings and decode.

    model = SWM(n_series=6, d_event=16)
    train_swm(model, beliefs, events, steps=...)       # beliefs [B, T, K], events [B, T, D]
    pred = model.forecast(beliefs[:, :t], events[:, :t + h], h)   # [B, h, K]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from interp.contrib.common.fit import fit, make_optimizer, random_batches
from interp.contrib.common.ridge import ridge as ridge_weights
from interp.contrib.common.ridge import with_bias


@dataclass
class SWMConfig:
    """Sizes of the social world model."""

    n_series: int = 6
    """K, the number of belief series (markets)."""
    d_event: int = 16
    """D, the size of an event embedding (0 vector = no event)."""
    d_latent: int = 8
    """Size of the latent social state z."""
    hidden: int = 64
    """GRU and transition MLP width."""

    def __post_init__(self):
        if min(self.n_series, self.d_event, self.d_latent, self.hidden) <= 0:
            raise ValueError("all SWM sizes must be positive")


class SWM(nn.Module):
    def __init__(self, cfg: SWMConfig):
        super().__init__()
        self.cfg = cfg
        K, D, Z, H = cfg.n_series, cfg.d_event, cfg.d_latent, cfg.hidden
        self.gru = nn.GRU(K + D, H, batch_first=True)
        self.q = nn.Linear(H, 2 * Z)
        self.trans = nn.Sequential(nn.Linear(Z + D, H), nn.Tanh(), nn.Linear(H, Z))
        self.p_logvar = nn.Parameter(torch.full((Z,), -2.0))
        self.emit = nn.Linear(Z, K)
        self.b_logvar = nn.Parameter(torch.full((K,), -4.0))
        self.z0 = nn.Parameter(torch.zeros(Z))

    def _check(self, b: Tensor, e: Tensor) -> None:
        K, D = self.cfg.n_series, self.cfg.d_event
        if (
            b.ndim != 3
            or b.shape[2] != K
            or e.ndim != 3
            or e.shape[2] != D
            or e.shape[:2] != b.shape[:2]
            or b.shape[1] == 0
        ):
            raise ValueError(
                f"beliefs must be [B, T, {K}] and events [B, T, {D}] with the same B, T >= 1; "
                f"got {tuple(b.shape)}, {tuple(e.shape)}"
            )

    def prior_mean(self, z: Tensor, e: Tensor) -> Tensor:
        return z + self.trans(torch.cat([z, e], -1))

    def elbo(self, b: Tensor, e: Tensor) -> Tensor:
        """Mean ELBO per time step and series (one reparameterised sample)."""
        self._check(b, e)
        B, T, K = b.shape
        h, _ = self.gru(torch.cat([b, e], -1))
        mu, logvar = self.q(h).chunk(2, -1)
        z = mu + (0.5 * logvar).exp() * torch.randn_like(mu)
        z_prev = torch.cat([self.z0.expand(B, 1, -1), z[:, :-1]], 1)
        pm = self.prior_mean(z_prev, e)
        pv = self.p_logvar.exp()
        kl = 0.5 * (self.p_logvar - logvar + (logvar.exp() + (mu - pm) ** 2) / pv - 1).sum(-1)
        bv = self.b_logvar.exp()
        ll = -0.5 * (((b - self.emit(z)) ** 2) / bv + self.b_logvar + 1.8378770664093453).sum(-1)
        return (ll - kl).mean() / K

    @torch.no_grad()
    def forecast(self, b_hist: Tensor, e_all: Tensor, horizon: int) -> Tensor:
        """Filter on b_hist [B, t, K] with events e_all[:, :t], then roll the prior mean with
        e_all[:, t:t+horizon]. Returns [B, horizon, K]."""
        t = b_hist.shape[1]
        if horizon < 1 or e_all.shape[1] < t + horizon:
            raise ValueError(
                f"need horizon >= 1 and events for t + horizon = {t + horizon} steps; got {e_all.shape[1]}"
            )
        self._check(b_hist, e_all[:, :t])
        h, _ = self.gru(torch.cat([b_hist, e_all[:, :t]], -1))
        z = self.q(h[:, -1]).chunk(2, -1)[0]
        out = []
        for k in range(horizon):
            z = self.prior_mean(z, e_all[:, t + k])
            out.append(self.emit(z))
        return torch.stack(out, 1)


def train_swm(
    model: SWM, b: Tensor, e: Tensor, steps: int, batch: int = 32, lr: float = 3e-3, seed: int = 0
) -> list[float]:
    """Adam on -ELBO over random minibatches of whole sequences; returns the ELBO trace."""
    if steps <= 0 or batch <= 0:
        raise ValueError("steps and batch must be positive")
    model._check(b, e)
    res = fit(
        make_optimizer(model.parameters(), lr=lr),
        lambda i: -model.elbo(b[i], e[i]),
        random_batches(len(b), min(batch, len(b)), steps, seed),
        record_losses=True,
    )
    return [-loss for loss in res.losses]


def persistence(b_hist: Tensor, horizon: int) -> Tensor:
    return b_hist[:, -1:].expand(-1, horizon, -1)


def fit_ar(b: Tensor, p: int = 3, ridge: float = 1e-3) -> Tensor:
    """Per-series AR(p) on differences, shared across series: Δb_t = Σ a_k Δb_{t-k} (+ c). Returns [p+1]."""
    d = b.diff(dim=1).permute(0, 2, 1).reshape(-1, b.shape[1] - 1)  # [B*K, T-1]
    if d.shape[1] <= p:
        raise ValueError(f"series too short for AR({p})")
    X = d.unfold(1, p, 1)[:, :-1].reshape(-1, p)
    y = d[:, p:].reshape(-1)
    return ridge_weights(with_bias(X), y, ridge)


def ar_forecast(b_hist: Tensor, coef: Tensor, horizon: int) -> Tensor:
    p = len(coef) - 1
    d = b_hist.diff(dim=1)[:, -p:]  # [B, p, K]
    level = b_hist[:, -1]
    out = []
    for _ in range(horizon):
        nxt = (d * coef[:p].view(1, p, 1)).sum(1) + coef[p]
        level = level + nxt
        out.append(level)
        d = torch.cat([d[:, 1:], nxt.unsqueeze(1)], 1)
    return torch.stack(out, 1)
