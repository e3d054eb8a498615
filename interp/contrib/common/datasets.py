"""sklearn's bundled data sets (no download) as float32 tensors, scaled the way the papers use them.

    x, y = digits()                     # [1797, 64] in [0, 1], labels 0-9
    x, y = digits(scale="signed")       # pixels in [-1, 1] (the diffusion papers)
    imgs, y = digits(images=True)       # [1797, 1, 8, 8] in [0, 1]

The 8x8 digits hold integers 0-16, so every scaling here is exact in float32.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor


def digits(scale: Literal["unit", "signed"] = "unit", images: bool = False) -> tuple[Tensor, Tensor]:
    """sklearn's 8x8 digits: (pixels float32, labels int64), pixels /16 ("unit", in [0, 1]) or /8 - 1
    ("signed", in [-1, 1]); flat [n, 64] rows, or [n, 1, 8, 8] images when `images`."""
    from sklearn.datasets import load_digits

    if scale not in ("unit", "signed"):
        raise ValueError(f"scale is 'unit' or 'signed'; got {scale!r}")
    d = load_digits()
    raw = torch.tensor(d.images if images else d.data, dtype=torch.float32)
    x = raw / 16.0 if scale == "unit" else raw / 8.0 - 1.0
    return (x.unsqueeze(1) if images else x), torch.tensor(d.target)


def standardise_columns(x: Tensor, eps: float = 1e-8) -> Tensor:
    """Columns to mean 0, standard deviation 1, in float64 (a constant column stays 0)."""
    x = x.double()
    return (x - x.mean(0)) / x.std(0).clamp_min(eps)


def diabetes() -> tuple[Tensor, Tensor]:
    """sklearn's diabetes regression set, both sides standardised, float64: (x [442, 10], y [442])."""
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    return standardise_columns(torch.tensor(x)), standardise_columns(torch.tensor(y)[:, None])[:, 0]
