import pytest
import torch
from torch import nn

from interp.contrib.faithfulness.attribution_robustness import (
    KernelAttention,
    cosine,
    input_hessian_norm,
    random_robustness,
    saliency,
    spearman,
    topk_attack,
    topk_intersection,
)


def test_topk_intersection_exact():
    a = torch.tensor([[5.0, -4.0, 3.0, 0.1, 0.2]])
    b = torch.tensor([[0.0, 9.0, 8.0, 7.0, 0.0]])
    assert topk_intersection(a, b, 3).item() == pytest.approx(2 / 3)  # {0,1,2} vs {1,2,3}
    assert topk_intersection(a, a, 2).item() == 1.0
    assert topk_intersection(a, b, 1, absolute=False).item() == 0.0


def test_spearman_and_cosine_exact():
    a = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    assert spearman(a, a**3).item() == pytest.approx(1.0)
    assert spearman(a, -a).item() == pytest.approx(-1.0)
    # with ties: ranks of [1,1,2] are [0.5,0.5,2]; of [1,2,3] are [0,1,2]; Pearson of these = 0.8660
    assert spearman(torch.tensor([[1.0, 1.0, 2.0]]), torch.tensor([[1.0, 2.0, 3.0]])).item() == pytest.approx(
        0.8660254, abs=1e-6
    )
    assert cosine(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 1.0]])).item() == pytest.approx(2**-0.5)


def test_saliency_and_hessian_on_quadratic():
    a = torch.tensor([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0]])  # logits = (x·a0, 0)

    def f(x):
        return x @ a.T

    x = torch.tensor([[1.0, -1.0, 2.0]])
    torch.testing.assert_close(saliency(f, x, torch.tensor([0])), a[:1])
    # CE Hessian of a linear model: p(1-p) (a0-a1)(a0-a1)^T; Frobenius norm = p(1-p) ||a0-a1||²
    p = torch.softmax(f(x), -1)[0, 0]
    est = input_hessian_norm(f, x, torch.tensor([0]), n_probes=4000)
    assert est == pytest.approx(float(p * (1 - p) * 5), rel=0.05)


def test_robustness_metrics_of_linear_model_are_perfect():
    torch.manual_seed(0)
    lin = nn.Linear(6, 3)
    x = torch.randn(4, 6)
    r = random_robustness(lin, x, eps=0.1, k=2, n_samples=3)
    assert r["topk"] == 1.0 and r["cosine"] == pytest.approx(1.0)


def test_attack_stays_in_ball_and_keeps_label():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(10, 16), nn.Softplus(beta=5), nn.Linear(16, 3))
    x = torch.randn(6, 10)
    x_adv, m = topk_attack(net, x, eps=0.2, k=3, steps=5)
    assert (x_adv - x).abs().max() <= 0.2 + 1e-6
    assert torch.equal(net(x_adv).argmax(-1), net(x).argmax(-1))
    assert 0.0 <= m["topk"] <= 1.0


def test_kernel_attention_pattern():
    torch.manual_seed(0)
    att = KernelAttention(8, n_heads=2)
    y = att(torch.randn(3, 5, 8))
    assert y.shape == (3, 5, 8)
    torch.testing.assert_close(att.last_pattern.sum(-1), torch.ones(3, 2, 5))
    q = torch.tensor([[[[0.0, 1.0]]]])
    k = torch.tensor([[[[0.0, 0.0], [1.0, -1.0]]]])
    # phi = elu+1: phi(q)=(1,2); phi(k0)=(1,1), phi(k1)=(2, e^-1); scores 3 and 2+2/e
    s = torch.tensor([3.0, 2 + 2 * torch.e**-1])
    torch.testing.assert_close(att.pattern(q, k)[0, 0, 0], s / s.sum())


def test_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        topk_intersection(torch.zeros(1, 3), torch.zeros(1, 4), 1)
    with pytest.raises(ValueError, match="k=5"):
        topk_intersection(torch.zeros(1, 3), torch.zeros(1, 3), 5)
    with pytest.raises(ValueError, match="eps"):
        random_robustness(nn.Linear(2, 2), torch.zeros(1, 2), eps=0, k=1)
    with pytest.raises(ValueError, match="divisible"):
        KernelAttention(6, n_heads=4)
