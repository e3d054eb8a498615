import math

import pytest
import torch

from interp.contrib.geometry.neural_collapse import (
    UFMConfig,
    class_mean_subspace,
    effective_rank,
    gauss_newton_last_layer,
    kfac_subspace,
    nc_metrics,
    spectrum_check,
    train_deep_ufm,
)


def _collapsed(k=3, per=4, d=5):
    means = torch.zeros(k, d)
    means[:, :k] = torch.eye(k) - 1.0 / k
    labels = torch.arange(k).repeat_interleave(per)
    return means[labels] + 0.7, labels, means


def test_nc_metrics_vanish_at_exact_collapse():
    feats, labels, means = _collapsed()
    m = nc_metrics(feats, labels, W=means)
    assert m["nc1"] == pytest.approx(0, abs=1e-10)
    assert m["nc2"] == pytest.approx(0, abs=1e-10)
    assert m["nc3"] == pytest.approx(0, abs=1e-10)
    assert m["class_mean_rank"] == 2 and m["class_mean_effective_rank"] == pytest.approx(2.0)


def test_nc1_of_a_known_spread():
    # two classes at +-1 on axis 0, within-class spread +-s on axis 0: S_W = s^2, S_B = 1 -> NC1 = s^2 / 2
    s = 0.5
    feats = torch.tensor([[1 + s], [1 - s], [-1 + s], [-1 - s]])
    assert nc_metrics(feats, torch.tensor([0, 0, 1, 1]))["nc1"] == pytest.approx(s**2 / 2)


def test_effective_rank():
    assert effective_rank(torch.diag(torch.tensor([1.0, 1.0, 0.0]))) == pytest.approx(2.0)
    assert effective_rank(torch.ones(4, 4)) == pytest.approx(1.0)
    assert effective_rank(torch.tensor([3.0, 1.0])) == pytest.approx(
        math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    )


def test_gauss_newton_matches_autograd():
    g = torch.Generator().manual_seed(0)
    h, W, b = (
        torch.randn(5, 4, generator=g, dtype=torch.float64),
        torch.randn(3, 4, generator=g, dtype=torch.float64),
        torch.randn(3, generator=g, dtype=torch.float64),
    )
    ref = torch.zeros(12, 12, dtype=torch.float64)
    for hi in h:
        jac = torch.autograd.functional.jacobian(lambda w: w.reshape(3, 4) @ hi + b, W.reshape(-1))  # [3, 12]  # noqa: B023
        p = (W @ hi + b).softmax(0)
        ref += jac.T @ (torch.diag(p) - torch.outer(p, p)) @ jac / len(h)
    assert torch.allclose(gauss_newton_last_layer(h, W, b), ref, atol=1e-12)


def test_spectrum_check_at_collapse_lies_in_the_predicted_subspace():
    feats, labels, means = _collapsed(k=3, per=6, d=5)
    W = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    out = spectrum_check(feats, labels, W)
    assert out["predicted_dim"] == 2 * 3  # (K-1) * rank of the (uncentred) means
    assert out["overlap_top"] == pytest.approx(1.0, abs=1e-8)
    assert out["trace_in_subspace"] == pytest.approx(1.0, abs=1e-10)
    assert out["random_baseline"] == pytest.approx(6 / 15)
    basis = class_mean_subspace(means + 0.7)
    assert torch.allclose(basis.T @ basis, torch.eye(6, dtype=torch.float64), atol=1e-10)


def test_kfac_baseline_is_exact_when_the_softmax_hessian_is_shared_and_beats_class_means_there():
    # W = 0: every sample has the same softmax Hessian A, so the Gauss-Newton is exactly A (x) B and the K-FAC
    # prediction (the strong baseline) holds its top eigenspace; the class means, far from collapse, do not
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(3).repeat_interleave(40)
    feats = torch.randn(120, 5, generator=g) * torch.tensor([3.0, 2.0, 1.5, 0.5, 0.2]) + 0.1 * labels[:, None]
    W = torch.zeros(3, 5)
    basis = kfac_subspace(feats, W, None, 6)
    assert torch.allclose(basis.T @ basis, torch.eye(6, dtype=torch.float64), atol=1e-10)
    out = spectrum_check(feats, labels, W)
    assert out["predicted_dim"] == 6
    assert out["overlap_kfac"] == pytest.approx(1.0, abs=1e-8)
    assert out["overlap_top"] < 0.9
    with pytest.raises(ValueError, match="r="):
        kfac_subspace(feats, W, None, 16)


def test_deep_ufm_trains_and_records():
    for init in ("random", "spectral"):
        hist = train_deep_ufm(
            UFMConfig(n_classes=3, per_class=4, width=6, depth=2, steps=200, init=init, init_scale=0.5),
            record_every=100,
        )
        assert hist["step"] == [0, 100, 200]
        assert hist["loss"][-1] < hist["loss"][0]
        assert len(hist["sv"][0]) == 3


def test_bad_inputs():
    with pytest.raises(ValueError, match="no samples"):
        nc_metrics(torch.randn(4, 2), torch.tensor([0, 0, 2, 2]))
    with pytest.raises(ValueError, match="classifier"):
        nc_metrics(torch.randn(4, 2), torch.tensor([0, 0, 1, 1]), W=torch.randn(3, 2))
    with pytest.raises(ValueError, match="integer"):
        nc_metrics(torch.randn(4, 2), torch.tensor([0.0, 0, 1, 1]))
    with pytest.raises(ValueError, match="init"):
        UFMConfig(init="orthogonal")


def test_deep_ufm_equal_loss_row_keeps_the_depth_gap():
    # tiny version of the equal-loss comparison (issue 42): depth 1 trained on to the deep model's loss stays
    # near rank K-1, the deep model read at depth 1's loss is already low-rank
    from interp.contrib.geometry.experiments.collapse import equal_loss, first_at_or_below

    hist = {"step": [0, 10, 20], "loss": [1.0, 0.5, 0.1], "eff_rank": [5.0, 4.0, 3.0]}
    assert first_at_or_below(hist, 0.5) == {"step": 10, "loss": 0.5, "eff_rank": 4.0}
    assert first_at_or_below(hist, 0.01)["step"] == 20  # never reached: the last checkpoint
    rows = equal_loss(1, steps=400, long_steps=4000)
    d1, d4 = rows["depth 1 at the deep loss"][0], rows["depth 4 at the depth-1 loss"][0]
    assert d1["loss"] <= rows["depth 4, 400 steps"][0]["loss"]  # depth 1 really reached the deep loss
    assert d1["eff_rank"] > 4.5 and d4["eff_rank"] < 3.5
