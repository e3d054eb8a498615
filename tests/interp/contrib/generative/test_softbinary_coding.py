import math

import pytest
import torch

from interp.contrib.generative.softbinary_coding import (
    NTC,
    SBC,
    SBCConfig,
    bernoulli_kl_bits,
    ecsq_gaussian,
    index_code_bits,
    pfr_select,
    shannon_distortion,
    train_codec,
)


def test_bernoulli_kl_closed_forms():
    p = torch.tensor([0.5, 0.5, 0.25, 0.5])
    q = torch.tensor([0.5, 1.0, 1.0, 0.0])
    # KL(q||q) = 0; KL(δ1 || Bern(1/2)) = 1 bit; KL(δ1 || Bern(1/4)) = 2 bits; KL(δ0 || Bern(1/2)) = 1 bit
    assert bernoulli_kl_bits(q, p).tolist() == pytest.approx([0.0, 1.0, 2.0, 1.0], abs=1e-6)


def test_shannon_bound_identity():
    assert shannon_distortion(1.0) == pytest.approx(0.25)
    assert shannon_distortion(0.0, variance=3.0) == pytest.approx(3.0)


def test_ecsq_matches_known_values():
    # a huge step is one cell: rate 0, distortion = variance
    r, d = ecsq_gaussian(100.0)
    assert r == pytest.approx(0.0, abs=1e-9) and d == pytest.approx(1.0, abs=1e-9)
    # fine steps: D -> Δ²/12 and the gap to Shannon -> 10 log10(2πe/12) = 1.53 dB
    r, d = ecsq_gaussian(0.1)
    assert d == pytest.approx(0.01 / 12, rel=1e-3)
    assert 10 * math.log10(d / shannon_distortion(r)) == pytest.approx(
        10 * math.log10(2 * math.pi * math.e / 12), abs=0.01
    )


def test_pfr_sample_follows_the_posterior():
    # 2 bits, prior uniform, posterior q(b1=1)=0.9, q(b2=1)=0.2: the selected bits are distributed as q
    B = 4000
    q1 = torch.tensor([0.9, 0.2], dtype=torch.float64).expand(B, 2)
    p1 = torch.full((B, 2), 0.5, dtype=torch.float64)
    logq = torch.stack([torch.log1p(-q1), torch.log(q1)], -1)
    logp = torch.stack([torch.log1p(-p1), torch.log(p1)], -1)
    bits, k = pfr_select(logq, logp, 256, torch.Generator().manual_seed(0))
    assert bits.mean(0).tolist() == pytest.approx([0.9, 0.2], abs=0.03)
    # mean log2 index is close to the KL (here ~0.81 bits) and well below log2 of the candidate count
    kl = float(bernoulli_kl_bits(q1[0], p1[0]).sum())
    assert float(torch.log2(k.double()).mean()) < kl + 1.5


def test_pfr_with_q_equal_p_picks_the_first_candidate():
    logq = torch.log(torch.full((5, 3, 2), 0.5, dtype=torch.float64))
    _, k = pfr_select(logq, logq.clone(), 50, torch.Generator().manual_seed(1))
    assert (k == 1).all()  # equal weights: the earliest arrival wins


def test_elias_delta_lengths():
    assert index_code_bits(torch.tensor([1, 2, 3, 4, 8, 16])).tolist() == [1, 4, 4, 5, 8, 9]


def test_codecs_train_and_evaluate_shapes():
    cfg = SBCConfig(dim=2, n_bits=6, hidden=16)
    for model in (SBC(cfg), NTC(cfg)):
        trace = train_codec(model, lam=0.1, steps=30, batch=64)
        assert len(trace) == 30 and all(math.isfinite(t) for t in trace)
        d, r = model.evaluate(torch.randn(50, 2))
        assert d >= 0 and r >= 0
    d, bits = SBC(cfg).evaluate_channel_sim(torch.randn(20, 2), n_candidates=64)
    assert d >= 0 and bits >= 1 / 2  # at least one bit per block of 2


def test_training_on_given_blocks_fits_that_source():
    # a source far from N(0, 1): every block is near (3, -3); NTC trained on it reconstructs it, one trained on
    # fresh N(0, 1) blocks does not
    g = torch.Generator().manual_seed(0)
    data = torch.tensor([3.0, -3.0]) + 0.01 * torch.randn(500, 2, generator=g)
    cfg = SBCConfig(dim=2, n_bits=6, hidden=16)
    on_data, on_noise = NTC(cfg), NTC(cfg)
    train_codec(on_data, lam=0.01, steps=200, batch=64, data=data)
    train_codec(on_noise, lam=0.01, steps=200, batch=64)
    assert on_data.evaluate(data)[0] < 0.2 * on_noise.evaluate(data)[0]
    with pytest.raises(ValueError, match=r"non-empty \[n, 2\] tensor"):
        train_codec(NTC(cfg), lam=0.1, steps=5, data=torch.zeros(10, 3))


def test_bad_inputs():
    with pytest.raises(ValueError):
        SBCConfig(dim=0)
    with pytest.raises(ValueError, match=r"\[batch, 3\]"):
        SBC(SBCConfig(dim=3, n_bits=4, hidden=8))(torch.randn(5, 2))
    with pytest.raises(ValueError, match="positive"):
        train_codec(NTC(SBCConfig(dim=2, hidden=8)), lam=0.0, steps=5)
    with pytest.raises(ValueError, match="step"):
        ecsq_gaussian(0.0)
    with pytest.raises(ValueError, match=r"\[B, m, 2\]"):
        pfr_select(torch.zeros(2, 3), torch.zeros(2, 3), 4, torch.Generator())
    with pytest.raises(ValueError, match=">= 1"):
        index_code_bits(torch.tensor([0]))
