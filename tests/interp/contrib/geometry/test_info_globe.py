import math

import pytest
import torch

from interp.contrib.common.ranks import spearman
from interp.contrib.geometry.experiments.info_globe import ari, strong_rows
from interp.contrib.geometry.info_globe import (
    InfoGlobe,
    angle_distances,
    fisher_rao,
    modular_counts,
    to_proportions,
)
from interp.contrib.geometry.info_globe_baselines import group_proportions, hellinger_pca, kmeans


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


def test_kmeans_separates_obvious_clusters():
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    x = centres.repeat_interleave(20, 0) + 0.1 * torch.randn(60, 2, generator=g)
    labels = kmeans(x, 3, seed=0)
    # each true cluster lands in one k-means cluster, and the three are distinct
    per = [set(labels[20 * c : 20 * (c + 1)].tolist()) for c in range(3)]
    assert all(len(s) == 1 for s in per) and len(set.union(*per)) == 3


def test_strong_baseline_rows_beat_a_random_grouping():
    # tiny version of the experiment's strong-baseline rows: k-means groups of the genes' Hellinger profiles
    # recover the modules far better than a random grouping, and both baselines keep the Fisher-Rao geometry
    counts, probs, _, module = modular_counts(200, 60, 6, 4, depth=2000, seed=0)
    p = to_proportions(counts)
    groups, q_km, z_h = strong_rows(p, 6, seed=0)
    rand = torch.randint(6, (60,), generator=torch.Generator().manual_seed(0))
    assert ari(groups, module) > ari(rand, module) + 0.5
    assert torch.allclose(q_km, group_proportions(p, groups, 6)) and torch.allclose(q_km.sum(1), torch.ones(200))
    i, j = torch.triu_indices(200, 200, 1)
    true_d = fisher_rao(probs, probs)[i, j]
    q_rand = group_proportions(p, rand, 6)
    rand_corr = spearman(true_d, fisher_rao(q_rand, q_rand)[i, j])
    assert spearman(true_d, fisher_rao(q_km, q_km)[i, j]) > rand_corr
    assert spearman(true_d, torch.cdist(z_h, z_h)[i, j]) > 0.9
    assert hellinger_pca(p, 6).shape == (200, 6)
    with pytest.raises(ValueError, match="groups"):
        group_proportions(p, groups[:-1], 6)
