import pytest
import torch
import torch.nn.functional as F

from interp.contrib.privacy.fedfit import (
    FedConfig,
    adjust_mask,
    dirichlet_split,
    federated_train,
    forward,
    init_params,
    layer_fisher,
    random_masks,
)


def test_fisher_and_gradient_match_per_sample_autograd():
    g = torch.Generator().manual_seed(0)
    params = init_params((5, 7, 3), g)
    x, y = torch.randn(6, 5, generator=g), torch.randint(3, (6,), generator=g)
    grads, fishers = layer_fisher(params, x, y)
    per = []
    for n in range(6):
        ps = [p.clone().requires_grad_(True) for p in params]
        loss = F.cross_entropy(forward(ps, x[n : n + 1])[0], y[n : n + 1])
        per.append(torch.autograd.grad(loss, ps[::2]))
    for li in range(2):
        stack = torch.stack([p[li] for p in per])
        assert torch.allclose(grads[li], stack.mean(0), atol=1e-6)
        assert torch.allclose(fishers[li], (stack**2).mean(0), atol=1e-6)


def test_adjust_mask_by_hand():
    w = torch.tensor([[0.1, 2.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    fisher = torch.tensor([[1.0, 1.0, 1.0, 4.0]])
    grad = torch.tensor([[0.0, 0.0, 1.0, 1.5]])
    # Fisher rule: prune the smaller ½Fw² (index 0); grow the larger g²/F: 1.0 (index 2) vs 0.5625 (index 3)
    assert adjust_mask(w, mask, grad, fisher, 1, "fisher", 1e-9).tolist() == [[0.0, 1.0, 1.0, 0.0]]
    # magnitude rule grows by |g|: index 3
    assert adjust_mask(w, mask, grad, fisher, 1, "magnitude", 1e-9).tolist() == [[0.0, 1.0, 0.0, 1.0]]


def test_masks_keep_their_budget_and_split_covers_every_row():
    g = torch.Generator().manual_seed(1)
    params = init_params((10, 20, 4), g)
    masks = random_masks(params, 0.9, g)
    assert [int(m.sum()) for m in masks] == [20, 8]
    y = torch.randint(4, (200,), generator=g)
    parts = dirichlet_split(y, 5, 0.3, g)
    assert sorted(torch.cat(parts).tolist()) == list(range(200))


def test_sparse_training_learns_and_keeps_sparsity():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(400, 8, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    clients = [(x[i::4], y[i::4]) for i in range(4)]
    acc, hist = federated_train(clients, (x, y), (8, 32, 2), FedConfig(rounds=6, sparsity=0.5, adjust_every=2))
    assert acc > 0.8 and len(hist) == 6


def test_bad_input():
    with pytest.raises(ValueError, match="sparsity"):
        FedConfig(sparsity=1.0)
    with pytest.raises(ValueError, match="rule"):
        FedConfig(rule="random")
    with pytest.raises(ValueError, match="rounds"):
        FedConfig(rounds=0)
    with pytest.raises(ValueError, match="features"):
        federated_train(
            [(torch.zeros(3, 5), torch.zeros(3, dtype=torch.long))],
            (torch.zeros(1, 4), torch.zeros(1)),
            (4, 2),
            FedConfig(),
        )
    with pytest.raises(ValueError, match="at least one"):
        federated_train([], (torch.zeros(1, 4), torch.zeros(1)), (4, 2), FedConfig())
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_split(torch.zeros(3), 2, 0.0, torch.Generator())


def test_tuned_baseline_picks_from_its_grid_and_keeps_test_rows_out(monkeypatch):
    from interp.contrib.common.datasets import digits
    from interp.contrib.privacy.experiments import fedfit as exp

    x, y = digits()
    x, y = x[:500], y[:500]
    # a one-point grid: the tuned run is exactly that setting trained on the clients, scored on the test rows
    monkeypatch.setattr(exp, "TUNE_LR", (0.2,))
    monkeypatch.setattr(exp, "TUNE_PRUNE", (0.3,))
    out = exp.tuned_run(x, y, (64, 32, 10), seed=0, rounds=3, n_test=100, n_val=100)
    assert out["magnitude / gradient, tuned settings"] == (0.2, 0.3) == out["FedFit (Fisher), tuned settings"]
    assert all(0.0 <= out[k] <= 1.0 for k in exp.TUNED_RULES)
    # two learning rates: the choice is the one with the better validation accuracy, so a useless lr loses
    monkeypatch.setattr(exp, "TUNE_LR", (1e-6, 0.2))
    out = exp.tuned_run(x, y, (64, 32, 10), seed=0, rounds=3, n_test=100, n_val=100)
    assert out["FedFit (Fisher), tuned settings"][0] == 0.2
