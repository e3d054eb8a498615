"""Coh: the coherence objective (Gaukstad et al., ICML 2026; arXiv 2606.02841). No official code; this
follows the paper note quoted in the research spec, with the unspecified constants chosen here.

For a non-negative activation matrix M [B, L] (rows r_i: samples, columns c_j: latents) with weights
W_ij = M_ij² / Σ_k M_ik² (rows) and V_ji = M_ij² / Σ_k M_kj² (columns), barycentres φ(r_i) = Σ_j W_ij c_j
(in column space R^B) and ψ(c_j) = Σ_i V_ji r_i (in row space R^L), four Fréchet variances:

    Var_R(i) = Σ_j W_ij ||φ(r_i) - c_j||²     locality of the latents a sample uses
    Cov_R(i) = Σ_j W_ij ||r_i - ψ(c_j)||²     covering: a sample sits near its latents' barycentres
    Var_C(j) = Σ_i V_ji ||ψ(c_j) - r_i||²     locality of the samples a latent fires on
    Cov_C(j) = Σ_i V_ji ||c_j - φ(r_i)||²

computed with the identity Σ w ||μ - x||² = Σ w ||x||² - ||μ||² (no B x L x B tensor). The loss is

    L_Coh = topk_mean_{k_R}(h(Var_R / d_C)) + topk_mean_{k_C}(h(Var_C / d_R))
          + topk_mean_{k_R}(h(Cov_R / d_R)) + topk_mean_{k_C}(h(Cov_C / d_C)),   h(x) = max(0, x - tau)

Choices made here (the paper leaves them open; all exposed in `CohFields`): d_C, d_R are the mean
squared distances between distinct columns / rows, detached (`coh_scale="sqdist"`); top-k terms are
averaged, not summed, so the loss does not grow with the batch; tau = 0.05, k_R = ceil(0.1 B),
k_C = ceil(0.25 L). Architectures: `coh` (ReLU base; with `l1_coefficient=0` a plain autoencoder),
`coh_topk`, `coh_batchtopk`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from jaxtyping import Float
from torch import Tensor

from sae._bases import as_loss_dict, make_variant


def coh_terms(M: Float[Tensor, "batch latents"], eps: float = 1e-12) -> dict[str, Tensor]:
    """The four raw (unnormalised) coherence quantities: Var_R, Cov_R [B] and Var_C, Cov_C [L]."""
    M = M.clamp_min(0)
    M2 = M.square()
    row_sq, col_sq = M2.sum(1), M2.sum(0)  # ||r_i||², ||c_j||²
    W = M2 / row_sq[:, None].clamp_min(eps)  # [B, L], rows sum to 1 (or 0 for an empty row)
    V = (M2 / col_sq[None, :].clamp_min(eps)).T  # [L, B]
    phi = W @ M.T  # [B, B]: phi[i] = Σ_j W_ij c_j
    psi = V @ M  # [L, L]: psi[j] = Σ_i V_ji r_i
    w_sum, v_sum = W.sum(1), V.sum(1)
    phi_sq, psi_sq = phi.square().sum(1), psi.square().sum(1)
    var_r = W @ col_sq - phi_sq
    var_c = V @ row_sq - psi_sq
    cov_r = row_sq * w_sum + W @ psi_sq - 2 * (W * (M @ psi.T)).sum(1)
    cov_c = col_sq * v_sum + V @ phi_sq - 2 * (V * (M.T @ phi.T)).sum(1)
    return {
        "var_r": var_r.clamp_min(0),
        "cov_r": cov_r.clamp_min(0),
        "var_c": var_c.clamp_min(0),
        "cov_c": cov_c.clamp_min(0),
    }


def mean_sq_pairwise(X: Tensor) -> Tensor:
    """Mean squared distance between distinct rows of X: (2N Σ||x||² - 2||Σx||²) / (N(N-1))."""
    n = X.shape[0]
    if n < 2:
        return X.new_ones(())
    return (2 * n * X.square().sum() - 2 * X.sum(0).square().sum()) / (n * (n - 1))


def coh_normalised(M: Tensor, scale: str = "sqdist", detach_scale: bool = True) -> dict[str, Tensor]:
    """The four quantities divided by the squared scale of the space they live in (scale-invariant)."""
    t = coh_terms(M)
    if scale == "none":
        return t
    d_rows = mean_sq_pairwise(M).clamp_min(1e-12)  # row space R^L
    d_cols = mean_sq_pairwise(M.T).clamp_min(1e-12)  # column space R^B
    if detach_scale:
        d_rows, d_cols = d_rows.detach(), d_cols.detach()
    return {
        "var_r": t["var_r"] / d_cols,
        "cov_c": t["cov_c"] / d_cols,
        "cov_r": t["cov_r"] / d_rows,
        "var_c": t["var_c"] / d_rows,
    }


def _topk_reduce(x: Tensor, k: int, reduction: str = "sum") -> Tensor:
    top = x.topk(min(max(k, 1), x.numel())).values
    return top.sum() if reduction == "sum" else top.mean()


def coh_loss(
    M: Float[Tensor, "batch latents"],
    tau: float = 0.05,
    row_frac: float = 0.1,
    col_frac: float = 0.25,
    scale: Literal["sqdist", "none"] = "sqdist",
    detach_scale: bool = True,
    reduction: Literal["sum", "mean"] = "sum",
) -> Tensor:
    """L_Coh for one batch: hinge at tau, summed (the paper's definition) over the k_R worst rows and the
    k_C worst columns of each term; `reduction="mean"` averages them instead (then lambda must be
    k_R or k_C times larger to mean the same)."""
    t = coh_normalised(M, scale, detach_scale)
    k_r, k_c = math.ceil(row_frac * M.shape[0]), math.ceil(col_frac * M.shape[1])
    h = lambda x: (x - tau).clamp_min(0)  # noqa: E731
    return (
        _topk_reduce(h(t["var_r"]), k_r, reduction)
        + _topk_reduce(h(t["var_c"]), k_c, reduction)
        + _topk_reduce(h(t["cov_r"]), k_r, reduction)
        + _topk_reduce(h(t["cov_c"]), k_c, reduction)
    )


def locality(M: Tensor) -> dict[str, float]:
    """Diagnostics: normalised locality (mean of Var_R, Var_C) and covering (mean of Cov_R, Cov_C)."""
    with torch.no_grad():
        t = coh_normalised(M.float())
        return {
            "locality": float((t["var_r"].mean() + t["var_c"].mean()) / 2),
            "covering": float((t["cov_r"].mean() + t["cov_c"].mean()) / 2),
        }


@dataclass(kw_only=True)
class CohFields:
    """Coherence regulariser settings, mixed into the base SAE's config."""

    coh_lambda: float = 1e-3
    """Weight of L_Coh (paper: 1e-3 on rotated MNIST, 1e-5 on the double circle)."""
    coh_tau: float = 0.05
    """Hinge threshold tau: rows/columns below it are not penalised (not given in the paper)."""
    coh_row_frac: float = 0.1
    """k_R = ceil(row_frac * batch) worst rows enter each row term (not given in the paper)."""
    coh_col_frac: float = 0.25
    """k_C = ceil(col_frac * d_sae) worst columns enter each column term (not given in the paper)."""
    coh_scale: str = "sqdist"
    """Normalisation: "sqdist" (mean squared pairwise distance, detached) or "none"."""
    coh_reduction: str = "sum"
    """How the k_R / k_C worst terms combine: "sum" (the paper's L_Coh, so its lambda means the same here)
    or "mean" (this toolkit's earlier choice; lambda ~k times larger for the same effect)."""

    def _check_coh(self) -> None:
        if self.coh_lambda < 0 or self.coh_tau < 0 or not (0 < self.coh_row_frac <= 1 and 0 < self.coh_col_frac <= 1):
            raise ValueError("Coh needs coh_lambda >= 0, coh_tau >= 0 and fractions in (0, 1]")
        if self.coh_reduction not in ("sum", "mean"):
            raise ValueError(f"coh_reduction must be 'sum' or 'mean', got {self.coh_reduction!r}")
        if self.coh_scale not in ("sqdist", "none"):
            raise ValueError(f"coh_scale must be 'sqdist' or 'none', got {self.coh_scale!r}")


class CohMixin:
    """Adds lambda * L_Coh over the batch's (non-negative) codes to the base SAE's losses."""

    def calculate_aux_loss(self, step_input, feature_acts, hidden_pre, sae_out):  # type: ignore[no-untyped-def]
        losses = as_loss_dict(super().calculate_aux_loss(step_input, feature_acts, hidden_pre, sae_out))
        cfg = self.cfg
        if cfg.coh_lambda:
            M = feature_acts.to_dense() if feature_acts.is_sparse else feature_acts
            losses["coh_loss"] = cfg.coh_lambda * coh_loss(
                M.reshape(-1, M.shape[-1]).float(),
                cfg.coh_tau,
                cfg.coh_row_frac,
                cfg.coh_col_frac,
                cfg.coh_scale,
                reduction=cfg.coh_reduction,
            )
        return losses


CohReLUSAE, CohReLUConfig = make_variant("coh", "relu", CohMixin, CohFields, "_check_coh", "Coh")
CohTopKSAE, CohTopKConfig = make_variant("coh_topk", "topk", CohMixin, CohFields, "_check_coh", "Coh")
CohBatchTopKSAE, CohBatchTopKConfig = make_variant(
    "coh_batchtopk", "batchtopk", CohMixin, CohFields, "_check_coh", "Coh"
)
