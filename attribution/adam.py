"""LESS-style Adam-normalised gradient features (Xia et al. 2024, "LESS"), for DRA and TracIn representations.

A model trained with Adam moves along `m / (sqrt(v) + eps)`, not along the raw gradient, so LESS compares
training examples by the update each would cause from the optimiser state at a checkpoint:

    m' = b1 m + (1 - b1) g,   v' = b2 v + (1 - b2) g^2,   Gamma(z) = m' / (sqrt(v') + eps)

with `m, v` the checkpoint's Adam moments of each parameter and `g` the example's gradient. `Gamma` is
elementwise, so it cannot be taken inside a TensorSketch: exact per-example gradients of the chosen
modules are formed a batch at a time, normalised, then CountSketched (a seeded random projection per
parameter tensor, as LESS projects with a random matrix) to `sketch_dim` per tensor.

The moments come from `adam_state.safetensors`, which `attribution.train.save_checkpoint` writes beside
each checkpoint (tensors `NAME.exp_avg` / `NAME.exp_avg_sq`, metadata betas, eps, step).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

ADAM_STATE = "adam_state.safetensors"


@dataclass
class AdamState:
    """First and second Adam moments per parameter name, and the optimiser's betas and eps."""

    exp_avg: dict[str, Tensor]
    exp_avg_sq: dict[str, Tensor]
    betas: tuple[float, float]
    eps: float

    @classmethod
    def load(cls, folder: str | Path) -> AdamState:
        path = Path(folder) / ADAM_STATE
        if not path.is_file():
            raise FileNotFoundError(
                f"no {ADAM_STATE} in {folder}: Adam normalisation needs the optimiser state at a "
                "checkpoint (attribution.train.save_checkpoint(..., optimizer=opt) writes it)"
            )
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            meta = json.loads((f.metadata() or {})["json"])
            t = {k: f.get_tensor(k) for k in f.keys()}
        avg = {k.removesuffix(".exp_avg"): v for k, v in t.items() if k.endswith(".exp_avg")}
        sq = {k.removesuffix(".exp_avg_sq"): v for k, v in t.items() if k.endswith(".exp_avg_sq")}
        return cls(avg, sq, tuple(meta["betas"]), float(meta["eps"]))


def save_adam_state(model: nn.Module, optimizer: torch.optim.Optimizer, folder: str | Path) -> None:
    """Write the Adam moments of `model`'s parameters (by name) to `folder/adam_state.safetensors`."""
    from safetensors.torch import save

    from interp.store.atomic import atomic_write_bytes

    tensors, group = {}, optimizer.param_groups[0]
    for name, p in model.named_parameters():
        st = optimizer.state.get(p, {})
        if "exp_avg" in st:
            tensors[f"{name}.exp_avg"] = st["exp_avg"].detach().float().cpu().contiguous()
            tensors[f"{name}.exp_avg_sq"] = st["exp_avg_sq"].detach().float().cpu().contiguous()
    meta = {"betas": list(group.get("betas", (0.9, 0.999))), "eps": group.get("eps", 1e-8)}
    atomic_write_bytes(
        Path(folder) / ADAM_STATE, save(tensors or {"_": torch.zeros(1)}, metadata={"json": json.dumps(meta)})
    )


def adam_normalise(g: Tensor, m: Tensor, v: Tensor, betas: tuple[float, float], eps: float) -> Tensor:
    """Gamma = m' / (sqrt(v') + eps) per example; g [batch, d], m and v [d]."""
    b1, b2 = betas
    m2 = b1 * m + (1 - b1) * g
    v2 = b2 * v + (1 - b2) * g * g
    return m2 / (v2.sqrt() + eps)


def adam_gradient_representations(
    model,
    ids: Tensor,
    mask: Tensor,
    modules: Sequence[str],
    state: AdamState,
    sketch_dim: int | None = 4096,
    seed: int = 0,
    batch_size: int = 16,
) -> Tensor:
    """[n, dim]: per-example Adam-normalised gradients of the named modules, CountSketched per tensor."""
    from attribution.capture import GradientFeaturizer
    from attribution.sketch import CountHash, count_sketch, param_seed

    hf = model.hf_model
    names = dict(hf.named_modules())
    unknown = [m for m in modules if m not in names]
    if unknown:
        raise ValueError(f"no module named {unknown} in {type(hf).__name__}")
    feat = GradientFeaturizer({m: [names[m]] for m in modules}, sketch_dim=None, seed=seed)
    tensors = feat.param_tensors()
    lacking = [f"{g}.{part}" for g, part, _ in tensors if f"{g}.{part}" not in state.exp_avg]
    if lacking:
        raise ValueError(f"the Adam state has no moments for {lacking[:4]}: it was saved from another model")
    device = next(hf.parameters()).device
    m_all = torch.cat([state.exp_avg[f"{g}.{part}"].flatten() for g, part, _ in tensors]).to(device)
    v_all = torch.cat([state.exp_avg_sq[f"{g}.{part}"].flatten() for g, part, _ in tensors]).to(device)
    sizes = [p.numel() for _, _, p in tensors]
    hashes = [
        CountHash.make(n, sketch_dim, param_seed(seed, f"adam|{g}", part), device) if sketch_dim else None
        for n, (g, part, _) in zip(sizes, tensors)
    ]
    out = []
    for i in range(0, len(ids), batch_size):
        with torch.no_grad():
            g = feat(hf, ids[i : i + batch_size].to(device), mask[i : i + batch_size].to(device)).sum(1).float()
        gamma = adam_normalise(g, m_all, v_all, state.betas, state.eps)
        if sketch_dim is None:
            out.append(gamma.cpu())
            continue
        parts = torch.split(gamma, sizes, dim=-1)
        out.append(torch.cat([count_sketch(x, h) for x, h in zip(parts, hashes)], -1).cpu())
    return torch.cat(out)
