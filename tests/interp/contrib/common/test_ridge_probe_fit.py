"""Ridge against its normal equations, the Adam probe on separable data, and the fit loop's early stopping."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from interp.contrib.common.datasets import diabetes, digits
from interp.contrib.common.fit import epoch_batches, fit, make_optimizer, random_batches
from interp.contrib.common.probe import probe_accuracy, train_linear_probe
from interp.contrib.common.ridge import ridge, ridge_classify, with_bias


def test_ridge_solves_its_normal_equations_also_batched():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(30, 4, generator=g, dtype=torch.float64), torch.randn(30, 2, generator=g, dtype=torch.float64)
    w = ridge(x, y, 0.5)
    assert torch.allclose((x.T @ x + 0.5 * torch.eye(4, dtype=torch.float64)) @ w, x.T @ y)
    assert torch.allclose(ridge(x, y, 0.5, mean=True), ridge(x, y, 0.5 * 30))
    xb = torch.stack([x, 2 * x])
    assert torch.allclose(ridge(xb, torch.stack([y, y]), 0.5)[0], w)
    assert with_bias(x).shape == (30, 5) and bool((with_bias(x)[:, -1] == 1).all())


def test_ridge_classify_and_probe_separate_two_blobs():
    g = torch.Generator().manual_seed(1)
    y = torch.arange(40) % 2
    x = torch.randn(40, 3, generator=g) + 4 * y[:, None].float()
    assert bool((ridge_classify(x, y, x, 2, 1e-3) == y).all())
    w, b = train_linear_probe(x, y, 2, steps=100)
    assert w.shape == (2, 3) and b.shape == (2,)
    assert probe_accuracy(x, y, x, y, 2, standardise=True, steps=100) == 1.0


def test_fit_with_seeded_batches_is_deterministic_and_stops_early():
    x = torch.linspace(-1, 1, 64)[:, None]
    y = 3 * x

    def run(seed):
        torch.manual_seed(0)
        lin = nn.Linear(1, 1)
        opt = make_optimizer(lin.parameters(), lr=0.05)
        res = fit(opt, lambda i: F.mse_loss(lin(x[i]), y[i]), epoch_batches(64, 16, 5, seed), record_losses=True)
        return lin.weight.item(), res

    (w1, r1), (w2, _) = run(3), run(3)
    assert w1 == w2 and r1.steps == 20 and len(r1.losses) == 20 and r1.losses[-1] < r1.losses[0]
    scores = iter([0.1, 0.5, 0.4, 0.3, 0.2, 0.9])
    lin = nn.Linear(1, 1)
    res = fit(
        make_optimizer(lin.parameters(), lr=0.1, name="sgd"),
        lambda i: F.mse_loss(lin(x[i]), y[i]),
        random_batches(64, 8, 100, 0),
        evaluate=lambda: next(scores),
        every=2,
        patience=3,
        restore=lin,
    )
    assert res.stopped_early and res.best_score == 0.5 and res.best_step == 4 and res.steps == 10
    with pytest.raises(ValueError, match="total_steps"):
        fit(make_optimizer(lin.parameters(), lr=0.1), lambda i: lin(x).sum(), range(1), schedule="cosine")


def test_fit_callback_sees_every_step_and_can_stop():
    x = torch.linspace(-1, 1, 32)[:, None]
    lin = nn.Linear(1, 1)
    seen = []

    def cb(step, loss):
        seen.append((step, float(loss), loss.requires_grad))
        return step == 7

    res = fit(
        make_optimizer(lin.parameters(), lr=0.01),
        lambda i: F.mse_loss(lin(x[i]), 2 * x[i]),
        random_batches(32, 8, 100, 0),
        record_losses=True,
        callback=cb,
    )
    assert res.steps == 7 and res.stopped_early and [s for s, _, _ in seen] == list(range(1, 8))
    assert [v for _, v, _ in seen] == res.losses and not any(g for _, _, g in seen)


def test_epoch_batches_with_epoch_pairs_the_same_batches_with_their_epoch():
    plain = list(epoch_batches(10, 4, 3, 5, min_size=2))
    paired = list(epoch_batches(10, 4, 3, 5, min_size=2, with_epoch=True))
    assert [ep for ep, _ in paired] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert all(torch.equal(a, b) for a, (_, b) in zip(plain, paired, strict=True))


def test_bundled_datasets_have_their_scales():
    x, y = digits()
    assert x.shape == (1797, 64) and x.dtype == torch.float32 and float(x.max()) == 1.0 and int(y.max()) == 9
    xs, _ = digits(scale="signed")
    assert float(xs.min()) == -1.0 and torch.equal(xs, x * 2 - 1)
    imgs, _ = digits(images=True)
    assert imgs.shape == (1797, 1, 8, 8) and torch.equal(imgs.flatten(1), x)
    xd, yd = diabetes()
    assert xd.shape == (442, 10) and abs(float(yd.mean())) < 1e-9
