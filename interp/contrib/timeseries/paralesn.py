"""ParalESN (arXiv 2601.22296): echo-state networks whose reservoir is a complex *diagonal* linear
recurrence, so the whole sequence is computed with an associative (parallel) scan instead of a loop.

    h_t = Λ ⊙ h_{t-1} + leak · (W_in x_t + b),     Λ = r e^{iθ},  r ∈ [ρ_min, ρ_max], θ ∈ [0, 2π)

The readout is ridge regression on [Re h, Im h]. Deeper layers (as in the official package
NennoMP/paralesn, `layers/_reservoir.py`) take the previous layer's features through an untrained
nonlinear mixing map and a ring input topology (a roll plus a per-unit scale).

    cfg = ParalESNConfig(n_units=500)
    esn = ParalESN(cfg, d_in=1)
    H = esn.features(x)                  # [T, 2·n_units·n_layers] real features
    W = ridge_readout(H[wash:], y[wash:], alpha=1e-6)

`scan_linear` (Hillis-Steele doubling: ⌈log2 T⌉ vectorised steps, the GPU form) and `chunked_scan_linear`
(a two-level blocked scan, O(T) work in ~2√T steps, the fast form on a CPU) are the parallel paths;
`sequential_linear` is the plain loop both are tested against. `ClassicESN` is the tanh baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from interp.contrib.common.ridge import ridge, with_bias


@dataclass
class ParalESNConfig:
    """Hyper-parameters of a (deep) ParalESN reservoir."""

    n_units: int = 500
    """Complex reservoir units per layer (features are 2 x n_units per layer: real and imaginary parts)."""
    n_layers: int = 1
    """Stacked reservoirs; layers after the first take the mixed features of the one below."""
    rho_min: float = 0.0
    """Smallest eigenvalue modulus |λ| (0 <= rho_min <= rho_max)."""
    rho_max: float = 0.99
    """Largest eigenvalue modulus; below 1 for the echo-state property."""
    leak: float = 1.0
    """Leak factor multiplying the input drive, in (0, 1]."""
    input_scaling: float = 1.0
    """Scale of the uniform [-1, 1] input weights."""
    bias_scaling: float = 0.0
    """Scale of the uniform [-1, 1] bias."""
    seed: int = 0
    """Seed of the random (untrained) reservoir."""

    def __post_init__(self):
        if self.n_units <= 0 or self.n_layers <= 0:
            raise ValueError(f"n_units and n_layers must be positive; got {self.n_units}, {self.n_layers}")
        if not 0.0 <= self.rho_min <= self.rho_max:
            raise ValueError(f"need 0 <= rho_min <= rho_max; got {self.rho_min}, {self.rho_max}")
        if self.rho_max >= 1.0:
            raise ValueError(f"rho_max must be below 1 (echo-state property); got {self.rho_max}")
        if not 0.0 < self.leak <= 1.0:
            raise ValueError(f"leak must be in (0, 1]; got {self.leak}")


def _check_seq(a: Tensor, u: Tensor) -> None:
    if u.ndim != 2 or u.shape[0] == 0:
        raise ValueError(f"u must be [T, n] with T >= 1; got shape {tuple(u.shape)}")
    if a.shape != (u.shape[1],):
        raise ValueError(f"a must be [n] = [{u.shape[1]}] (a diagonal recurrence); got {tuple(a.shape)}")


def sequential_linear(a: Tensor, u: Tensor, h0: Tensor | None = None) -> Tensor:
    """Reference loop: h_t = a ⊙ h_{t-1} + u_t, h_{-1} = h0 (zeros). a [n], u [T, n] -> h [T, n]."""
    _check_seq(a, u)
    h = torch.zeros_like(u[0]) if h0 is None else h0
    out = torch.empty_like(u)
    for t in range(u.shape[0]):
        h = a * h + u[t]
        out[t] = h
    return out


def scan_linear(a: Tensor, u: Tensor, h0: Tensor | None = None) -> Tensor:
    """The same recurrence as an associative scan over pairs (A, B) with (A1,B1)∘(A2,B2) = (A2A1, A2B1+B2).

    Hillis-Steele doubling: at offset d every position folds in the prefix ending d steps earlier, so after
    ⌈log2 T⌉ vectorised steps position t holds (a^{t+1}, h_t). Work O(T log T), depth O(log T).
    """
    _check_seq(a, u)
    T = u.shape[0]
    b = u.clone()
    if h0 is not None:
        b[0] = b[0] + a * h0
    A = a.unsqueeze(0).expand(T, -1).clone()
    d = 1
    while d < T:
        b_new = b.clone()
        b_new[d:] = A[d:] * b[:-d] + b[d:]
        A_new = A.clone()
        A_new[d:] = A[d:] * A[:-d]
        A, b = A_new, b_new
        d *= 2
    return b


def chunked_scan_linear(a: Tensor, u: Tensor, h0: Tensor | None = None, chunk: int | None = None) -> Tensor:
    """The same recurrence as a two-level blocked scan, the work-efficient form on a CPU: split T into m chunks
    of C (default ⌈√T⌉), run the recurrence inside all chunks at once (C vectorised steps over m chunks),
    carry the chunk end states across chunks (m steps), then add a^{k+1}·carry to position k of each chunk.
    O(T) work in C + m ≈ 2√T vectorised steps instead of T."""
    _check_seq(a, u)
    T, n = u.shape
    C = chunk or max(1, math.isqrt(T - 1) + 1)
    if C <= 0:
        raise ValueError(f"chunk must be positive; got {chunk}")
    m = -(-T // C)
    up = torch.zeros(m * C, n, dtype=u.dtype)
    up[:T] = u
    loc = up.reshape(m, C, n).clone()
    for k in range(1, C):
        loc[:, k] = a * loc[:, k - 1] + loc[:, k]
    powers = torch.cumprod(a.unsqueeze(0).expand(C, n), 0)  # a^1 .. a^C
    carry = torch.zeros(m, n, dtype=u.dtype)  # state entering each chunk
    c = torch.zeros(n, dtype=u.dtype) if h0 is None else h0.to(u.dtype)
    for j in range(m):
        carry[j] = c
        c = powers[-1] * c + loc[j, -1]
    h = loc + powers.unsqueeze(0) * carry.unsqueeze(1)
    return h.reshape(m * C, n)[:T]


def ridge_readout(H: Tensor, Y: Tensor, alpha: float = 1e-6) -> Tensor:
    """Ridge weights W ([d+1, k], last row the intercept) minimising |[H,1]W - Y|² + alpha |W|²."""
    if H.ndim != 2 or Y.shape[0] != H.shape[0] or H.shape[0] == 0:
        raise ValueError(f"H must be [T, d] and Y [T, k] with the same T >= 1; got {tuple(H.shape)}, {tuple(Y.shape)}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0; got {alpha}")
    Y2 = Y.reshape(len(Y), -1).to(H.dtype)
    return ridge(with_bias(H), Y2, alpha)


def apply_readout(H: Tensor, W: Tensor) -> Tensor:
    return torch.cat([H, torch.ones(len(H), 1, dtype=H.dtype)], 1) @ W


class ParalESN:
    """A frozen random ParalESN. `features(x, parallel=True)` runs the scan; `parallel=False` the loop."""

    def __init__(self, cfg: ParalESNConfig, d_in: int):
        if d_in <= 0:
            raise ValueError(f"d_in must be positive; got {d_in}")
        self.cfg, self.d_in = cfg, d_in
        g = torch.Generator().manual_seed(cfg.seed)
        n = cfg.n_units
        self.lams, self.w_in, self.bias, self.mix = [], [], [], []
        for layer in range(cfg.n_layers):
            r = cfg.rho_min + (cfg.rho_max - cfg.rho_min) * torch.rand(n, generator=g, dtype=torch.float64)
            th = 2 * math.pi * torch.rand(n, generator=g, dtype=torch.float64)
            self.lams.append(torch.polar(r, th))
            if layer == 0:  # dense input weights
                w = cfg.input_scaling * (2 * torch.rand(n, d_in, generator=g, dtype=torch.float64) - 1)
            else:  # ring topology: unit i reads mixed feature i-1 (a roll) with its own scale
                w = cfg.input_scaling * (2 * torch.rand(n, generator=g, dtype=torch.float64) - 1)
                # untrained mixing map from the 2n real features below to n inputs
                self.mix.append(torch.randn(2 * n, n, generator=g, dtype=torch.float64) / math.sqrt(2 * n))
            self.w_in.append(w)
            self.bias.append(cfg.bias_scaling * (2 * torch.rand(n, generator=g, dtype=torch.float64) - 1))

    def _drive(self, layer: int, z: Tensor) -> Tensor:
        if layer == 0:
            d = z @ self.w_in[0].T
        else:
            d = torch.roll(torch.tanh(z @ self.mix[layer - 1]), 1, dims=1) * self.w_in[layer]
        return (self.cfg.leak * (d + self.bias[layer])).to(torch.complex128)

    def features(self, x: Tensor, parallel: bool | str = True) -> Tensor:
        """[T, d_in] (or [T]) input -> [T, 2·n_units·n_layers] real features [Re h, Im h] of every layer.

        parallel: True / "chunked" (blocked scan, fastest on a CPU), "doubling" (Hillis-Steele, the GPU
        form), False (the sequential loop)."""
        x = x.double().reshape(len(x), -1) if x.ndim == 1 else x.double()
        if x.ndim != 2 or x.shape[1] != self.d_in or len(x) == 0:
            raise ValueError(f"x must be [T, {self.d_in}] with T >= 1; got {tuple(x.shape)}")
        run = {
            True: chunked_scan_linear,
            "chunked": chunked_scan_linear,
            "doubling": scan_linear,
            False: sequential_linear,
        }.get(parallel)
        if run is None:
            raise ValueError(f"parallel must be True, False, 'chunked' or 'doubling'; got {parallel!r}")
        feats, z = [], x
        for layer in range(self.cfg.n_layers):
            h = run(self.lams[layer], self._drive(layer, z))
            z = torch.cat([h.real, h.imag], 1)
            feats.append(z)
        return torch.cat(feats, 1)


class ClassicESN:
    """The baseline: leaky tanh ESN, x_t = (1-a)x_{t-1} + a tanh(W x_{t-1} + W_in u_t + b), W dense random
    rescaled to spectral radius rho. Inherently sequential (the nonlinearity blocks a scan)."""

    def __init__(
        self, n_units: int, d_in: int, rho: float = 0.9, leak: float = 1.0, input_scaling: float = 1.0, seed: int = 0
    ):
        if n_units <= 0 or d_in <= 0 or not 0 < leak <= 1 or rho <= 0:
            raise ValueError("need n_units, d_in, rho > 0 and leak in (0, 1]")
        g = torch.Generator().manual_seed(seed)
        W = torch.randn(n_units, n_units, generator=g, dtype=torch.float64)
        self.W = W * (rho / torch.linalg.eigvals(W).abs().max())
        self.w_in = input_scaling * (2 * torch.rand(n_units, d_in, generator=g, dtype=torch.float64) - 1)
        self.leak, self.d_in = leak, d_in

    def features(self, x: Tensor) -> Tensor:
        x = x.double().reshape(len(x), -1)
        if x.shape[1] != self.d_in or len(x) == 0:
            raise ValueError(f"x must be [T, {self.d_in}] with T >= 1; got {tuple(x.shape)}")
        drive = x @ self.w_in.T
        h = torch.zeros(self.W.shape[0], dtype=torch.float64)
        out = torch.empty(len(x), self.W.shape[0], dtype=torch.float64)
        WT = self.W.T.contiguous()
        for t in range(len(x)):
            h = (1 - self.leak) * h + self.leak * torch.tanh(h @ WT + drive[t])
            out[t] = h
        return out


def mackey_glass(
    n: int, tau: int = 17, dt: float = 0.1, sample: int = 10, seed: int = 0, washout: int = 1000
) -> Tensor:
    """The Mackey-Glass series dx/dt = 0.2 x(t-τ) / (1 + x(t-τ)^10) - 0.1 x (Euler, step dt, one sample every
    `sample` steps = 1 time unit), n samples after `washout` samples, from a random constant history."""
    if n <= 0 or tau <= 0 or dt <= 0 or sample <= 0:
        raise ValueError("n, tau, dt and sample must be positive")
    g = torch.Generator().manual_seed(seed)
    lag = int(round(tau / dt))
    total = (n + washout) * sample
    x = [1.2 + 0.2 * (torch.rand(1, generator=g).item() - 0.5)] * (lag + 1)
    for _ in range(total):
        xl = x[-lag - 1]
        x.append(x[-1] + dt * (0.2 * xl / (1 + xl**10) - 0.1 * x[-1]))
    s = torch.tensor(x[lag + 1 :: sample], dtype=torch.float64)
    return s[washout : washout + n]


def nrmse(pred: Tensor, target: Tensor) -> float:
    """Root mean squared error over the target's standard deviation."""
    return float(((pred.reshape(-1) - target.reshape(-1)) ** 2).mean().sqrt() / target.std())


def memory_capacity(
    features_fn, T: int = 3000, max_delay: int = 100, washout: int = 200, seed: int = 0, alpha: float = 1e-6
) -> float:
    """Jaeger's MC = Σ_k r²(u_{t-k}, ŷ_k(t)), inputs uniform in [-0.8, 0.8], linear readouts trained on the first
    half and scored on the second half."""
    g = torch.Generator().manual_seed(seed)
    u = 1.6 * torch.rand(T, generator=g, dtype=torch.float64) - 0.8
    H = features_fn(u.unsqueeze(1))
    rows = torch.arange(washout + max_delay, T)
    half = len(rows) // 2
    tr, te = rows[:half], rows[half:]
    Y = torch.stack([u[rows - k] for k in range(1, max_delay + 1)], 1)
    W = ridge_readout(H[tr], Y[:half], alpha)
    P = apply_readout(H[te], W)
    Yt = Y[half:]
    pc, yc = P - P.mean(0), Yt - Yt.mean(0)
    r2 = (pc * yc).sum(0) ** 2 / ((pc**2).sum(0) * (yc**2).sum(0))
    return float(r2.sum())
