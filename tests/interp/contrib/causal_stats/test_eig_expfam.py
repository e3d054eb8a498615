import math

import pytest
import torch

from interp.contrib.causal_stats.eig_expfam import (
    BetaBinomial,
    LinearGaussian,
    LogisticNormal,
    PoissonGamma,
    beta_entropy,
    collapsed_eig,
    gamma_entropy,
    nmc_eig,
)
from interp.contrib.causal_stats.experiments.eig_expfam import main, nmc_errors, rmse, tuned_inner


def test_entropies_closed_forms():
    t = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    assert float(gamma_entropy(t(1.0), t(2.0))) == pytest.approx(1 - math.log(2))  # Exp(rate 2)
    assert float(beta_entropy(t(1.0), t(1.0))) == pytest.approx(0.0)  # Uniform(0, 1)
    # scipy-free check of Beta(2, 2): H = ln B(2,2) - 2ψ(2) + 2ψ(4) = ln(1/6) - 2(1 - γ) + 2(11/6 - γ)
    assert float(beta_entropy(t(2.0), t(2.0))) == pytest.approx(math.log(1 / 6) + 2 * (11 / 6 - 1))


def test_beta_binomial_one_trial_by_hand():
    # Uniform prior, one Bernoulli trial: y = 0 or 1 with prob 1/2, posterior Beta(2,1) or Beta(1,2),
    # whose entropy is ln(1/2) + 1/2, so EIG = 0 - (ln(1/2) + 1/2) = ln 2 - 1/2.
    assert BetaBinomial(1.0, 1.0).exact_eig(1) == pytest.approx(math.log(2) - 0.5)


def test_poisson_gamma_exact_matches_brute_force_sum():
    m = PoissonGamma(1.5, 2.0)
    xi = 2.5
    # brute force: EIG = E_{θ,y}[log p(y|θ) - log p(y)], p(y) negative binomial, by quadrature over a fine θ grid
    theta = torch.linspace(1e-4, 15, 60001, dtype=torch.float64)
    prior = (
        torch.distributions.Gamma(torch.tensor(1.5, dtype=torch.float64), torch.tensor(2.0, dtype=torch.float64))
        .log_prob(theta)
        .exp()
    )
    dt = theta[1] - theta[0]
    total = 0.0
    for y in range(60):
        lik = torch.distributions.Poisson(xi * theta).log_prob(torch.tensor(float(y), dtype=torch.float64)).exp()
        py = float((prior * lik).sum() * dt)
        if py > 0:
            total += float((prior * lik * (lik.clamp_min(1e-300).log() - math.log(py))).sum() * dt)
    assert m.exact_eig(xi) == pytest.approx(total, abs=1e-4)


def test_linear_gaussian_collapsed_is_exact():
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    m = LinearGaussian(2, s0=1.0, s=1.0)
    assert m.exact_eig(x) == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(5))
    assert collapsed_eig(m, x, 3, seed=0) == pytest.approx(m.exact_eig(x))


def test_estimators_converge_and_nmc_is_biased_up_for_small_m():
    m = PoissonGamma(2.0, 1.0)
    exact = m.exact_eig(3.0)
    assert collapsed_eig(m, 3.0, 20000, seed=1) == pytest.approx(exact, abs=0.02)
    # with one inner sample NMC's log-marginal is log p(y|θ') for an independent θ': an over-estimate on average
    assert nmc_eig(m, 3.0, 20000, 1, seed=1) > exact + 0.1


def test_bad_input():
    with pytest.raises(ValueError, match="alpha > 0"):
        PoissonGamma(0.0, 1.0)
    with pytest.raises(ValueError, match="positive integer"):
        BetaBinomial(1.0, 1.0).exact_eig(2.5)
    with pytest.raises(ValueError, match="exposure"):
        PoissonGamma(1.0, 1.0).exact_eig(0.0)
    with pytest.raises(ValueError, match="n=0"):
        collapsed_eig(PoissonGamma(1.0, 1.0), 1.0, 0)
    with pytest.raises(ValueError, match="n_outer"):
        nmc_eig(PoissonGamma(1.0, 1.0), 1.0, 10, 0)


def test_quick_experiment_runs():
    out = main(["--quick"])
    assert out["design"]["Poisson-Gamma"]["exact"] == 9.0
    assert {r["model"] for r in out["rmse"]} >= {"Poisson-Gamma", "logistic (non-conjugate)"}


def test_logistic_normal_exact_eig_matches_nested_mc_and_laplace_is_close_but_biased():
    m = LogisticNormal(2.0, 5)
    exact = m.exact_eig(2.0)
    assert 0 < exact < math.log(6)  # at most the entropy of y in {0..5}
    assert nmc_eig(m, 2.0, n_outer=4000, n_inner=400, seed=0) == pytest.approx(exact, abs=0.03)
    # one trial, huge ξ: y = [θ > 0] exactly, so I(θ; y) = ln 2
    assert LogisticNormal(1.0, 1).exact_eig(1e4) == pytest.approx(math.log(2), abs=1e-3)
    # the Laplace entropy makes the collapsed estimate close to the truth, not equal to it
    est = collapsed_eig(m, 2.0, n=20000, seed=0)
    assert abs(est - exact) < 0.2
    with pytest.raises(ValueError):
        m.exact_eig(0.0)
    with pytest.raises(ValueError):
        LogisticNormal(0.0, 5)


def test_tuned_nmc_baseline_prefers_many_inner_samples_where_nested_bias_dominates():
    # Poisson-Gamma at large exposure: M = 1 is biased up by about the whole EIG, so the tuned split takes M >= 8
    # and its RMSE is far below M = 1's; the collapsed estimator is still closer at the same budget
    m = PoissonGamma(2.0, 1.0)
    m_t = tuned_inner(m, 20.0, 1000)
    assert m_t >= 8
    rms = lambda e: math.sqrt(sum(v * v for v in e) / len(e))  # noqa: E731
    assert rms(nmc_errors(m, 20.0, 1000, m_t, range(5))) < 0.7 * rms(nmc_errors(m, 20.0, 1000, 1, range(5)))
    assert tuned_inner(m, 20.0, 3) == 2  # the grid is cut at M + 1 <= budget
    r = rmse(m, 20.0, 1000, 5)
    assert r["collapsed"] < 0.1 * r["nmc_tuned"] and r["closer"] >= 4
