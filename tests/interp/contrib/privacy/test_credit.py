import math

import numpy as np
import pytest

from interp.contrib.privacy.credit import (
    certified_threshold,
    credit_score,
    defend,
    ksg_mi,
    utility_entropy,
    watermark_direction,
)


def test_watermark_direction_by_hand_and_equal_logit_shift():
    d = watermark_direction(np.eye(2), eps=1e-9)
    assert d == pytest.approx(np.array([1.0, 1.0]) / math.sqrt(2))
    w = np.random.default_rng(0).standard_normal((5, 12))
    shift = w @ watermark_direction(w, eps=1e-9)
    assert shift == pytest.approx(np.full(5, shift[0]), rel=1e-6)  # every logit moves by the same amount


def test_utility_entropy_closed_form():
    assert utility_entropy(1.0, np.array([1.0, 3.0])) == pytest.approx(0.5 * (math.log(2) + math.log(4 / 3)))
    assert utility_entropy(0.0, np.array([2.0])) == 0.0


def test_ksg_matches_the_gaussian_closed_form():
    rng = np.random.default_rng(1)
    for rho in (0.0, 0.8):
        x = rng.standard_normal(600)
        y = rho * x + math.sqrt(1 - rho**2) * rng.standard_normal(600)
        assert ksg_mi(x, y, repo_variant=False) == pytest.approx(-0.5 * math.log(1 - rho**2), abs=0.1)
        assert ksg_mi(x, y) == pytest.approx(ksg_mi(x, y, repo_variant=False) - 1 / 5)


def test_credit_score_separates_copies_from_independent_embeddings():
    rng = np.random.default_rng(2)
    owner = rng.standard_normal((300, 4))
    copy = owner @ rng.standard_normal((4, 4)) + 0.3 * rng.standard_normal((300, 4))
    other = rng.standard_normal((300, 4))
    s_copy, s_other = credit_score(owner, copy, rng=rng), credit_score(owner, other, rng=rng)
    assert s_copy > 0.5 and s_other < 0.1 and s_other >= 0


def test_defend_adds_the_scaled_direction_on_average():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 6))
    z = np.zeros((20000, 6))
    zp = defend(z, w, 0.5, rng)
    assert zp.mean(0) == pytest.approx(0.5 * watermark_direction(w), abs=0.02)
    assert zp.std(0) == pytest.approx(np.full(6, 0.5), abs=0.02)


def test_threshold_grows_with_queries():
    owner = np.random.default_rng(4).standard_normal((50, 3))
    t1, t2 = certified_threshold(owner, 0.5, 10), certified_threshold(owner, 0.5, 10_000)
    assert 0 < t1 < t2


def test_bad_input():
    with pytest.raises(ValueError, match="classes, d"):
        watermark_direction(np.ones(3))
    with pytest.raises(ValueError, match="sigma"):
        defend(np.zeros((2, 3)), np.ones((2, 3)), -1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"\[n, 3\]"):
        defend(np.zeros((2, 4)), np.ones((2, 3)), 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="same n"):
        ksg_mi(np.zeros((5, 2)), np.zeros((6, 2)))
    with pytest.raises(ValueError, match="k <"):
        ksg_mi(np.zeros((5, 2)), np.zeros((5, 2)), k=5)
    with pytest.raises(ValueError, match="positive"):
        utility_entropy(1.0, np.array([0.0]))
    with pytest.raises(ValueError, match="temperature"):
        credit_score(np.zeros((9, 1)), np.zeros((9, 1)), temperature=0.0)
