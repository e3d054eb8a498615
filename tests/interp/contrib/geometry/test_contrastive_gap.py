import math

import pytest
import torch

from interp.contrib.geometry.contrastive_gap import (
    centroid_gap,
    infonce_energy,
    kde_symmetric_kl,
    mmd,
    modality_separability,
    retrieval_top1,
    symmetric_infonce_loss,
    uniformity,
)


def _cloud(n=200, d=8, shift=0.0, seed=0):
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed))
    x[:, 0] += shift
    return x


def test_centroid_gap_exact():
    x = _cloud(shift=3.0)
    assert centroid_gap(x, x)["geodesic"] == pytest.approx(0.0, abs=1e-6)
    assert centroid_gap(x, -x)["geodesic"] == pytest.approx(math.pi, abs=1e-6)


def test_uniformity_of_antipodal_pair():
    assert uniformity(torch.tensor([[1.0, 0.0], [-1.0, 0.0]])) == pytest.approx(-8.0)


def test_energy_terms_sum_to_the_training_loss():
    x, y = _cloud(seed=0), _cloud(seed=1)
    e = infonce_energy(x, y, tau=0.2)
    assert e["infonce"] == pytest.approx(float(symmetric_infonce_loss(x, y, 0.2)), rel=1e-5)
    assert retrieval_top1(x, x) == 1.0


def test_divergences_separate_shifted_marginals():
    a, b = _cloud(seed=0), _cloud(seed=1)
    far = _cloud(seed=2, shift=4.0)
    assert kde_symmetric_kl(a, far) > 5 * abs(kde_symmetric_kl(a, b))
    assert mmd(a, far) > 10 * abs(mmd(a, b))
    assert modality_separability(a, far) > 0.95
    assert modality_separability(a, b) < 0.7


def test_bad_inputs():
    with pytest.raises(ValueError, match="same space"):
        centroid_gap(torch.randn(4, 3), torch.randn(4, 2))
    with pytest.raises(ValueError, match="all-zero"):
        centroid_gap(torch.zeros(4, 3), torch.randn(4, 3))
    with pytest.raises(ValueError, match="paired"):
        retrieval_top1(torch.randn(4, 3), torch.randn(5, 3))
    with pytest.raises(ValueError, match="tau"):
        infonce_energy(torch.randn(4, 3), torch.randn(4, 3), tau=0)


def test_paired_partners_do_not_bias_the_divergences():
    x = _cloud(seed=0)
    y = x + 0.01 * _cloud(seed=1)  # perfectly aligned pairs, same marginal
    assert abs(kde_symmetric_kl(x, y)) < 0.2
    assert kde_symmetric_kl(x, y, paired=False) < -1.0  # the bias the paired estimator removes
    assert abs(mmd(x, y)) < 0.01
