"""FourierSB: amplitude-before-phase simplicity bias of networks trained on translation-invariant signals.

Paper: *A Fourier perspective on the learning dynamics of neural networks: from sample complexities to
mechanistic insights* (arXiv 2605.16913; Ricci, Merger, Goldt; no public code). For translation-invariant
inputs x = IFFT(A(f) e^{iφ(f)}), the amplitude spectrum A carries all second-order statistics and the
phases φ the rest. Claims: with isotropic (flat-spectrum) inputs, online SGD needs n ≫ N³ log² N samples
to learn a phase-only task; power-law spectra A(f)² ∝ f^-β speed phase learning dramatically; on data
where both carry the label, networks rely on amplitude before phase.

This file generates such signals and the reliance probes:

- `signals(n, N, beta, coupled, ...)`: real signals of length N with power spectrum ∝ f^-β (unit
  variance per sample point); `coupled` rows get phase-coupled ("edge-like") phases, φ(f) = -2π f t0 / N
  + noise (all frequencies aligned at a random t0), the others uniformly random phases. Same amplitude,
  so a phase-only task has identical second-order statistics in both classes.
- `amplitude_only` / `phase_only` test sets for a model trained on data where both cues differ:
  random phases with the class amplitudes (what amplitude alone predicts), or the class phases with
  the common amplitude (what phase alone predicts).
- `positional_spectrum`: the power spectrum along positions of cached activations [seq, pos, d] and
  its fitted power-law exponent β (a read-only link to a real model's internals).

    x, y = phase_task(n=256, N=64, beta=2.0, seed=0)       # y = 1 for the phase-coupled rows
    beta_hat = positional_spectrum(acts)["beta"]           # acts: [n_seq, n_pos, d]
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def amplitude(N: int, beta: float) -> Tensor:
    """A(f) for the rfft frequencies f = 0..N/2 with A² ∝ f^-β, scaled so signals have unit variance per
    sample point. A(0) = A(N/2) = 0 (zero-mean signals; the real-valued Nyquist bin would carry no phase)."""
    if N < 4 or N % 2:
        raise ValueError(f"N={N} must be an even number >= 4")
    f = torch.arange(N // 2 + 1, dtype=torch.float64)
    a = torch.zeros_like(f)
    a[1:-1] = f[1:-1].pow(-beta / 2)
    return a / _variance(a, N).sqrt()


def _variance(a: Tensor, N: int) -> Tensor:
    """Per-point variance of irfft(A e^{iφ}, norm="ortho") with random φ: 2 Σ_{0<f<N/2} A² / N."""
    return 2 * a[1:-1].pow(2).sum() / N


def _phases(n: int, N: int, coupled: Tensor, noise: float, g: torch.Generator) -> Tensor:
    k = N // 2 + 1
    rand = (torch.rand(n, k, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
    t0 = torch.randint(N, (n, 1), generator=g).double()
    f = torch.arange(k, dtype=torch.float64)
    aligned = -2 * math.pi * f * t0 / N + noise * (torch.rand(n, k, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
    return torch.where(coupled.unsqueeze(1), aligned, rand)


def synthesize(amp: Tensor, phase: Tensor, N: int) -> Tensor:
    """Real signals [n, N] from rfft amplitudes [n or 1, N/2+1] and phases [n, N/2+1]."""
    spec = torch.polar(amp.expand_as(phase).double().contiguous(), phase)
    return torch.fft.irfft(spec, n=N, norm="ortho").float()


def phase_task(n: int, N: int, beta: float, seed: int, phase_noise: float = 0.5) -> tuple[Tensor, Tensor]:
    """Balanced phase-only task: same amplitude f^-β/2; label 1 = phase-coupled, 0 = random phases."""
    if n < 1 or not 0 <= phase_noise <= 1:
        raise ValueError(f"need n >= 1 and 0 <= phase_noise <= 1; got n={n}, phase_noise={phase_noise}")
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(2, (n,), generator=g)
    x = synthesize(amplitude(N, beta).unsqueeze(0), _phases(n, N, y.bool(), phase_noise, g), N)
    return x, y


def mixed_task(
    n: int, N: int, beta: float, seed: int, delta_beta: float = 0.5, phase_noise: float = 0.5, probe: str | None = None
) -> tuple[Tensor, Tensor]:
    """Both cues: label 1 has spectrum slope β + Δβ and coupled phases, label 0 slope β and random phases.

    probe="amplitude_only": random phases for all, class amplitudes; probe="phase_only": the mean of the two
    amplitudes for all, class phases. Labels are the class in every case.
    """
    if probe not in (None, "amplitude_only", "phase_only"):
        raise ValueError(f"probe must be None, 'amplitude_only' or 'phase_only'; got {probe!r}")
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(2, (n,), generator=g)
    a0, a1 = amplitude(N, beta), amplitude(N, beta + delta_beta)
    amp = torch.where(y.bool().unsqueeze(1), a1, a0)
    coupled = y.bool()
    if probe == "amplitude_only":
        coupled = torch.zeros_like(coupled)
    if probe == "phase_only":
        mean = (a0 + a1) / 2
        amp = (mean / _variance(mean, N).sqrt()).unsqueeze(0).expand(n, -1)
    return synthesize(amp, _phases(n, N, coupled, phase_noise, g), N), y


def positional_spectrum(acts: Tensor) -> dict[str, object]:
    """Mean power over sequences and channels at each positional frequency of acts [n_seq, n_pos, d]
    (each channel's mean over positions removed), and the least-squares slope β of log power vs log f."""
    if acts.ndim != 3 or acts.shape[1] < 4:
        raise ValueError(f"acts must be [n_seq, n_pos >= 4, d]; got {tuple(acts.shape)}")
    x = acts.double() - acts.double().mean(1, keepdim=True)
    power = torch.fft.rfft(x, dim=1, norm="ortho").abs().pow(2).mean((0, 2))
    f = torch.arange(len(power), dtype=torch.float64)
    lf, lp = f[1:-1].log(), power[1:-1].clamp_min(1e-30).log()  # skip DC and the (Nyquist) top bin
    slope = float(((lf - lf.mean()) * (lp - lp.mean())).sum() / (lf - lf.mean()).pow(2).sum())
    return {"power": power.tolist(), "beta": -slope}
