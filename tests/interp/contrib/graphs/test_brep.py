import numpy as np
import pytest
import torch

from interp.contrib.graphs.brep import BRep, PearsonMLP, accuracy, pearson_connectivity, train_classifier


def test_pearson_matches_numpy_corrcoef():
    x = torch.randn(2, 50, 4, dtype=torch.float64)
    C = pearson_connectivity(x)
    for b in range(2):
        ref = np.corrcoef(x[b].numpy().T) * 49 / 50
        assert np.allclose(C[b].numpy(), ref, atol=1e-12)


def test_pair_features_match_a_brute_force_v_statistic():
    torch.manual_seed(0)
    m = BRep(4, n_kernels=3, kernel_hidden=5)
    x = torch.randn(2, 20, 4)
    z = (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True)
    f = m.pair_features(x)
    p = 0
    for i in range(4):
        for j in range(i + 1, 4):
            ref = torch.stack([m.phi(torch.stack([z[b, :, i], z[b, :, j]], -1)).mean(0) for b in range(2)])
            assert torch.allclose(f[:, :, p], ref, atol=1e-6)
            p += 1
    C = m.connectivity(x)
    assert torch.allclose(C, C.transpose(-1, -2)) and torch.all(torch.diagonal(C, dim1=-2, dim2=-1) == 0)


def test_v_statistic_is_invariant_to_time_permutation():
    m = BRep(3)
    x = torch.randn(1, 30, 3)
    assert torch.allclose(m.pair_features(x), m.pair_features(x[:, torch.randperm(30)]), atol=1e-6)


def test_training_reduces_loss_on_a_learnable_coupling():
    g = torch.Generator().manual_seed(0)
    n, T = 64, 40
    y = torch.arange(n) % 2
    x = torch.randn(n, T, 3, generator=g)
    x[:, :, 1] = torch.where(y.view(-1, 1) == 1, x[:, :, 0] ** 2, torch.randn(n, T, generator=g) ** 2)
    model = BRep(3)
    losses = train_classifier(model, x, y, epochs=15, seed=0)
    assert losses[-1] < losses[0]
    assert 0.0 <= accuracy(model, x, y) <= 1.0


def test_bad_inputs():
    with pytest.raises(ValueError, match="regions"):
        BRep(4)(torch.randn(2, 10, 3))
    with pytest.raises(ValueError, match=r"\[batch, T >= 2"):
        pearson_connectivity(torch.randn(10, 3))
    with pytest.raises(ValueError):
        PearsonMLP(1)
    with pytest.raises(ValueError, match="same non-zero length"):
        train_classifier(BRep(3), torch.randn(4, 10, 3), torch.zeros(3, dtype=torch.long))


def test_envelope_baseline_sees_the_quadratic_coupling_pearson_misses():
    from interp.contrib.graphs.experiments.brep import BASELINES, baselines, synthetic, upper

    c = torch.arange(9.0).view(1, 3, 3)
    assert upper(c).tolist() == [[1.0, 2.0, 5.0]]
    x, y = synthetic(0, 80, 60, 10)  # the --quick size
    acc = baselines(x, y, 60, 2)
    assert acc[BASELINES[1]] == 1.0 and acc[BASELINES[0]] < 0.8
