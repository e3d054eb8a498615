import math

import pytest
import torch

from interp.contrib.mechanisms.fourier_sb import amplitude, mixed_task, phase_task, positional_spectrum, synthesize


@pytest.mark.parametrize("beta", [0.0, 1.0, 2.0])
def test_signals_have_unit_variance_and_the_requested_spectrum(beta):
    x, y = phase_task(2000, 32, beta, seed=0)
    assert x.var().item() == pytest.approx(1.0, rel=0.02)
    # every row has exactly the amplitude A: |rfft| matches it in both classes (phase-only task)
    amp = torch.fft.rfft(x.double(), norm="ortho").abs()
    assert torch.allclose(amp, amplitude(32, beta).expand_as(amp), atol=1e-4)
    a = amplitude(32, beta)
    if beta > 0:
        assert a[2] / a[1] == pytest.approx(2 ** (-beta / 2))


def test_phase_coupled_rows_are_localized_bumps():
    # flat spectrum, no phase noise: every frequency peaks at t0, so the signal is a spike at t0
    g = torch.Generator().manual_seed(0)
    x, y = phase_task(50, 16, 0.0, seed=1, phase_noise=0.0)
    spiky = x[y == 1]
    assert (spiky.abs().max(1).values > 3.0).all()
    assert (x[y == 0].abs().max(1).values < spiky.abs().max(1).values.min()).float().mean() > 0.5
    del g


def test_reliance_probes_isolate_one_cue():
    x, y = mixed_task(400, 32, 1.0, seed=0, probe="phase_only")
    amp = torch.fft.rfft(x.double(), norm="ortho").abs()
    assert torch.allclose(amp[y == 0].mean(0), amp[y == 1].mean(0), atol=1e-4)  # amplitude carries no label
    x, y = mixed_task(400, 32, 1.0, seed=0, probe="amplitude_only")
    amp = torch.fft.rfft(x.double(), norm="ortho").abs()
    assert not torch.allclose(amp[y == 0][0], amp[y == 1][0], atol=1e-3)


def test_positional_spectrum_recovers_a_known_exponent():
    N = 64
    spec = amplitude(N, 1.5).unsqueeze(0)
    g = torch.Generator().manual_seed(0)
    ph = (torch.rand(200 * 3, N // 2 + 1, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
    x = synthesize(spec, ph, N).view(200, 3, N).transpose(1, 2)  # [seq, pos, d]
    assert positional_spectrum(x)["beta"] == pytest.approx(1.5, abs=0.05)


def test_bad_input():
    with pytest.raises(ValueError, match="even"):
        amplitude(7, 1.0)
    with pytest.raises(ValueError, match="phase_noise"):
        phase_task(4, 16, 0.0, 0, phase_noise=2.0)
    with pytest.raises(ValueError, match="probe"):
        mixed_task(4, 16, 0.0, 0, probe="both")
    with pytest.raises(ValueError, match="n_pos"):
        positional_spectrum(torch.zeros(2, 3, 4))
