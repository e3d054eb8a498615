"""BayesAttn: attention as exact Bayes over latent symbols, and the QK metric vs Fisher information.

Paper: *Attention Implements the Fisher Geometry of Exponential Families* (ICML 2026 poster 64496; no
arXiv id or code found). This follows the paper's abstract-level description.

Setting: K latent symbols with mean parameters mu_k and an exponential family p(x | eta) = h(x) exp(<eta,
T(x)> - A(eta)). After n observations the log posterior of symbol k is

    log pi_k + <eta(mu_k), sum_i T(x_i)> - n A(eta(mu_k)) + const

which is one softmax head: query q = [sum T(x), n, 1], key k_k = [eta_k, -A_k, log pi_k], W_QK = I;
values mu_k give the posterior mean (`bayes_head`). By convex duality the same logit is
-n D_{A*}(xbar, mu_k) (+ terms in x only): a soft nearest neighbour in mean space under the Bregman
divergence of the dual potential A*. A head that compares xbar and mu_k through one shared quadratic
metric M (logit -n/2 (xbar - mu)^T M (xbar - mu), i.e. W_Q W_K^T = M plus a key norm bias) is exact iff
A* is quadratic: the Gaussian, with M = Sigma^{-1} = the Fisher information. For Bernoulli or Poisson the
curvature of A* (Fisher information diag 1/(mu(1-mu)), diag 1/mu) varies over mean space and one metric
cannot match it; several heads with different metrics (a "curvature atlas") can get closer.

- `FAMILIES`: Gaussian (known covariance), Bernoulli and Poisson (independent coordinates);
- `make_task`: in-context estimation sequences with fresh candidate symbols per sequence;
- `bayes_head`: the closed-form head (exact posterior and posterior mean);
- `MetricHeads`: learnable 1..H mean-space heads (`metric(h)` = the head's W_Q W_K^T);
- `fisher_alignment`: Frobenius cosine and scale between a QK metric and a Fisher information;
- `qk_metrics` / `qk_precision_alignment`: the same diagnostic for a real model's attention heads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp.contrib.common.fit import fit, make_optimizer

FAMILIES = ("gaussian", "bernoulli", "poisson")


def _check_family(family: str) -> None:
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}; got {family!r}")


@dataclass
class Family:
    """An exponential family in mean parameters, coordinates independent except the Gaussian covariance."""

    name: str
    cov: Tensor | None = None  # Gaussian only: [d, d]

    def __post_init__(self) -> None:
        _check_family(self.name)
        if self.name == "gaussian":
            if self.cov is None or self.cov.ndim != 2 or self.cov.shape[0] != self.cov.shape[1]:
                raise ValueError("the gaussian family needs a square covariance matrix `cov`")
            self.precision = torch.linalg.inv(self.cov.double())

    def natural(self, mu: Tensor) -> Tensor:
        if self.name == "gaussian":
            return mu.double() @ self.precision
        if self.name == "bernoulli":
            return torch.logit(mu.double())
        return mu.double().log()

    def log_partition(self, mu: Tensor) -> Tensor:
        """A(eta(mu)), summed over coordinates: [...]."""
        mu = mu.double()
        if self.name == "gaussian":
            return 0.5 * ((mu @ self.precision) * mu).sum(-1)
        if self.name == "bernoulli":
            return -torch.log1p(-mu).sum(-1)
        return mu.sum(-1)

    def fisher(self, mu: Tensor) -> Tensor:
        """Fisher information in mean coordinates at mu [d]: [d, d] (the Hessian of the dual potential A*)."""
        mu = mu.double()
        if self.name == "gaussian":
            return self.precision
        if self.name == "bernoulli":
            return torch.diag(1 / (mu * (1 - mu)))
        return torch.diag(1 / mu)

    def sample(self, mu: Tensor, n: int, generator: torch.Generator) -> Tensor:
        """n i.i.d. observations for each row of mu [B, d]: [B, n, d]."""
        b, d = mu.shape
        mu = mu.double()
        if self.name == "gaussian":
            chol = torch.linalg.cholesky(self.cov.double())
            return mu[:, None] + torch.randn(b, n, d, generator=generator, dtype=torch.float64) @ chol.T
        if self.name == "bernoulli":
            return torch.bernoulli(mu[:, None].expand(b, n, d), generator=generator)
        return torch.poisson(mu[:, None].expand(b, n, d).contiguous(), generator=generator)

    def log_likelihood(self, x: Tensor, mu: Tensor) -> Tensor:
        """Exact sum_i log p(x_i | mu_k) (with base measure) via torch.distributions: x [B, n, d], mu [B, K, d] -> [B,
        K]."""
        x, mu = x.double()[:, None], mu.double()[:, :, None]
        if self.name == "gaussian":
            dist = torch.distributions.MultivariateNormal(mu, covariance_matrix=self.cov.double())
            return dist.log_prob(x).sum(-1)
        if self.name == "bernoulli":
            return torch.distributions.Bernoulli(probs=mu).log_prob(x).sum((-1, -2))
        return torch.distributions.Poisson(mu).log_prob(x).sum((-1, -2))


def bayes_head(fam: Family, x: Tensor, mus: Tensor, log_prior: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Closed-form Bayes head. x [B, n, d] observations, mus [B, K, d] candidate means.

    Returns (posterior [B, K], posterior mean [B, d]). Logits = q . k with q = [sum_i x_i, n, 1] and
    k = [eta_k, -A_k, log pi_k]: a single dot-product head with W_Q W_K^T = identity.
    """
    if x.ndim != 3 or mus.ndim != 3 or x.shape[0] != mus.shape[0] or x.shape[2] != mus.shape[2]:
        raise ValueError(f"x must be [B, n, d] and mus [B, K, d]; got {tuple(x.shape)} and {tuple(mus.shape)}")
    b, n, _ = x.shape
    k = mus.shape[1]
    lp = torch.full((k,), -math.log(k), dtype=torch.float64) if log_prior is None else log_prior.double()
    q = torch.cat(
        [x.double().sum(1), torch.full((b, 1), float(n), dtype=torch.float64), torch.ones(b, 1, dtype=torch.float64)], 1
    )
    keys = torch.cat([fam.natural(mus), -fam.log_partition(mus)[..., None], lp.expand(b, k)[..., None]], -1)
    post = torch.einsum("bj,bkj->bk", q, keys).softmax(-1)
    return post, torch.einsum("bk,bkd->bd", post, mus.double())


def default_family(name: str, d: int = 4, seed: int = 0) -> Family:
    """The families used in the demo; the Gaussian gets a random covariance with condition number ~10."""
    _check_family(name)
    if name != "gaussian":
        return Family(name)
    g = torch.Generator().manual_seed(seed)
    q = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]
    cov = q @ torch.diag(torch.logspace(0, 1, d, dtype=torch.float64)) @ q.T
    return Family(name, cov)


def make_task(
    fam: Family, n_symbols: int, n_obs: int, batch: int, d: int, generator: torch.Generator
) -> dict[str, Tensor]:
    """In-context estimation: per sequence, fresh candidates mu_1..mu_K, a uniform symbol, n_obs draws.

    Candidate priors: Gaussian N(0, 4 I); Bernoulli U(0.05, 0.95); Poisson U(0.5, 8).
    Returns x [B, n, d], mus [B, K, d], k [B], and the exact posterior mean target [B, d].
    """
    if n_symbols < 2 or n_obs < 1 or batch < 1 or d < 1:
        raise ValueError("need n_symbols >= 2, n_obs >= 1, batch >= 1, d >= 1")
    shape = (batch, n_symbols, d)
    if fam.name == "gaussian":
        mus = 2.0 * torch.randn(*shape, generator=generator, dtype=torch.float64)
    elif fam.name == "bernoulli":
        mus = 0.05 + 0.9 * torch.rand(*shape, generator=generator, dtype=torch.float64)
    else:
        mus = 0.5 + 7.5 * torch.rand(*shape, generator=generator, dtype=torch.float64)
    k = torch.randint(0, n_symbols, (batch,), generator=generator)
    x = fam.sample(mus[torch.arange(batch), k], n_obs, generator)
    _, target = bayes_head(fam, x, mus)
    return {"x": x, "mus": mus, "k": k, "target": target}


class MetricHeads(nn.Module):
    """H mean-space attention heads over the candidate symbols, each with its own QK metric.

    Head h: logit_k = -(n / 2) ||W_h (xbar - mu_k)||^2 (= n xbar^T M_h mu_k - n/2 mu_k^T M_h mu_k + const,
    a dot-product head with W_Q W_K^T = M_h = W_h^T W_h plus a key norm bias), value mu_k. The output is
    sum_h A_h head_h (the output projection, initialised to I / H).
    """

    def __init__(self, d: int, n_heads: int = 1, seed: int = 0):
        super().__init__()
        if n_heads < 1:
            raise ValueError(f"n_heads must be >= 1; got {n_heads}")
        g = torch.Generator().manual_seed(seed)
        self.W = nn.Parameter(torch.eye(d).repeat(n_heads, 1, 1) + 0.3 * torch.randn(n_heads, d, d, generator=g))
        self.out = nn.Parameter(torch.eye(d).repeat(n_heads, 1, 1) / n_heads)

    def metric(self, h: int = 0) -> Tensor:
        return (self.W[h].T @ self.W[h]).detach()

    def forward(self, x: Tensor, mus: Tensor) -> Tensor:
        n = x.shape[1]
        xbar = x.float().mean(1)
        diff = xbar[:, None] - mus.float()  # [B, K, d]
        proj = torch.einsum("hed,bkd->bhke", self.W, diff)
        attn = (-0.5 * n * proj.pow(2).sum(-1)).softmax(-1)  # [B, H, K]
        heads = torch.einsum("bhk,bkd->bhd", attn, mus.float())
        return torch.einsum("hed,bhd->be", self.out, heads)


def train_heads(
    fam: Family,
    n_heads: int,
    d: int = 4,
    n_symbols: int = 8,
    n_range: tuple[int, int] = (4, 64),
    steps: int = 1500,
    batch: int = 256,
    lr: float = 3e-2,
    seed: int = 0,
) -> MetricHeads:
    """Fit MetricHeads by MSE to the exact posterior mean, with n drawn from n_range per batch."""
    g = torch.Generator().manual_seed(seed)
    model = MetricHeads(d, n_heads, seed)

    def loss_fn(_) -> Tensor:
        n = int(torch.randint(n_range[0], n_range[1] + 1, (1,), generator=g))
        t = make_task(fam, n_symbols, n, batch, d, g)
        return F.mse_loss(model(t["x"], t["mus"]), t["target"].float())

    fit(make_optimizer(model.parameters(), lr=lr), loss_fn, range(steps), schedule="cosine", total_steps=steps)
    return model


def fisher_alignment(metric: Tensor, fisher: Tensor) -> dict[str, float]:
    """Frobenius cosine between sym(metric) and fisher, and the least-squares scale c in metric ~ c fisher."""
    if metric.shape != fisher.shape or metric.ndim != 2:
        raise ValueError(
            f"metric and fisher must be square and the same shape; got {tuple(metric.shape)} and {tuple(fisher.shape)}"
        )
    m = (metric.double() + metric.double().T) / 2
    f = fisher.double()
    return {
        "cosine": float((m * f).sum() / (m.norm() * f.norm()).clamp_min(1e-300)),
        "scale": float((m * f).sum() / f.pow(2).sum().clamp_min(1e-300)),
    }


# ---------------------------------------------------------------- real models


def qk_metrics(model, layer: int) -> Tensor:
    """Pre-rotary QK metrics of one layer's heads in the normalised-input space: [n_heads, d_model, d_model].

    M_h = diag(g) W_Q^h^T W_K^{kv(h)} diag(g), g the pre-attention RMSNorm weight (llama-style models:
    `hf_model.model.layers[l].self_attn.{q,k}_proj`). scores(i, j) = u_i^T M_h u_j / sqrt(d_head) at
    relative rotation 0, u the RMS-normalised residual.
    """
    try:
        blk = model.hf_model.model.layers[layer]
        wq, wk = blk.self_attn.q_proj.weight.detach().double(), blk.self_attn.k_proj.weight.detach().double()
        g = blk.input_layernorm.weight.detach().double()
    except AttributeError as e:
        raise ValueError(
            f"qk_metrics reads llama-style attention (q_proj/k_proj/input_layernorm); {type(model.hf_model).__name__} "
            f"has none: {e}"
        ) from None
    if not 0 <= layer < model.n_layers:
        raise ValueError(f"layer must be in 0..{model.n_layers - 1}; got {layer}")
    if getattr(blk.self_attn, "q_norm", None) is not None:
        raise ValueError(
            "this model normalises q and k per head (q_norm/k_norm), so its scores are not a bilinear form of the "
            "residual; qk_metrics does not apply"
        )
    nh, nkv, dh = model.n_heads, model.n_kv_heads, model.d_head
    q = wq.reshape(nh, dh, -1) * g
    k = wk.reshape(nkv, dh, -1) * g
    k = k.repeat_interleave(nh // nkv, 0)
    return torch.einsum("hei,hej->hij", q, k)


def qk_precision_alignment(
    metrics: Tensor, inputs: Tensor, ridge: float = 1e-3, n_random: int = 20, seed: int = 0
) -> dict:
    """Cosine of each head's symmetric QK metric with the precision of the cached head inputs (a Gaussian
    Fisher information), against the same metric randomly rotated (same spectrum, random orientation)."""
    if inputs.ndim != 2 or inputs.shape[1] != metrics.shape[-1]:
        raise ValueError(f"inputs must be [rows, d_model={metrics.shape[-1]}]; got {tuple(inputs.shape)}")
    x = inputs.double()
    cov = torch.cov(x.T)
    prec = torch.linalg.inv(cov + ridge * cov.diagonal().mean() * torch.eye(cov.shape[0], dtype=torch.float64))
    g = torch.Generator().manual_seed(seed)
    d = metrics.shape[-1]
    real, rand = [], []
    for m in metrics:
        real.append(fisher_alignment(m, prec)["cosine"])
        for _ in range(n_random // len(metrics) + 1):
            r = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]
            rand.append(fisher_alignment(r @ m @ r.T, prec)["cosine"])
    return {
        "head_cosine": real,
        "random_rotation_cosine_mean": float(torch.tensor(rand).mean()),
        "random_rotation_cosine_std": float(torch.tensor(rand).std()),
    }
