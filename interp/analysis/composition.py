"""Q-, K- and V-composition scores of every pair of heads (Elhage et al. 2021), in bounded memory.

    scores = composition_scores(model, "Q")      # [layer1, head1, layer2, head2], 0 unless layer1 < layer2

The score of an earlier head's OV circuit feeding a later head's QK (Q, K) or OV (V) circuit is
||left @ right||_F / (||left||_F ||right||_F), TransformerLens's `all_composition_scores`. TL builds the
[L, H, L, H] products as d_model x d_model factored matrices with an SVD each (over 10 GB on SmolLM2).
Here every circuit is a product of two thin factors, X Y with X [d_model, d_head]: a QR of the outer
factors reduces each pair to a d_head x d_head product, and left heads go through in chunks, so memory
stays at about `chunk * n_layers * n_heads * d_head^2` floats. Rotary embeddings are left out, as in TL.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from interp.wrapper.weights import expand_kv


def _factors(model) -> dict[str, Tensor]:
    """Every head's thin factors, [layer * head, ...], in float64 for stable norms of small products."""
    n = model.n_heads
    flat = lambda w: w.double().flatten(0, 1)  # noqa: E731
    return {
        "Q": flat(model.W_Q),  # [LH, d_model, d_head]
        "K": flat(expand_kv(model.W_K, n)),
        "V": flat(expand_kv(model.W_V, n)),
        "O": flat(model.W_O),  # [LH, d_head, d_model]
    }


def composition_scores(model, mode: Literal["Q", "K", "V"], chunk: int = 16) -> Tensor:
    """[n_layers, n_heads, n_layers, n_heads] composition scores (see the module docstring)."""
    if mode not in ("Q", "K", "V"):
        raise ValueError(f"mode must be 'Q', 'K' or 'V', not {mode!r}")
    f = _factors(model)
    # right circuit = P @ Z^T, with P, Z [d_model, d_head]: QK = W_Q W_K^T, QK^T = W_K W_Q^T, OV = W_V W_O
    p, z = {"Q": (f["Q"], f["K"]), "K": (f["K"], f["Q"]), "V": (f["V"], f["O"].transpose(-2, -1))}[mode]
    r_x = torch.linalg.qr(f["V"]).R  # left OV = W_V W_O: ||W_V M|| = ||R_V M||
    r_z = torch.linalg.qr(z).R  # ||M Z^T|| = ||M R_Z^T||
    left_norm = (r_x @ f["O"]).norm(dim=(-2, -1))  # ||OV||_F
    right_norm = (p @ r_z.transpose(-2, -1)).norm(dim=(-2, -1))
    n_l, n_h = model.n_layers, model.n_heads
    out = torch.zeros(n_l * n_h, n_l * n_h, dtype=torch.float64)
    right = r_z.transpose(-2, -1)  # [LH, d_head, d_head]
    for start in range(0, n_l * n_h, chunk):
        sl = slice(start, min(start + chunk, n_l * n_h))
        middle = torch.einsum("ahd,bdk->abhk", f["O"][sl], p)  # W_O1 @ P2: [chunk, LH, d_head, d_head]
        prod = torch.einsum("aih,abhk,bkj->abij", r_x[sl], middle, right)
        out[sl] = prod.norm(dim=(-2, -1)) / left_norm[sl, None] / right_norm[None, :]
    scores = out.view(n_l, n_h, n_l, n_h)
    later = torch.arange(n_l)[:, None, None, None] < torch.arange(n_l)[None, None, :, None]
    return torch.where(later, scores, torch.zeros_like(scores)).to(torch.float32)
