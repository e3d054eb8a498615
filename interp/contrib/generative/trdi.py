"""TRDI, Timestep Rescheduling in Diffusion Inversion (arXiv 2606.15389): choose *which* K timesteps a
DDIM inversion visits, instead of a uniform grid.

DDIM inversion runs the deterministic sampler backwards, x_{t_j} = √ᾱ_j x̂_0(x_{t_i}) + √(1-ᾱ_j) ε(x_{t_i}),
evaluating ε at the *start* of each jump; the mismatch with ε(x_{t_j}) makes every jump t_i -> t_j leave a
deviation, and these add up. TRDI measures that deviation on calibration images, cost(i -> j) =
E‖DDIM(x_{t_j} -> t_i) - x_{t_i}‖² after one inversion jump (the one-jump round trip), on a fine candidate
grid, then picks the K-jump path of minimal total cost by dynamic programming (after a global stretch
of the grid; here the DP runs over the whole candidate grid, which contains every stretched grid).
Zero extra parameters, zero extra cost at inference.

    sched = NoiseSchedule(1000)
    C = jump_costs(eps_model, sched, x_calib_states, grid)   # [N, N], +inf below the diagonal
    path = best_path(C, K)                                    # K+1 grid indices from 0 to N-1
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

EpsModel = Callable[[Tensor, Tensor], Tensor]
"""ε-prediction network: (x [B, d], t [B] integer timesteps) -> ε̂ [B, d]."""


class NoiseSchedule:
    """DDPM linear β schedule β_t ∈ [1e-4, 0.02] over T steps; ᾱ_t = Π (1 - β)."""

    def __init__(self, T: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02):
        if T < 2 or not 0 < beta_start <= beta_end < 1:
            raise ValueError(f"need T >= 2 and 0 < beta_start <= beta_end < 1; got {T}, {beta_start}, {beta_end}")
        self.T = T
        self.betas = torch.linspace(beta_start, beta_end, T, dtype=torch.float64)
        self.abar = torch.cumprod(1 - self.betas, 0)


def ddim_jump(eps_model: EpsModel, sched: NoiseSchedule, x: Tensor, t_from: int, t_to: int) -> Tensor:
    """One deterministic DDIM jump t_from -> t_to (either direction), ε evaluated at (x, t_from)."""
    a_f, a_t = sched.abar[t_from], sched.abar[t_to]
    eps = eps_model(x, torch.full((len(x),), t_from, dtype=torch.long)).double()
    x0 = (x.double() - (1 - a_f).sqrt() * eps) / a_f.sqrt()
    return (a_t.sqrt() * x0 + (1 - a_t).sqrt() * eps).to(x.dtype)


def invert(eps_model: EpsModel, sched: NoiseSchedule, x0: Tensor, path: list[int]) -> Tensor:
    """DDIM inversion along increasing timesteps `path` (path[0] is the clean image's timestep)."""
    _check_path(path, sched)
    x = x0
    for a, b in zip(path[:-1], path[1:]):
        x = ddim_jump(eps_model, sched, x, a, b)
    return x


def reconstruct(eps_model: EpsModel, sched: NoiseSchedule, xT: Tensor, path: list[int]) -> Tensor:
    """DDIM sampling back down the same path."""
    _check_path(path, sched)
    x = xT
    for a, b in zip(path[::-1][:-1], path[::-1][1:]):
        x = ddim_jump(eps_model, sched, x, a, b)
    return x


def _check_path(path: list[int], sched: NoiseSchedule) -> None:
    if len(path) < 2 or any(b <= a for a, b in zip(path[:-1], path[1:])) or path[0] < 0 or path[-1] >= sched.T:
        raise ValueError(f"path must be >= 2 strictly increasing timesteps in 0..{sched.T - 1}; got {path}")


@torch.no_grad()
def jump_costs(eps_model: EpsModel, sched: NoiseSchedule, states: Tensor, grid: list[int]) -> Tensor:
    """cost[i, j] (i < j) = mean ‖DDIM(invert(x_{g_i} -> g_j) -> g_i) - x_{g_i}‖² over calibration states.

    states: [N, B, d], the calibration images' states at every grid timestep (from a fine inversion)."""
    N = len(grid)
    if states.ndim != 3 or states.shape[0] != N:
        raise ValueError(f"states must be [len(grid)={N}, B, d]; got {tuple(states.shape)}")
    C = torch.full((N, N), math.inf, dtype=torch.float64)
    for i in range(N - 1):
        xi = states[i]
        for j in range(i + 1, N):
            back = ddim_jump(eps_model, sched, ddim_jump(eps_model, sched, xi, grid[i], grid[j]), grid[j], grid[i])
            C[i, j] = float(((back - xi) ** 2).sum(1).mean())
    return C


def best_path(C: Tensor, K: int) -> list[int]:
    """Indices 0 = p_0 < p_1 < ... < p_K = N-1 minimising Σ C[p_k, p_{k+1}] (dynamic programming, O(K N²))."""
    N = C.shape[0]
    if C.ndim != 2 or C.shape[1] != N:
        raise ValueError(f"C must be square; got {tuple(C.shape)}")
    if not 1 <= K <= N - 1:
        raise ValueError(f"K must be in 1..{N - 1} for a grid of {N} points; got {K}")
    best = torch.full((K + 1, N), math.inf, dtype=torch.float64)
    arg = torch.zeros((K + 1, N), dtype=torch.long)
    best[0, 0] = 0.0
    for k in range(1, K + 1):
        tot = best[k - 1].unsqueeze(1) + C  # [from, to]
        best[k], arg[k] = tot.min(0)
    path = [N - 1]
    for k in range(K, 0, -1):
        path.append(int(arg[k, path[-1]]))
    return path[::-1]


def path_cost(C: Tensor, path: list[int]) -> float:
    return float(sum(C[a, b] for a, b in zip(path[:-1], path[1:])))
