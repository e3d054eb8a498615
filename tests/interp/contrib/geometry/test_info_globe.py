import math

import pytest
import torch

from interp.contrib.common.ranks import spearman
from interp.contrib.geometry.info_globe import (
    InfoGlobe,
    angle_distances,
    fisher_rao,
    modular_counts,
    to_proportions,
)


def test_fisher_rao_closed_forms():
    p = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    d = fisher_rao(p, p)
    assert d[0, 1].item() == pytest.approx(math.pi, abs=1e-3)  # disjoint supports: 2 arccos 0
    assert d[0, 2].item() == pytest.approx(2 * math.acos(math.sqrt(0.5)), abs=1e-5)  # = π/2
    assert d.diagonal().abs().max().item() < 2e-3


def test_aggregation_never_increases_distances():
    g = torch.Generator().manual_seed(0)
    p = to_proportions(torch.rand(30, 12, generator=g))
    model = InfoGlobe(12, 4)
    with torch.no_grad():
        q = model.embed(p)
    assert torch.allclose(q.sum(1), torch.ones(30), atol=1e-6)
    assert (fisher_rao(q, q) <= fisher_rao(p, p) + 1e-3).all()  # Chentsov: a Markov morphism contracts


def test_fit_recovers_exact_duplicate_features():
    # features come in identical pairs (0,1), (2,3), ...: grouping each pair loses nothing
    g = torch.Generator().manual_seed(1)
    base = torch.rand(200, 4, generator=g) ** 3
    p = to_proportions(base.repeat_interleave(2, dim=1))
    model = InfoGlobe(8, 4, seed=0).fit(p, steps=300, pairs=512)
    assert model.history[-1] < 0.1 * model.history[0]
    with torch.no_grad():
        q = model.embed(p)
    i, j = torch.triu_indices(200, 200, 1)
    assert spearman(fisher_rao(p, p)[i, j], fisher_rao(q, q)[i, j]) > 0.95


def test_helpers():
    assert spearman(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2.0, 4.0, 8.0])) == pytest.approx(1.0)
    assert angle_distances(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))[0, 1].item() == pytest.approx(math.pi / 2, abs=1e-4)
    counts, probs, ctype, module = modular_counts(20, 12, 3, 2, depth=100, seed=0)
    assert counts.shape == (20, 12) and torch.allclose(probs.sum(1), torch.ones(20), atol=1e-5)
    assert module.tolist() == [0, 1, 2] * 4 and set(ctype.tolist()) <= {0, 1}


def test_bad_input():
    with pytest.raises(ValueError, match="non-negative"):
        to_proportions(torch.tensor([[1.0, -1.0]]))
    with pytest.raises(ValueError, match="zero total"):
        to_proportions(torch.tensor([[0.0, 0.0]]))
    with pytest.raises(ValueError, match="n_groups"):
        InfoGlobe(3, 5)
    with pytest.raises(ValueError, match="summing to one"):
        InfoGlobe(2, 1).fit(torch.tensor([[1.0, 1.0], [2.0, 0.0]]))
    with pytest.raises(ValueError, match=r"\[n, 2\]"):
        InfoGlobe(2, 1).embed(torch.zeros(3, 3))
    with pytest.raises(ValueError, match="need p"):
        fisher_rao(torch.zeros(2, 3), torch.zeros(2, 4))
