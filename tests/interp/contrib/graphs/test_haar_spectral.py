import math

import pytest
import torch

from interp.contrib.graphs.haar_spectral import (
    HaarFilterNet,
    haar_basis,
    median_tree,
    spectral_embedding,
    spectral_tree,
)


def test_four_leaf_binary_tree_gives_the_classic_haar_matrix():
    Phi, level = haar_basis([[0, 1], [2, 3]], 4)
    s = 1 / math.sqrt(2)
    expected = torch.tensor(
        [[0.5, 0.5, s, 0.0], [0.5, 0.5, -s, 0.0], [0.5, -0.5, 0.0, s], [0.5, -0.5, 0.0, -s]], dtype=torch.float64
    )
    # columns: scaling, root wavelet, then the two children's wavelets
    assert torch.allclose(Phi[:, 0], expected[:, 0]) and torch.allclose(Phi[:, 1], expected[:, 1])
    assert torch.allclose(Phi[:, 2:], expected[:, 2:], atol=1e-12)
    assert level.tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize("tree,n", [([[0, 1, 2], [3, [4, 5]], 6], 7), ([[[0], 1], [2, 3, 4, 5, 6, 7]], 8)])
def test_haar_basis_is_orthonormal_and_local_for_unbalanced_trees(tree, n):
    Phi, _ = haar_basis(tree, n)
    assert Phi.shape == (n, n)
    assert torch.allclose(Phi.T @ Phi, torch.eye(n, dtype=torch.float64), atol=1e-12)
    # every wavelet (all but the scaling column) has zero mean
    assert torch.allclose(Phi[:, 1:].sum(0), torch.zeros(n - 1, dtype=torch.float64), atol=1e-12)


def test_spectral_tree_covers_every_node_once_and_basis_is_orthonormal():
    g = torch.Generator().manual_seed(0)
    A = (torch.rand(40, 40, generator=g) < 0.15).float()
    A = ((A + A.T) > 0).float()
    A.fill_diagonal_(0)
    tree = spectral_tree(A, dims=4)
    Phi, level = haar_basis(tree, 40)
    assert torch.allclose(Phi.T @ Phi, torch.eye(40, dtype=torch.float64), atol=1e-10)
    assert int(level.max()) <= math.ceil(math.log2(40))  # balanced
    assert spectral_embedding(A, 4).shape == (40, 4)


def test_filter_with_unit_gains_passes_the_signal_through_the_haar_domain():
    Phi, level = haar_basis(median_tree(torch.randn(16, 2)), 16)
    net = HaarFilterNet(3, 5, 2, Phi, level, dropout=0.0)
    H = torch.randn(16, 5)
    # Φ diag(1) Φᵀ = I: the filtered branch equals its input when every gain is 1
    assert torch.allclose(net.Phi @ (net.Phi.T @ H * net.gain[net.level]), H, atol=1e-5)
    assert net(torch.randn(16, 3)).shape == (16, 2)


def test_bad_inputs():
    with pytest.raises(ValueError, match="leaves"):
        haar_basis([[0, 1], [1, 2]], 3)
    with pytest.raises(ValueError, match="square"):
        spectral_embedding(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="Phi"):
        HaarFilterNet(3, 4, 2, torch.eye(4), torch.zeros(3, dtype=torch.long))
