import pytest
import torch
import torch.nn.functional as F

from interp.contrib.common.ranks import spearman
from interp.contrib.data.gfd_emvc import (
    detection_f1,
    evolve_fusion,
    flag_top,
    gradient_outlier_scores,
    last_layer_gradients,
    prototype_relabel,
    small_loss_scores,
)


def test_last_layer_gradients_match_autograd_per_sample():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3).double()
    z, y = torch.randn(5, 4, dtype=torch.float64), torch.tensor([0, 2, 1, 1, 0])
    fast = last_layer_gradients(lin(z).detach(), y, z)
    for i in range(5):
        lin.zero_grad()
        F.cross_entropy(lin(z[i : i + 1]), y[i : i + 1]).backward()
        assert torch.allclose(fast[i], lin.weight.grad.flatten(), atol=1e-12)


def test_outlier_scores_flag_a_planted_outlier():
    g = torch.Generator().manual_seed(0)
    grads = torch.randn(40, 6, generator=g, dtype=torch.float64) * 0.1
    labels = torch.tensor([0] * 20 + [1] * 20)
    grads[7] += 5.0
    s = gradient_outlier_scores(grads, labels, rank=3)
    assert int(s.argmax()) == 7
    assert flag_top(s, 1 / 40).nonzero().flatten().tolist() == [7]


def test_prototype_relabel_hand_case():
    feats = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.95, 0.05], [0.7, 0.7]])
    labels = torch.tensor([0, 0, 1, 1, 1, 0])  # row 4 looks like class 0; row 5 sits between the two
    flagged = torch.tensor([False, False, False, False, True, True])
    new, keep = prototype_relabel(feats, labels, flagged, margin=0.05)
    assert new[4] == 0 and keep[4]
    assert not keep[5]  # ambiguous: equally close to both prototypes
    assert torch.equal(new[:4], labels[:4]) and keep[:4].all()


def test_metrics_closed_forms():
    assert detection_f1(
        torch.tensor([True, True, False, False]), torch.tensor([True, False, True, False])
    ) == pytest.approx(0.5)
    assert detection_f1(torch.tensor([False, False]), torch.tensor([True, False])) == 0.0
    assert spearman(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([10.0, 20.0, 30.0])) == pytest.approx(1.0)
    assert spearman(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3.0, 2.0, 1.0])) == pytest.approx(-1.0)
    assert small_loss_scores(torch.zeros(1, 2), torch.tensor([0])).item() == pytest.approx(
        torch.log(torch.tensor(2.0)).item()
    )


def test_evolution_finds_the_informative_view():
    y = torch.arange(60) % 3
    good = F.one_hot(y, 3).double() * 5
    bad = torch.randn(60, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 10
    best, hist = evolve_fusion([good, bad], y, pop=10, gens=5)
    assert len(hist) == 10 * 6
    assert max(f for _, f in hist) == 1.0
    assert best[0] > best[1]


def test_bad_input():
    with pytest.raises(ValueError, match="logits"):
        last_layer_gradients(torch.zeros(3, 2), torch.zeros(3, dtype=torch.long), torch.zeros(4, 5))
    with pytest.raises(ValueError, match="rank"):
        gradient_outlier_scores(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long), rank=0)
    with pytest.raises(ValueError, match="frac"):
        flag_top(torch.zeros(3), 1.5)
    with pytest.raises(ValueError, match="unflagged"):
        prototype_relabel(torch.eye(2), torch.tensor([0, 1]), torch.tensor([False, True]))
    with pytest.raises(ValueError, match="pop"):
        evolve_fusion([torch.zeros(2, 2)], torch.zeros(2, dtype=torch.long), pop=1)


def test_early_stopping_baseline_keeps_the_best_validation_epoch_count():
    from interp.contrib.data.experiments.gfd_emvc import EPOCHS_GRID, early_stopped, train_view

    g = torch.Generator().manual_seed(0)
    x, x_va = torch.randn(160, 6, generator=g), torch.randn(80, 6, generator=g)
    y, y_va = (x[:, 0] > 0).long(), (x_va[:, 0] > 0).long()
    y[:40] = 1 - y[:40]  # 25% flipped training labels

    def acc(m):
        with torch.no_grad():
            return float((m(x_va)[0].argmax(1) == y_va).float().mean())

    got = acc(early_stopped(x, y, x_va, y_va, 2, 30, seed=0))
    # the candidates are EPOCHS_GRID (at most 30 epochs): the chosen one is the best of them, and training is seeded
    assert got == max(acc(train_view(x, y, 2, e, 0)) for e in EPOCHS_GRID)
    assert got > 0.8
