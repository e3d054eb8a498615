import math

import pytest
import torch

from interp.contrib.common.ranks import auroc
from interp.contrib.uncertainty_ood.gem import (
    GEMHead,
    GEMOutput,
    brier,
    edl_loss,
    fisher_allocation_penalty,
    gem_loss,
)


def test_edl_loss_closed_form():
    # alpha = (2, 1), y = 0: nll = ψ(3) - ψ(2) = 1/2; misleading evidence is zero so KL(Dir(1,1)||Dir(1,1)) = 0
    alpha = torch.tensor([[2.0, 1.0]], dtype=torch.float64)
    assert edl_loss(alpha, torch.tensor([0]), kl_weight=1.0).item() == pytest.approx(0.5)
    # y = 1: nll = ψ(3) - ψ(1) = 1 + 1/2; α̃ = (2, 1): KL(Dir(2,1) || Dir(1,1)) = log 2 - 1/2
    assert edl_loss(alpha, torch.tensor([1]), kl_weight=1.0).item() == pytest.approx(1.5 + math.log(2) - 0.5)


def test_mixture_output_and_vacuity():
    alpha = torch.tensor([[[3.0, 1.0], [1.0, 1.0]]])  # head 0: S=4, head 1: S=2 (no evidence)
    out = GEMOutput(alpha, torch.tensor([[0.5, 0.5]]), None)
    assert out.prob()[0].tolist() == pytest.approx([0.5 * 0.75 + 0.5 * 0.5, 0.5 * 0.25 + 0.5 * 0.5])
    assert out.strength().item() == pytest.approx(3.0)
    assert out.vacuity().item() == pytest.approx(2 / 3)


def test_fisher_penalty_and_brier_and_auroc():
    assert fisher_allocation_penalty(torch.tensor([[1.0, 0.0], [1.0, 0.0]])).item() == pytest.approx(1.0)
    assert fisher_allocation_penalty(torch.tensor([[1.0, 0.0], [0.0, 1.0]])).item() == pytest.approx(0.5)
    assert brier(torch.tensor([[0.5, 0.5]]), torch.tensor([0])) == pytest.approx(0.5)
    assert auroc(torch.tensor([3.0, 4.0]), torch.tensor([1.0, 2.0])) == 1.0
    assert auroc(torch.tensor([1.0]), torch.tensor([1.0])) == 0.5  # a tie counts half
    # brute force over pairs
    g = torch.Generator().manual_seed(0)
    a, b = torch.randint(0, 5, (30,), generator=g).float(), torch.randint(0, 5, (20,), generator=g).float()
    brute = sum(float(x > y) + 0.5 * float(x == y) for x in a for y in b) / 600
    assert auroc(a, b) == pytest.approx(brute)


def test_head_shapes_gate_and_training_step():
    torch.manual_seed(0)
    z, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    for n_heads, gate in ((1, False), (1, True), (3, True)):
        head = GEMHead(5, 3, n_heads, gate)
        out = head(z)
        assert out.alpha.shape == (16, n_heads, 3) and out.pi.shape == (16, n_heads)
        assert (out.alpha >= 1).all() and torch.allclose(out.pi.sum(1), torch.ones(16))
        assert (out.energy_logits is not None) == gate
        loss = gem_loss(out, y, kl_weight=0.5, fisher_weight=0.1)
        loss.backward()
        assert torch.isfinite(loss)


def test_bad_input():
    with pytest.raises(ValueError, match="n_classes"):
        GEMHead(4, 1)
    with pytest.raises(ValueError, match=r"\[n, 4\]"):
        GEMHead(4, 2)(torch.zeros(3, 5))
    out = GEMHead(4, 2)(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="labels"):
        gem_loss(out, torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match=">= 0"):
        gem_loss(out, torch.zeros(3, dtype=torch.long), kl_weight=-1)
    with pytest.raises(ValueError, match="at least one"):
        auroc(torch.zeros(0), torch.zeros(2))
