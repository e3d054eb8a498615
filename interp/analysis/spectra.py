"""Spectra of every head's OV and QK circuits, as TransformerLens's `FactoredMatrix` gives them.

    OV_eigenvalues(model)        # [layer, head, d_head] complex: model.OV.eigenvalues in TL
    OV_singular_values(model)    # [layer, head, d_head]: model.OV.S
    copying_scores(model)        # [layer, head]: sum(eig) / sum(|eig|) of the OV circuit (1: copies, -1: suppresses)

A circuit X @ Y with X [d_model, d_head] has at most d_head non-zero eigenvalues, those of Y @ X, and the
singular values of R_X @ Y (a QR of X), so nothing d_model x d_model is formed. QK is before rotary
embeddings; grouped-query k/v heads are repeated per query head (`expand_kv`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp.wrapper.weights import expand_kv


def _circuit(model, which: str) -> tuple[Tensor, Tensor]:
    """(X [layer, head, d_model, d_head], Y [layer, head, d_head, d_model]) with circuit = X @ Y."""
    if which == "OV":
        return expand_kv(model.W_V, model.n_heads).float(), model.W_O.float()
    if which == "QK":
        return model.W_Q.float(), expand_kv(model.W_K, model.n_heads).float().transpose(-2, -1)
    raise ValueError(f"circuit must be 'OV' or 'QK', not {which!r}")


def _eigenvalues(model, which: str) -> Tensor:
    x, y = _circuit(model, which)
    return torch.linalg.eigvals(y @ x)


def _singular_values(model, which: str) -> Tensor:
    x, y = _circuit(model, which)
    return torch.linalg.svdvals(torch.linalg.qr(x).R @ y)


def OV_eigenvalues(model) -> Tensor:  # noqa: N802 (TL's name)
    """[layer, head, d_head] complex eigenvalues of W_V @ W_O (TL: `model.OV.eigenvalues`)."""
    return _eigenvalues(model, "OV")


def QK_eigenvalues(model) -> Tensor:  # noqa: N802
    """[layer, head, d_head] complex eigenvalues of W_Q @ W_K^T (TL: `model.QK.eigenvalues`)."""
    return _eigenvalues(model, "QK")


def OV_singular_values(model) -> Tensor:  # noqa: N802
    """[layer, head, d_head] singular values of W_V @ W_O, descending (TL: `model.OV.S`)."""
    return _singular_values(model, "OV")


def QK_singular_values(model) -> Tensor:  # noqa: N802
    """[layer, head, d_head] singular values of W_Q @ W_K^T, descending (TL: `model.QK.S`)."""
    return _singular_values(model, "QK")


def copying_scores(model) -> Tensor:
    """[layer, head]: sum of the OV eigenvalues' real parts over the sum of their moduli (the Main Demo's
    positive-eigenvalue measure of copying)."""
    eig = OV_eigenvalues(model)
    return eig.real.sum(-1) / eig.abs().sum(-1)
