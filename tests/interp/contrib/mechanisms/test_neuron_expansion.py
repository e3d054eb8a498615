import pytest
import torch

from interp.contrib.mechanisms.neuron_expansion import (
    MaskedMLP,
    accuracy,
    expand_neurons,
    feature_capacity,
    make_dnf,
    mean_neuron_cosine,
    polysemanticity,
    train_mlp,
)


@pytest.mark.parametrize("partition", ["random", "clause"])
def test_expansion_keeps_the_nonzero_count_and_partitions_inputs(partition):
    mlp = MaskedMLP.dense(n_in=12, n_hidden=4, n_out=2, seed=0)
    wide = expand_neurons(mlp, alpha=3, partition=partition, seed=0)
    assert wide.W1.shape == (12, 12) and wide.W2.shape == (2, 12)
    assert wide.nonzero_count() == mlp.nonzero_count()
    # before pruning, children of neuron j partition its 12 inputs: after pruning they stay disjoint
    for j in range(4):
        kids = wide.M1[3 * j : 3 * j + 3]
        assert kids.sum(0).max() <= 1
        assert kids.sum() >= 12 - 2 * 4 * 3  # at most the (alpha-1)*m*d_out = 16 extra weights were pruned


def test_clause_split_separates_features_used_together():
    # neuron 0 reads features 0-2 (used also by neuron 1) and 3-5 (used also by neuron 2)
    W1 = torch.zeros(3, 6)
    W1[0] = torch.tensor([1.0, 0.9, 1.1, -1.0, -0.8, -1.2])
    W1[1, :3] = torch.tensor([0.5, 0.6, 0.4])
    W1[2, 3:] = torch.tensor([0.7, -0.5, 0.6])
    mlp = MaskedMLP(W1, torch.zeros(3), torch.ones(1, 3), torch.zeros(1), M1=(W1 != 0).float())
    wide = expand_neurons(mlp, alpha=2, partition="clause", seed=0)
    kids = {frozenset(torch.nonzero(wide.M1[i]).ravel().tolist()) for i in (0, 1)}
    assert kids == {frozenset({0, 1, 2}), frozenset({3, 4, 5})}


def test_feature_capacity_and_cosine_exact():
    assert torch.allclose(feature_capacity(torch.eye(3)), torch.ones(3, dtype=torch.float64))
    assert torch.allclose(feature_capacity(torch.tensor([[1.0, 1.0]])), torch.tensor([0.5, 0.5], dtype=torch.float64))
    assert mean_neuron_cosine(torch.eye(3)) == 0.0
    assert mean_neuron_cosine(torch.tensor([[1.0, 0.0], [-2.0, 0.0]])) == 1.0


def test_polysemanticity_counts_features():
    feats = torch.tensor([[0, 0], [1, 0], [0, 1], [1, 1]] * 5).float()
    acts = torch.stack([feats[:, 0], feats[:, 0] + feats[:, 1], torch.zeros(20)], 1)
    assert polysemanticity(acts, feats).tolist() == [1, 2, 0]


def test_dnf_labels_are_the_or_of_clauses_and_training_learns():
    task = make_dnf(n_bits=16, n_clauses=3, n_samples=3000, seed=0)
    bits = (task.x > 0).long()
    for c, lits in enumerate(task.literals):
        sat = torch.stack([bits[:, i] == s for i, s in lits], 1).all(1)
        assert torch.equal(sat.float(), task.clauses[:, c])
    assert torch.equal(task.y, task.clauses.max(1).values)
    mlp = train_mlp(MaskedMLP.dense(16, 8, 1, seed=0), task.x, task.y, steps=200, batch=256)
    assert accuracy(mlp, task.x, task.y) > 0.85


def test_bad_inputs():
    mlp = MaskedMLP.dense(4, 2)
    with pytest.raises(ValueError, match="alpha"):
        expand_neurons(mlp, alpha=1)
    with pytest.raises(ValueError, match="partition"):
        expand_neurons(mlp, partition="kmeans")
    with pytest.raises(ValueError, match="cannot split"):
        expand_neurons(mlp, alpha=5)
    with pytest.raises(ValueError, match="both on and off"):
        polysemanticity(torch.ones(4, 2), torch.ones(4, 1))
