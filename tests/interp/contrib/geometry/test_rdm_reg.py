import math

import pytest
import torch

from interp.contrib.geometry.rdm_reg import (
    l0_fraction,
    l1_sparsity,
    rdmreg_loss,
    rgg_fit,
    rgg_sigma,
    sample_generalized_normal,
    sample_rgg,
    sliced_w2,
    vicreg_loss,
)


def test_sigma_closed_forms():
    assert rgg_sigma(2.0) == pytest.approx(1.0)            # GN_2 with σ 1 is N(0, 1)
    assert rgg_sigma(1.0) == pytest.approx(1 / math.sqrt(2))  # Laplace with scale 1/sqrt(2) has variance 1


@pytest.mark.parametrize("p", [1.0, 2.0, 0.7])
def test_generalized_normal_has_unit_variance_after_scaling(p):
    x = rgg_sigma(p) * sample_generalized_normal((200_000,), p, torch.Generator().manual_seed(0))
    assert x.var().item() == pytest.approx(1.0, rel=0.03)
    assert x.mean().item() == pytest.approx(0.0, abs=0.02)


def test_rgg_zero_fraction_closed_form():
    # P(ReLU(μ + σ L) = 0) for a unit-variance Laplace L: μ = 0 -> 1/2; μ = -1 -> 1 - exp(-sqrt(2))/2
    g = torch.Generator().manual_seed(1)
    assert 1 - l0_fraction(sample_rgg((400, 250), 1.0, 0.0, g)) == pytest.approx(0.5, abs=0.01)
    assert 1 - l0_fraction(sample_rgg((400, 250), 1.0, -1.0, g)) == pytest.approx(1 - math.exp(-math.sqrt(2)) / 2, abs=0.01)


def test_sliced_w2_exact_cases():
    a = torch.randn(50, 3, generator=torch.Generator().manual_seed(0))
    assert sliced_w2(a, a[torch.randperm(50)]).item() == pytest.approx(0.0, abs=1e-10)  # same sample, any order
    # a shift by c along every axis: each projection shifts by <c, θ>; E<c, θ>² = |c|² / d
    c = torch.tensor([1.0, 2.0, 2.0])
    assert sliced_w2(a, a + c, n_proj=20000, generator=torch.Generator().manual_seed(1)).item() == pytest.approx(9 / 3, rel=0.05)
    # one dimension: sliced W2 is the sorted-sample W2
    x, y = torch.tensor([[0.0], [2.0]]), torch.tensor([[3.0], [1.0]])
    assert sliced_w2(x, y, n_proj=3).item() == pytest.approx(1.0)


def test_rdmreg_prefers_rgg_samples_and_sparsity_metrics():
    g = torch.Generator().manual_seed(2)
    rgg = sample_rgg((512, 16), 1.0, -0.5, g)
    gauss = torch.randn(512, 16, generator=g)
    assert rdmreg_loss(rgg, 1.0, -0.5, generator=g) < rdmreg_loss(gauss, 1.0, -0.5, generator=g)
    assert l1_sparsity(torch.tensor([[1.0, 1.0, 1.0, 1.0]])) == pytest.approx(1.0)
    assert l1_sparsity(torch.tensor([[3.0, 0.0, 0.0, 0.0]])) == pytest.approx(0.25)
    fit = rgg_fit(sample_rgg((2000, 8), 1.0, -1.0, g))
    assert fit["mu"] == -1.0 and fit["distance"] < fit["gaussian_distance"]


def test_vicreg_terms():
    z = torch.randn(64, 4, generator=torch.Generator().manual_seed(3)) * 3
    assert vicreg_loss(z, z, mu=0.0, nu=0.0).item() == 0.0
    assert vicreg_loss(torch.zeros(8, 2), torch.zeros(8, 2), lam=0, mu=1.0, nu=0).item() == pytest.approx(2 * (1 - 0.01))


def test_bad_input():
    with pytest.raises(ValueError, match="p=0"):
        rgg_sigma(0)
    with pytest.raises(ValueError, match="same shape"):
        sliced_w2(torch.zeros(3, 2), torch.zeros(4, 2))
    with pytest.raises(ValueError, match="n_proj"):
        sliced_w2(torch.zeros(3, 2), torch.zeros(3, 2), n_proj=0)
    with pytest.raises(ValueError, match="activations"):
        rgg_fit(torch.zeros(1, 3))


def test_rgg_nonzero_fraction_matches_samples_and_the_laplace_formula():
    from interp.contrib.geometry.rdm_reg import rgg_nonzero_fraction

    g = torch.Generator().manual_seed(2)
    assert rgg_nonzero_fraction(-1.0) == pytest.approx(math.exp(-math.sqrt(2)) / 2, rel=1e-9)
    assert rgg_nonzero_fraction(0.0) == pytest.approx(0.5)
    for p, mu in ((1.0, 0.5), (2.0, -0.5), (0.5, -1.0)):
        assert l0_fraction(sample_rgg((400, 250), p, mu, g)) == pytest.approx(rgg_nonzero_fraction(mu, p), abs=0.01)
    with pytest.raises(ValueError):
        rgg_nonzero_fraction(0.0, p=0.0)
