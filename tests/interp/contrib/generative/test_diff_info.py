import math

import pytest
import torch
from torch import nn

from interp.contrib.generative.diff_info import (
    HiddenTap,
    cfg_norm,
    gaussian_mmse,
    integrate_logsnr,
    mmse_curve,
    pool_projector,
)


def test_pool_projector_is_an_orthogonal_projection_of_rank_16():
    P = pool_projector(8, 2)
    assert torch.allclose(P @ P, P, atol=1e-12) and torch.allclose(P, P.T)
    assert round(float(torch.trace(P))) == 16
    img = torch.arange(64, dtype=torch.float64)
    low = P @ img
    # the low-pass part of pixel (0,0) is the mean of its 2x2 block: (0 + 1 + 8 + 9) / 4
    assert float(low[0]) == pytest.approx(4.5)
    assert torch.allclose(
        (torch.eye(64, dtype=torch.float64) - P) @ P, torch.zeros(64, 64, dtype=torch.float64), atol=1e-12
    )


def test_gaussian_mmse_closed_form_and_monte_carlo():
    # scalar: mmse = σ² / (1 + snr σ²)
    assert gaussian_mmse(torch.tensor([[2.0]]), torch.tensor([0.0, 1.0, 3.0])).tolist() == pytest.approx(
        [2.0, 2 / 3, 2 / 7]
    )
    # 3-d: the linear (optimal) denoiser's Monte-Carlo error matches tr((Σ⁻¹ + snr I)⁻¹)
    g = torch.Generator().manual_seed(0)
    A = torch.randn(3, 3, generator=g, dtype=torch.float64)
    S = A @ A.T + 0.1 * torch.eye(3, dtype=torch.float64)
    x = torch.randn(20000, 3, generator=g, dtype=torch.float64) @ torch.linalg.cholesky(S).T

    def optimal(y, gm):
        s = math.exp(float(gm[0]))
        K = math.sqrt(s) * S @ torch.linalg.inv(s * S + torch.eye(3, dtype=torch.float64))
        return y @ K.T

    gam = torch.tensor([-1.0, 0.0, 1.5], dtype=torch.float64)
    mc = mmse_curve(optimal, x, gam, {"all": torch.eye(3, dtype=torch.float64)})["all"]
    assert torch.allclose(mc, gaussian_mmse(S, gam.exp()), rtol=0.03)


def test_i_mmse_integral_gives_the_gaussian_channel_capacity():
    # ½ ∫_0^snr σ²/(1 + sσ²) ds = ½ log(1 + snr σ²); the integral over log-snr from far below 0 up to log 4
    gam = torch.linspace(-20, math.log(4.0), 4001, dtype=torch.float64)
    vals = gaussian_mmse(torch.tensor([[1.5]]), gam.exp())
    assert integrate_logsnr(gam, vals) == pytest.approx(0.5 * math.log(1 + 4 * 1.5), abs=1e-5)


def test_hidden_tap_records_and_removes_hooks():
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    x = torch.randn(4, 2)
    with HiddenTap({"relu": net[1]}) as tap:
        net(x)
    assert torch.allclose(tap.acts["relu"], torch.relu(net[0](x)))
    assert len(net[1]._forward_hooks) == 0


def test_cfg_norm_and_bad_inputs():
    assert cfg_norm(torch.tensor([[3.0, 4.0]]), torch.zeros(1, 2)) == pytest.approx(5.0)
    with pytest.raises(ValueError, match="shapes differ"):
        cfg_norm(torch.zeros(1, 2), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="increasing"):
        integrate_logsnr(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0]))
    with pytest.raises(ValueError, match="multiple"):
        pool_projector(7, 2)
    with pytest.raises(ValueError, match="square"):
        gaussian_mmse(torch.zeros(2, 3), torch.tensor([1.0]))
    with pytest.raises(ValueError, match="at least one"):
        HiddenTap({})
    with pytest.raises(ValueError, match=r"\[n, d\]"):
        mmse_curve(lambda y, g: y, torch.zeros(0, 2), torch.tensor([0.0]), {"all": torch.eye(2)})
