"""EIG-ExpFam: a collapsed (singly-intractable) expected-information-gain estimator for experiments whose
posterior is in an exponential family, against nested Monte Carlo (NMC).

Paper: collapsing doubly-intractable EIG for exponential-family posteriors (title/arXiv not found; no code).
EIG(ξ) = E_{θ, y | ξ}[log p(θ | y, ξ) - log p(θ)] = H[p(θ)] - E_{y | ξ}[ H[p(θ | y, ξ)] ]. When the
posterior is exponential-family with natural parameters η(ξ, y), its entropy is a closed form of η (the
log-partition A(η) and E_η[T(θ)]), so EIG is a *single* expectation over y ~ p(y | ξ):

    EIG_collapsed = H[prior] - (1/N) Σ_n H[post(y_n)],   θ_n ~ prior, y_n ~ p(y | θ_n, ξ)

unbiased, error O(N^{-1/2}). NMC estimates the marginal likelihood inside the log with M inner prior
samples: (1/N) Σ_n [log p(y_n | θ_n) - log (1/M) Σ_m p(y_n | θ_nm)], biased upward-by-O(1/M) in the
log term, total cost N·M likelihood evaluations.

Models here (conjugate, so the exact EIG is available as a reference by summing over y):
`PoissonGamma` (θ ~ Gamma(α, β) rate, y ~ Poisson(ξ θ), ξ = exposure), `BetaBinomial` (θ ~ Beta(a, b),
y ~ Binomial(ξ, θ), ξ = trials) and `LinearGaussian` (θ ~ N(0, s0² I), y ~ N(X θ, s² I), ξ = X): there the
posterior covariance does not depend on y, the collapsed estimator is exact with zero variance, and
EIG = ½ log det(I + s0²/s² XᵀX) (a degenerate case the paper's analysis covers). One non-conjugate model,
`LogisticNormal` (θ ~ N(0, s0²), y ~ Binomial(k, σ(ξ θ))), takes the exponential-family posterior as the
Laplace (Gaussian) approximation: the collapsed estimator then carries that approximation's bias, which
the experiment measures against a quadrature EIG.

    m = PoissonGamma(2.0, 1.0)
    collapsed_eig(m, xi=3.0, n=1000, seed=0), nmc_eig(m, 3.0, n_outer=100, n_inner=10, seed=0), m.exact_eig(3.0)

Not implemented: the reparameterised EIG gradient and the sequential-design loop (our scope; see README).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.distributions import Beta, Binomial, Gamma, Normal, Poisson


def gamma_entropy(k: Tensor, rate: Tensor) -> Tensor:
    """Entropy of Gamma(shape k, rate): k - log rate + lgamma(k) + (1 - k) ψ(k)."""
    return k - torch.log(rate) + torch.lgamma(k) + (1 - k) * torch.digamma(k)


def beta_entropy(a: Tensor, b: Tensor) -> Tensor:
    """Entropy of Beta(a, b): ln B(a, b) - (a-1)ψ(a) - (b-1)ψ(b) + (a+b-2)ψ(a+b)."""
    lnb = torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)
    return lnb - (a - 1) * torch.digamma(a) - (b - 1) * torch.digamma(b) + (a + b - 2) * torch.digamma(a + b)


class PoissonGamma:
    """θ ~ Gamma(alpha, beta) (rate), y ~ Poisson(ξ θ); posterior Gamma(alpha + y, beta + ξ)."""

    def __init__(self, alpha: float, beta: float):
        if alpha <= 0 or beta <= 0:
            raise ValueError(f"Gamma prior needs alpha > 0 and beta > 0; got {alpha}, {beta}")
        self.alpha, self.beta = torch.tensor(float(alpha), dtype=torch.float64), torch.tensor(float(beta), dtype=torch.float64)

    def _check(self, xi: float) -> None:
        if xi <= 0:
            raise ValueError(f"the exposure ξ={xi} must be positive")

    def prior_entropy(self) -> float:
        return float(gamma_entropy(self.alpha, self.beta))

    def sample_prior(self, n: int, g: torch.Generator) -> Tensor:
        return torch._standard_gamma(self.alpha.expand(n).clone(), generator=g) / self.beta

    def sample_y(self, theta: Tensor, xi: float, g: torch.Generator) -> Tensor:
        return torch.poisson(xi * theta, generator=g)

    def log_lik(self, y: Tensor, theta: Tensor, xi: float) -> Tensor:
        return Poisson(xi * theta).log_prob(y)

    def posterior_entropy(self, y: Tensor, xi: float) -> Tensor:
        return gamma_entropy(self.alpha + y, self.beta + xi)

    def exact_eig(self, xi: float, tol: float = 1e-14) -> float:
        """H[prior] - Σ_y p(y) H[post(y)] with the negative-binomial marginal, summed until the tail < tol."""
        self._check(xi)
        p = float(xi / (self.beta + xi))
        ymax = 50
        while True:
            y = torch.arange(ymax + 1, dtype=torch.float64)
            logp = (torch.lgamma(self.alpha + y) - torch.lgamma(self.alpha) - torch.lgamma(y + 1)
                    + self.alpha * math.log(1 - p) + y * math.log(p))
            if float(logp.exp().sum()) > 1 - tol or ymax > 10**6:
                break
            ymax *= 2
        w = logp.exp()
        return self.prior_entropy() - float((w * self.posterior_entropy(y, xi)).sum() / w.sum())


class BetaBinomial:
    """θ ~ Beta(a, b), y ~ Binomial(ξ, θ) (ξ trials); posterior Beta(a + y, b + ξ - y)."""

    def __init__(self, a: float, b: float):
        if a <= 0 or b <= 0:
            raise ValueError(f"Beta prior needs a > 0 and b > 0; got {a}, {b}")
        self.a, self.b = torch.tensor(float(a), dtype=torch.float64), torch.tensor(float(b), dtype=torch.float64)

    def _check(self, xi) -> None:
        if xi < 1 or int(xi) != xi:
            raise ValueError(f"the number of trials ξ={xi} must be a positive integer")

    def prior_entropy(self) -> float:
        return float(beta_entropy(self.a, self.b))

    def sample_prior(self, n: int, g: torch.Generator) -> Tensor:
        x = torch._standard_gamma(self.a.expand(n).clone(), generator=g)
        z = torch._standard_gamma(self.b.expand(n).clone(), generator=g)
        return x / (x + z)

    def sample_y(self, theta: Tensor, xi: float, g: torch.Generator) -> Tensor:
        return torch.binomial(torch.full_like(theta, float(xi)), theta, generator=g)

    def log_lik(self, y: Tensor, theta: Tensor, xi: float) -> Tensor:
        return Binomial(int(xi), probs=theta.clamp(1e-12, 1 - 1e-12)).log_prob(y)

    def posterior_entropy(self, y: Tensor, xi: float) -> Tensor:
        return beta_entropy(self.a + y, self.b + xi - y)

    def exact_eig(self, xi: int) -> float:
        self._check(xi)
        y = torch.arange(int(xi) + 1, dtype=torch.float64)
        a, b = self.a, self.b
        lnb = lambda u, v: torch.lgamma(u) + torch.lgamma(v) - torch.lgamma(u + v)  # noqa: E731
        logp = torch.lgamma(torch.tensor(xi + 1.0)) - torch.lgamma(y + 1) - torch.lgamma(xi - y + 1) + lnb(a + y, b + xi - y) - lnb(a, b)
        return self.prior_entropy() - float((logp.exp() * self.posterior_entropy(y, xi)).sum())


class LinearGaussian:
    """θ ~ N(0, s0² I_p), y ~ N(X θ, s² I): the posterior covariance (s0⁻² I + XᵀX/s²)⁻¹ ignores y."""

    def __init__(self, p: int, s0: float = 1.0, s: float = 1.0):
        if p < 1 or s0 <= 0 or s <= 0:
            raise ValueError(f"need p >= 1, s0 > 0, s > 0; got {p}, {s0}, {s}")
        self.p, self.s0, self.s = p, s0, s

    def prior_entropy(self) -> float:
        return 0.5 * self.p * math.log(2 * math.pi * math.e * self.s0**2)

    def sample_prior(self, n: int, g: torch.Generator) -> Tensor:
        return self.s0 * torch.randn(n, self.p, generator=g, dtype=torch.float64)

    def sample_y(self, theta: Tensor, xi: Tensor, g: torch.Generator) -> Tensor:
        mean = theta @ xi.double().T
        return mean + self.s * torch.randn(mean.shape, generator=g, dtype=torch.float64)

    def log_lik(self, y: Tensor, theta: Tensor, xi: Tensor) -> Tensor:
        return Normal(theta @ xi.double().T, self.s).log_prob(y).sum(-1)

    def posterior_entropy(self, y: Tensor, xi: Tensor) -> Tensor:
        prec = torch.eye(self.p, dtype=torch.float64) / self.s0**2 + xi.double().T @ xi.double() / self.s**2
        h = 0.5 * (self.p * math.log(2 * math.pi * math.e) - torch.logdet(prec))
        return h.expand(y.shape[0])

    def exact_eig(self, xi: Tensor) -> float:
        m = torch.eye(self.p, dtype=torch.float64) + (self.s0 / self.s) ** 2 * xi.double().T @ xi.double()
        return 0.5 * float(torch.logdet(m))


class LogisticNormal:
    """θ ~ N(0, s0²), y ~ Binomial(k, σ(ξ θ)) (ξ = stimulus strength): the non-conjugate case.

    The posterior is not in an exponential family, so `posterior_entropy` is the entropy of its Laplace
    (Gaussian) approximation: the collapsed estimator then estimates H[prior] - E_y H[Laplace(y)], which is
    biased by the approximation's entropy error, while NMC stays consistent. `exact_eig` integrates θ on a
    fine grid and sums y, so both errors are measured against the truth.
    """

    def __init__(self, s0: float = 2.0, k: int = 5):
        if s0 <= 0 or k < 1:
            raise ValueError(f"need s0 > 0 and k >= 1 trials; got {s0}, {k}")
        self.s0, self.k = float(s0), int(k)

    def _check(self, xi: float) -> None:
        if xi <= 0:
            raise ValueError(f"the stimulus strength ξ={xi} must be positive")

    def prior_entropy(self) -> float:
        return 0.5 * math.log(2 * math.pi * math.e * self.s0**2)

    def sample_prior(self, n: int, g: torch.Generator) -> Tensor:
        return self.s0 * torch.randn(n, generator=g, dtype=torch.float64)

    def sample_y(self, theta: Tensor, xi: float, g: torch.Generator) -> Tensor:
        return torch.binomial(torch.full_like(theta, float(self.k)), torch.sigmoid(xi * theta), generator=g)

    def log_lik(self, y: Tensor, theta: Tensor, xi: float) -> Tensor:
        return Binomial(self.k, logits=xi * theta).log_prob(y)

    def posterior_entropy(self, y: Tensor, xi: float, newton_steps: int = 50) -> Tensor:
        """Entropy ½ log(2πe / h) of the Laplace approximation: Newton to the posterior mode θ*, h the
        negative Hessian of log p(θ | y) there."""
        y = y.double()
        theta = torch.zeros_like(y)
        for _ in range(newton_steps):
            p = torch.sigmoid(xi * theta)
            grad = xi * (y - self.k * p) - theta / self.s0**2
            h = self.k * xi**2 * p * (1 - p) + 1 / self.s0**2
            theta = theta + grad / h
        p = torch.sigmoid(xi * theta)
        h = self.k * xi**2 * p * (1 - p) + 1 / self.s0**2
        return 0.5 * torch.log(2 * math.pi * math.e / h)

    def exact_eig(self, xi: float, nodes: int = 8001) -> float:
        """I(θ; y) = H[y] - E_θ H[y | θ], θ integrated on a uniform grid of `nodes` points over ±12 s0
        (the integrand is smooth, so the grid sum converges far faster than any Monte Carlo estimate)."""
        self._check(xi)
        theta = torch.linspace(-12 * self.s0, 12 * self.s0, nodes, dtype=torch.float64)
        w = torch.exp(-0.5 * (theta / self.s0) ** 2)
        w = w / w.sum()
        y = torch.arange(self.k + 1, dtype=torch.float64)
        lik = self.log_lik(y[:, None], theta[None, :], xi).exp()  # [k+1, nodes]
        marg = (lik * w).sum(1)
        h_y = -(marg * marg.clamp_min(1e-300).log()).sum()
        h_y_theta = -((lik * lik.clamp_min(1e-300).log()).sum(0) * w).sum()
        return float(h_y - h_y_theta)


def collapsed_eig(model, xi, n: int, seed: int = 0) -> float:
    """The collapsed estimator: H[prior] - mean_n H[post(y_n)] over n draws y_n ~ p(y | ξ)."""
    if n < 1:
        raise ValueError(f"n={n} must be at least 1")
    g = torch.Generator().manual_seed(seed)
    y = model.sample_y(model.sample_prior(n, g), xi, g)
    return model.prior_entropy() - float(model.posterior_entropy(y, xi).mean())


def nmc_eig(model, xi, n_outer: int, n_inner: int, seed: int = 0) -> float:
    """Nested Monte Carlo: mean_n [log p(y_n | θ_n) - log mean_m p(y_n | θ_nm)], θ_nm fresh prior draws."""
    if n_outer < 1 or n_inner < 1:
        raise ValueError(f"n_outer and n_inner must be at least 1; got {n_outer}, {n_inner}")
    g = torch.Generator().manual_seed(seed)
    theta = model.sample_prior(n_outer, g)
    y = model.sample_y(theta, xi, g)
    inner = model.sample_prior(n_outer * n_inner, g)
    y_rep = y.repeat_interleave(n_inner, 0)
    ll_inner = model.log_lik(y_rep, inner, xi).reshape(n_outer, n_inner)
    log_marg = torch.logsumexp(ll_inner, 1) - math.log(n_inner)
    return float((model.log_lik(y, theta, xi) - log_marg).mean())
