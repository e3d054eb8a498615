"""Spearman and AUROC: scipy's and sklearn's numbers, ties at their average rank, constant inputs give 0."""

import pytest
import torch

from interp.contrib.common.ranks import auroc, rowwise_spearman, spearman


def test_spearman_matches_the_definition_with_ties():
    assert spearman(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2.0, 4.0, 8.0])) == pytest.approx(1.0)
    assert spearman(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3.0, 2.0, 1.0])) == pytest.approx(-1.0)
    # ranks (1.5, 1.5, 3) against (1, 2, 3): Pearson of the average ranks
    assert spearman(torch.tensor([1.0, 1.0, 2.0]), torch.tensor([1.0, 2.0, 3.0])) == pytest.approx(0.8660254)
    assert spearman(torch.ones(4), torch.arange(4.0)) == 0.0
    with pytest.raises(ValueError):
        spearman(torch.ones(3), torch.ones(4))


def test_rowwise_spearman_agrees_with_the_flat_one_per_row():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 20, generator=g), torch.randn(5, 20, generator=g).round()
    rows = rowwise_spearman(a, b)
    assert rows.shape == (5,) and rows.dtype == torch.float32
    for i in range(5):
        assert float(rows[i]) == pytest.approx(spearman(a[i], b[i]), abs=1e-6)


def test_auroc_is_mann_whitney_with_half_ties():
    pos, neg = torch.tensor([3.0, 2.0, 1.0]), torch.tensor([1.0, 0.0])
    pairs = (pos[:, None] > neg).float().mean() + 0.5 * (pos[:, None] == neg).float().mean()
    assert auroc(pos, neg) == pytest.approx(float(pairs))
    assert auroc(torch.ones(3), torch.ones(2)) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        auroc(torch.tensor([]), neg)
