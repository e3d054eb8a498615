import math

import pytest
import torch

from interp.contrib.mechanisms.pace_attention import (
    PACEViT,
    SubspaceAttention,
    coding_rate,
    coding_rate_gradient,
    head_overlap,
    rate_reduction,
)


def test_coding_rate_closed_forms():
    # Z with orthonormal-ish rows: n = 2 tokens e1, e2 in d = 2, ε = 1: R = ½ logdet(I + (2/2) I) = log 2
    z = torch.eye(2)
    assert coding_rate(z, eps=1.0) == pytest.approx(math.log(2))
    # two groups of one token each: R_c = Σ (1/2) ½ log(1 + 2) per group = ½ log 3; ΔR = log 2 - ½ log 3
    r = rate_reduction(z, torch.tensor([0, 1]), eps=1.0)
    assert r["Rc"] == pytest.approx(0.5 * math.log(3))
    assert r["dR"] == pytest.approx(math.log(2) - 0.5 * math.log(3))
    # identical tokens in one class: nothing to reduce
    assert rate_reduction(torch.ones(4, 3), torch.zeros(4, dtype=torch.long))["dR"] == pytest.approx(0.0, abs=1e-12)


def test_coding_rate_gradient_matches_autograd_and_sketch_is_unbiased():
    torch.manual_seed(0)
    z = torch.randn(1, 6, 3, dtype=torch.float64, requires_grad=True)
    n, d, eps = 6, 3, 0.5
    r = 0.5 * torch.logdet(torch.eye(3, dtype=torch.float64) + d / (n * eps**2) * z[0].T @ z[0])
    (auto,) = torch.autograd.grad(r, z)
    assert torch.allclose(coding_rate_gradient(z.detach(), eps), auto, atol=1e-10)
    g = torch.Generator().manual_seed(1)
    zz = torch.randn(1, 400, 3, dtype=torch.float64, generator=g)
    exact = coding_rate_gradient(zz, eps)
    sketched = coding_rate_gradient(zz, eps, sketch=200, generator=g)
    assert (sketched - exact).norm() / exact.norm() < 0.3


def test_mssa_matches_a_per_head_loop():
    torch.manual_seed(0)
    att = SubspaceAttention(8, 2)
    z = torch.randn(2, 5, 8)
    out = att(z)
    ref = torch.zeros_like(z)
    for h in range(2):
        p = z @ att.u[h]
        a = torch.softmax(p @ p.transpose(1, 2) / 4**0.5, -1)
        ref += (a @ p) @ att.u[h].T / 2
    assert torch.allclose(out, ref, atol=1e-6)


def test_vit_shapes_and_head_overlap():
    for kind in ("softmax", "mssa", "pace"):
        m = PACEViT(kind, patch=2, image=8, d=16, depth=2, heads=2, n_classes=3)
        logits, states = m(torch.rand(4, 1, 8, 8), return_states=True)
        assert logits.shape == (4, 3) and len(states) == 3 and states[0].shape == (4, 17, 16)
        assert m.attn[0].last_attn.shape == (4, 2, 17, 17)
    same = torch.rand(1, 1, 3, 3).expand(2, 2, 3, 3)
    assert head_overlap(same) == pytest.approx(1.0)


def test_bad_input():
    with pytest.raises(ValueError, match="eps"):
        coding_rate(torch.ones(2, 2), eps=0)
    with pytest.raises(ValueError, match="labels"):
        rate_reduction(torch.ones(3, 2), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="attention"):
        PACEViT("linear", 2, 8, 16, 1, 2, 3)
    with pytest.raises(ValueError, match="divisible"):
        SubspaceAttention(10, 3)
    with pytest.raises(ValueError, match="two heads"):
        head_overlap(torch.rand(1, 1, 2, 2))
