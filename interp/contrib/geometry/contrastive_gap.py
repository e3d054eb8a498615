"""InfoNCE-Geo: modality-gap and energy diagnostics for two-tower embeddings.

Paper: *The Geometric Mechanics of Contrastive Representation Learning: Alignment Potentials, Entropic
Dispersion, and Cross-modal Divergence* (arXiv 2601.19597). No official code.

In the large-batch limit InfoNCE is an energy on the representation measures: an alignment potential
(-<x, y>/tau over positive pairs) plus an entropic dispersion term (log E_y' exp(<x, y'>/tau)). With two
towers a negative symmetric-KL coupling between the two marginals keeps them apart: pairwise alignment
does not close the modality gap. The diagnostics below measure that gap on paired embeddings x_i <-> y_i
(e.g. cached image/text embeddings, or two layers, or two models):

- `centroid_gap`: geodesic angle and chord between the normalised centroids of the two marginals;
- `modality_separability`: held-out accuracy of a linear probe telling the modalities apart;
- `kde_symmetric_kl`, `mmd`: divergences between the marginals on the sphere (von Mises-Fisher kernel);
- `alignment`, `uniformity` (Wang & Isola) and `infonce_energy` (the two energy terms);
- `retrieval_top1`: cross-modal retrieval accuracy.

    >>> report = gap_report(img_emb, txt_emb, tau=0.1)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def _pair(x: Tensor, y: Tensor, paired: bool = True) -> tuple[Tensor, Tensor]:
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, Tensor) or t.ndim != 2:
            raise ValueError(f"{name} must be a 2-D tensor [n, d]; got {getattr(t, 'shape', type(t))}")
        if not torch.isfinite(t).all():
            raise ValueError(f"{name} holds NaN or inf values")
        if (t.norm(dim=1) == 0).any():
            raise ValueError(f"{name} has all-zero rows, which have no direction on the sphere; drop them")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must live in the same space; got d={x.shape[1]} and d={y.shape[1]}")
    if paired and x.shape[0] != y.shape[0]:
        raise ValueError(f"paired diagnostics need as many x as y rows; got {x.shape[0]} and {y.shape[0]}")
    return F.normalize(x.double(), dim=1), F.normalize(y.double(), dim=1)


def centroid_gap(x: Tensor, y: Tensor) -> dict[str, float]:
    """Centroids of the normalised embeddings: the angle between them (radians), their Euclidean distance
    (the usual "modality gap" vector length) and their norms (near 0 = spread over the whole sphere)."""
    x, y = _pair(x, y, paired=False)
    cx, cy = x.mean(0), y.mean(0)
    cos = F.cosine_similarity(cx, cy, dim=0).clamp(-1, 1)
    return {
        "geodesic": float(torch.arccos(cos)),
        "euclidean": float((cx - cy).norm()),
        "norm_x": float(cx.norm()),
        "norm_y": float(cy.norm()),
    }


def alignment(x: Tensor, y: Tensor, alpha: float = 2.0) -> float:
    """E ||x_i - y_i||^alpha over positive pairs (normalised)."""
    x, y = _pair(x, y)
    return float((x - y).norm(dim=1).pow(alpha).mean())


def uniformity(x: Tensor, t: float = 2.0) -> float:
    """log E exp(-t ||x_i - x_j||^2) over distinct pairs (normalised)."""
    x, _ = _pair(x, x)
    d2 = torch.cdist(x, x).pow(2)
    off = ~torch.eye(len(x), dtype=torch.bool)
    return float(torch.logsumexp(-t * d2[off], 0) - math.log(off.sum()))


def infonce_energy(x: Tensor, y: Tensor, tau: float = 0.1) -> dict[str, float]:
    """Symmetric InfoNCE split into the alignment potential and the entropic dispersion term.

    loss = potential + dispersion, potential = -E <x_i, y_i>/tau,
    dispersion = (E_i log sum_j exp(<x_i, y_j>/tau) + E_j log sum_i exp(<x_i, y_j>/tau)) / 2.
    """
    if tau <= 0:
        raise ValueError(f"tau must be positive; got {tau}")
    x, y = _pair(x, y)
    s = x @ y.T / tau
    potential = -float(s.diagonal().mean())
    dispersion = float((torch.logsumexp(s, 1).mean() + torch.logsumexp(s, 0).mean()) / 2)
    return {"potential": potential, "dispersion": dispersion, "infonce": potential + dispersion}


def retrieval_top1(x: Tensor, y: Tensor) -> float:
    """Fraction of x_i whose nearest y (cosine) is y_i."""
    x, y = _pair(x, y)
    return float(((x @ y.T).argmax(1) == torch.arange(len(x))).double().mean())


def _log_vmf_kde(points: Tensor, centres: Tensor, kappa: float, exclude_diagonal: bool) -> Tensor:
    # log of the mean vMF kernel exp(kappa (<p, c> - 1)); normalising constants cancel in KL differences
    s = kappa * (points @ centres.T - 1.0)
    if exclude_diagonal:
        s = s.masked_fill(torch.eye(len(points), len(centres), dtype=torch.bool), float("-inf"))
        return torch.logsumexp(s, 1) - math.log(len(centres) - 1)
    return torch.logsumexp(s, 1) - math.log(len(centres))


def _is_paired(x: Tensor, y: Tensor, paired: bool | None) -> bool:
    if paired and len(x) != len(y):
        raise ValueError(f"paired=True needs as many x as y rows; got {len(x)} and {len(y)}")
    return len(x) == len(y) if paired is None else paired


def kde_symmetric_kl(x: Tensor, y: Tensor, kappa: float = 20.0, paired: bool | None = None) -> float:
    """KL(p_x || p_y) + KL(p_y || p_x) between von Mises-Fisher KDEs of the two marginals.

    Self densities are leave-one-out. With paired rows (x_i <-> y_i, the default when the sizes match) the
    partner is left out of the cross density too: an aligned partner sits next to its point and would
    otherwise make the cross density look larger than the self density.
    """
    x, y = _pair(x, y, paired=False)
    if min(len(x), len(y)) < 2:
        raise ValueError("need at least 2 points per modality")
    pr = _is_paired(x, y, paired)
    kl_xy = (_log_vmf_kde(x, x, kappa, True) - _log_vmf_kde(x, y, kappa, pr)).mean()
    kl_yx = (_log_vmf_kde(y, y, kappa, True) - _log_vmf_kde(y, x, kappa, pr)).mean()
    return float(kl_xy + kl_yx)


def mmd(x: Tensor, y: Tensor, kappa: float = 5.0, paired: bool | None = None) -> float:
    """Unbiased squared MMD with the kernel exp(kappa (<a, b> - 1)) on the sphere (partners left out of
    the cross term when the rows are paired, as in `kde_symmetric_kl`)."""
    x, y = _pair(x, y, paired=False)
    pr = _is_paired(x, y, paired)

    def k(a: Tensor, b: Tensor) -> Tensor:
        return torch.exp(kappa * (a @ b.T - 1.0))

    kxx, kyy, kxy = k(x, x), k(y, y), k(x, y)
    nx, ny = len(x), len(y)
    cross = (kxy.sum() - kxy.diagonal().sum()) / (nx * (nx - 1)) if pr else kxy.mean()
    return float(
        (kxx.sum() - kxx.diagonal().sum()) / (nx * (nx - 1))
        + (kyy.sum() - kyy.diagonal().sum()) / (ny * (ny - 1))
        - 2 * cross
    )


def modality_separability(x: Tensor, y: Tensor, steps: int = 300, seed: int = 0) -> float:
    """Held-out accuracy (half/half split) of a logistic-regression probe separating x rows from y rows."""
    x, y = _pair(x, y, paired=False)
    g = torch.Generator().manual_seed(seed)
    feats = torch.cat([x, y]).float()
    labels = torch.cat([torch.zeros(len(x)), torch.ones(len(y))])
    perm = torch.randperm(len(feats), generator=g)
    tr, te = perm[: len(perm) // 2], perm[len(perm) // 2 :]
    w = torch.zeros(feats.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    # L-BFGS with a closure, not common.fit (first-order steps over batches)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(feats[tr] @ w + b, labels[tr]) + 1e-4 * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return float((((feats[te] @ w + b) > 0).float() == labels[te]).float().mean())


def gap_report(x: Tensor, y: Tensor, tau: float = 0.1) -> dict[str, float]:
    """Every diagnostic above on one pair of paired embedding sets."""
    cg = centroid_gap(x, y)
    return {
        "centroid_angle": cg["geodesic"],
        "centroid_distance": cg["euclidean"],
        "centroid_norm_x": cg["norm_x"],
        "centroid_norm_y": cg["norm_y"],
        "modality_probe_acc": modality_separability(x, y),
        "sym_kl": kde_symmetric_kl(x, y),
        "mmd": mmd(x, y),
        "alignment": alignment(x, y),
        "uniformity_x": uniformity(x),
        "uniformity_y": uniformity(y),
        "retrieval_top1": retrieval_top1(x, y),
        **{f"energy_{k}": v for k, v in infonce_energy(x, y, tau).items()},
    }


def symmetric_infonce_loss(x: Tensor, y: Tensor, tau: float) -> Tensor:
    """The training loss (differentiable): CLIP-style symmetric InfoNCE on normalised embeddings."""
    x, y = F.normalize(x, dim=1), F.normalize(y, dim=1)
    s = x @ y.T / tau
    target = torch.arange(len(x))
    return (F.cross_entropy(s, target) + F.cross_entropy(s.T, target)) / 2
