import math

import pytest
import torch

from interp.contrib.timeseries.social_world_model import SWM, SWMConfig, ar_forecast, fit_ar, persistence, train_swm


def test_ar_recovers_a_known_difference_process_and_forecasts_it():
    # Δb_t = 0.5 Δb_{t-1}: from Δ = 1 at the last step the next levels add 0.5, 0.25, ...
    T = 40
    d = 0.5 ** torch.arange(T, dtype=torch.float32)
    b = torch.cumsum(d, 0).view(1, T, 1).repeat(3, 1, 2)
    coef = fit_ar(b, p=1, ridge=0.0)
    assert coef[0].item() == pytest.approx(0.5, abs=1e-4) and coef[1].item() == pytest.approx(0.0, abs=1e-4)
    hist = torch.cumsum(torch.tensor([1.0, 1.0]), 0).view(1, 2, 1)  # levels 1, 2: last Δ = 1
    assert ar_forecast(hist, coef, 3)[0, :, 0].tolist() == pytest.approx([2.5, 2.75, 2.875], abs=1e-3)
    assert persistence(hist, 2)[0, :, 0].tolist() == [2.0, 2.0]


def test_elbo_matches_hand_computation_when_q_equals_the_prior_mean():
    torch.manual_seed(0)
    m = SWM(SWMConfig(n_series=1, d_event=1, d_latent=1, hidden=4))
    with torch.no_grad():  # make q a point mass far below the prior variance? use tiny q variance and compare
        for p in m.parameters():
            p.zero_()
        m.q.bias.copy_(torch.tensor([0.0, -30.0]))  # q = N(0, e^-30): z ≈ 0
        m.p_logvar.fill_(0.0)  # prior N(z_prev + 0, 1)
        m.b_logvar.fill_(0.0)  # emission N(0, 1)
    b = torch.tensor([[[1.0], [2.0]]])
    e = torch.zeros(1, 2, 1)
    # per step: log N(b; 0, 1) - KL(N(0, e^-30) || N(0, 1)) with KL = 0.5(-(-30) + e^-30 - 1)
    kl = 0.5 * (30 + math.exp(-30) - 1)
    ll = [-0.5 * (x * x + math.log(2 * math.pi)) for x in (1.0, 2.0)]
    assert m.elbo(b, e).item() == pytest.approx((sum(ll) - 2 * kl) / 2, rel=1e-4)


def test_training_raises_the_elbo_and_forecast_shapes():
    g = torch.Generator().manual_seed(0)
    b = torch.cumsum(0.1 * torch.randn(16, 12, 2, generator=g), 1)
    e = torch.zeros(16, 12, 3)
    m = SWM(SWMConfig(n_series=2, d_event=3, d_latent=2, hidden=8))
    trace = train_swm(m, b, e, steps=40, batch=8)
    assert sum(trace[-5:]) / 5 > sum(trace[:5]) / 5
    assert m.forecast(b[:, :8], e, 4).shape == (16, 4, 2)


def test_bad_inputs():
    m = SWM(SWMConfig(n_series=2, d_event=3))
    with pytest.raises(ValueError, match="beliefs must be"):
        m.elbo(torch.zeros(2, 5, 3), torch.zeros(2, 5, 3))
    with pytest.raises(ValueError, match="events for"):
        m.forecast(torch.zeros(1, 5, 2), torch.zeros(1, 6, 3), 3)
    with pytest.raises(ValueError):
        SWMConfig(d_latent=0)
    with pytest.raises(ValueError, match="too short"):
        fit_ar(torch.zeros(1, 3, 1), p=3)


def test_arx_baseline_features_and_its_fit_on_the_demo_world():
    from interp.contrib.timeseries.experiments.social_world_model import (
        ARX_LAGS,
        H,
        K,
        arx_features,
        arx_forecast,
        fit_arx,
        generate,
    )

    b, e, L = generate(64, 0)
    x = arx_features(b, e, 10)
    assert x.shape == (64, K + ARX_LAGS * K + (ARX_LAGS + H) * e.shape[2] + 1)
    assert torch.allclose(x[:, :K], b[:, 9].double()) and torch.allclose(x[:, K : 2 * K], (b[:, 9] - b[:, 8]).double())
    with pytest.raises(ValueError, match="t0"):
        arx_features(b, e, ARX_LAGS)
    # fit on the demo's world, forecast fresh sequences: far better than persistence after events
    w, lam = fit_arx(b, e)
    bt, et, _ = generate(64, 1000, L)
    pred, fut = arx_forecast(bt[:, :45], et, w), bt[:, 45 : 45 + H]
    ev = et[:, 45].abs().sum(1) > 0
    arx = float(((pred - fut) ** 2)[ev].mean().sqrt())
    pers = float(((persistence(bt[:, :45], H) - fut) ** 2)[ev].mean().sqrt())
    assert pred.shape == fut.shape and arx < 0.5 * pers
