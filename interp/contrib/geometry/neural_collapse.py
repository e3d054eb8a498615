"""Neural collapse on cached features: DeepUFM and DNC-Spectra.

Papers:
- DeepUFM: Garrod, Keating, Thrampoulidis, *The Implicit Bias of Depth: From Neural Collapse to Softmax
  Codes* (arXiv 2605.23087). Gradient descent on an unregularized deep unconstrained-feature model (free
  features H, logits W_L ... W_1 H) is biased by depth towards low-rank class-mean logits instead of the
  neural-collapse simplex (rank K-1).
- DNC-Spectra: Garrod, Keating, *Unifying Low Dimensional Spectra in Deep Learning* (arXiv 2404.06106).
  Under (deep) neural collapse the layer-wise Gauss-Newton matrix is built from class feature means, so
  its outlier eigenvectors lie in span{v (x) mu_c : v orthogonal to 1} (Kronecker of the softmax-Hessian
  range with the class means).
No official code for either; this follows the papers' definitions.

Metrics (Papyan, Han & Donoho conventions):
- NC1 = tr(S_W S_B^+) / K, within-class over between-class covariance (0 at collapse);
- NC2 = || G / ||G||_F - E / ||E||_F ||_F with G the Gram of centred, normalised class means and
  E = I - 11^T/K the simplex ETF Gram (0 for a simplex);
- NC3 = || W / ||W||_F - Mc / ||Mc||_F ||_F^2 (classifier vs centred class means; 0 at self-duality);
- effective rank (Roy & Vetterli) = exp(entropy of the normalised singular values).

    >>> m = nc_metrics(feats, labels, W=unembed_rows)       # {"nc1": ..., "nc2": ..., "nc3": ...}
    >>> check = spectrum_check(feats, labels, W)             # Gauss-Newton outliers vs class-mean subspace
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from interp.contrib.common.fit import fit, make_optimizer


def _check_feats(feats: Tensor, labels: Tensor) -> tuple[Tensor, Tensor, int]:
    if not isinstance(feats, Tensor) or feats.ndim != 2:
        raise ValueError(f"feats must be a 2-D tensor [n_samples, d]; got {getattr(feats, 'shape', type(feats))}")
    labels = torch.as_tensor(labels)
    if labels.shape != (feats.shape[0],) or labels.dtype.is_floating_point:
        raise ValueError(
            f"labels must be integer class ids of shape ({feats.shape[0]},); got {labels.dtype} {tuple(labels.shape)}"
        )
    if labels.min() < 0:
        raise ValueError("labels must be non-negative class ids 0..K-1")
    k = int(labels.max()) + 1
    counts = torch.bincount(labels, minlength=k)
    if (counts == 0).any():
        raise ValueError(
            f"classes {torch.nonzero(counts == 0).ravel().tolist()} have no samples; relabel to 0..K-1 without gaps"
        )
    if k < 2:
        raise ValueError("need at least 2 classes")
    return feats.double(), labels.long(), k


def class_means(feats: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Class means [K, d] and the global mean [d] (mean of all samples)."""
    feats, labels, k = _check_feats(feats, labels)
    sums = torch.zeros(k, feats.shape[1], dtype=feats.dtype).index_add_(0, labels, feats)
    return sums / torch.bincount(labels, minlength=k)[:, None], feats.mean(0)


def effective_rank(x: Tensor) -> float:
    """exp(Shannon entropy of s / sum(s)): a matrix's singular values s, or a 1-D tensor of them."""
    s = x.double().abs() if x.ndim == 1 else torch.linalg.svdvals(x.double())
    if s.sum() <= 0:
        return 0.0
    p = s / s.sum()
    p = p[p > 0]
    return float(torch.exp(-(p * p.log()).sum()))


def nc_metrics(feats: Tensor, labels: Tensor, W: Tensor | None = None) -> dict[str, float]:
    """NC1, NC2 (distance to a simplex ETF), equinorm, NC3 (if a classifier W [K, d] is given), ranks."""
    feats, labels, k = _check_feats(feats, labels)
    means, gmean = class_means(feats, labels)
    mc = means - gmean
    within = feats - means[labels]
    s_w = within.T @ within / feats.shape[0]
    s_b = mc.T @ mc / k
    nc1 = float(torch.trace(s_w @ torch.linalg.pinv(s_b, hermitian=True)) / k)
    norms = mc.norm(dim=1)
    unit = mc / norms.clamp_min(1e-12)[:, None]
    gram = unit @ unit.T
    etf = torch.eye(k, dtype=gram.dtype) - 1.0 / k
    out = {
        "nc1": nc1,
        "nc2": float((gram / gram.norm() - etf / etf.norm()).norm()),
        "equinorm_cv": float(norms.std() / norms.mean()),
        "class_mean_effective_rank": effective_rank(mc),
        "class_mean_rank": int(torch.linalg.matrix_rank(mc, rtol=1e-3)),
    }
    if W is not None:
        W = W.double()
        if W.shape != mc.shape:
            raise ValueError(f"W must be the classifier [K, d] = {tuple(mc.shape)}; got {tuple(W.shape)}")
        out["nc3"] = float((W / W.norm() - mc / mc.norm()).norm() ** 2)
    return out


# ---------------------------------------------------------------- DeepUFM: deep unconstrained features


@dataclass
class UFMConfig:
    """A deep unconstrained-feature model trained by full-batch GD on unregularized cross-entropy."""

    n_classes: int = 6
    """K."""
    per_class: int = 20
    """Samples per class (free feature columns)."""
    width: int = 32
    """d: feature and hidden width."""
    depth: int = 1
    """L: number of weight matrices between H and the logits (1 = the classic UFM)."""
    steps: int = 4000
    lr: float = 0.2
    """GD step; 0.5 diverges for some depth-6 runs as the logit norm grows."""
    init: str = "random"
    """"random" (i.i.d. Gaussian, scaled by init_scale) or "spectral" (all layers share singular vectors)."""
    init_scale: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.init not in ("random", "spectral"):
            raise ValueError(f"init must be 'random' or 'spectral'; got {self.init!r}")
        if self.depth < 1 or self.n_classes < 2 or self.width < self.n_classes or self.steps < 1:
            raise ValueError("need depth >= 1, n_classes >= 2, width >= n_classes, steps >= 1")


def _orthogonal(n: int, g: torch.Generator) -> Tensor:
    q, r = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def train_deep_ufm(cfg: UFMConfig, record_every: int = 100) -> dict:
    """Train one deep UFM; returns the history of class-mean-logit spectra and NC metrics.

    Logits Z = W_L ... W_1 H, H [d, N] free, W_L [K, d], others [d, d]. The history records, at each
    checkpoint, the singular values of the class-mean logit matrix [K, K], its effective rank, the loss,
    and NC metrics of the penultimate features W_{L-1} ... W_1 H with classifier W_L.
    """
    g = torch.Generator().manual_seed(cfg.seed)
    k, d, n = cfg.n_classes, cfg.width, cfg.n_classes * cfg.per_class
    labels = torch.arange(k).repeat_interleave(cfg.per_class)
    s = cfg.init_scale
    if cfg.init == "random":
        H = s * torch.randn(d, n, generator=g, dtype=torch.float64)
        Ws = [s * torch.randn(d, d, generator=g, dtype=torch.float64) for _ in range(cfg.depth - 1)]
        Ws.append(s * torch.randn(k, d, generator=g, dtype=torch.float64))
    else:
        # spectral: W_i = s * Q_{i+1} Q_i^T, H = s * Q_0 X -- aligned, balanced singular structure
        qs = [_orthogonal(d, g) for _ in range(cfg.depth + 1)]
        H = s * qs[0] @ torch.randn(d, n, generator=g, dtype=torch.float64) / math.sqrt(d)
        Ws = [s * qs[i + 1] @ qs[i].T for i in range(cfg.depth)]
        Ws[-1] = Ws[-1][:k]
    params = [H.requires_grad_()] + [w.requires_grad_() for w in Ws]
    hist: dict[str, list] = {"step": [], "loss": [], "sv": [], "eff_rank": [], "nc1": [], "nc2": [], "nc3": []}

    def loss_at(step: int) -> Tensor:
        """The loss before update `step`, recorded (with the spectra of this forward pass) at checkpoints."""
        feats = H
        for w in Ws[:-1]:
            feats = w @ feats
        z = Ws[-1] @ feats
        loss = torch.nn.functional.cross_entropy(z.T, labels)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"deep UFM diverged at step {step} (depth {cfg.depth}, lr {cfg.lr}); lower lr")
        if step % record_every == 0 or step == cfg.steps:
            with torch.no_grad():
                zbar = torch.stack([z[:, labels == c].mean(1) for c in range(k)], 1)
                sv = torch.linalg.svdvals(zbar)
                nc = nc_metrics(feats.T.detach(), labels, Ws[-1].detach())
            hist["step"].append(step)
            hist["loss"].append(float(loss.detach()))
            hist["sv"].append((sv / sv[0]).tolist())
            hist["eff_rank"].append(effective_rank(sv))
            for key in ("nc1", "nc2", "nc3"):
                hist[key].append(nc[key])
        return loss

    fit(make_optimizer(params, lr=cfg.lr, name="sgd"), loss_at, range(cfg.steps))
    loss_at(cfg.steps)  # the trained state, recorded
    return hist


# ---------------------------------------------------------------- DNC-Spectra: Gauss-Newton vs class means


def gauss_newton_last_layer(feats: Tensor, W: Tensor, b: Tensor | None = None) -> Tensor:
    """Exact Gauss-Newton of the mean cross-entropy w.r.t. a linear classifier W [K, d]: [K*d, K*d].

    G = (1/N) sum_i (diag(p_i) - p_i p_i^T) (x) h_i h_i^T, with vec(W) in row-major order (index a*d + j).
    """
    if feats.ndim != 2 or W.ndim != 2 or feats.shape[1] != W.shape[1]:
        raise ValueError(f"feats [N, d] and W [K, d] must share d; got {tuple(feats.shape)} and {tuple(W.shape)}")
    h, W = feats.double(), W.double()
    logits = h @ W.T + (b.double() if b is not None else 0.0)
    p = logits.softmax(-1)
    hp = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # [N, K, K]
    n, k, d = h.shape[0], W.shape[0], W.shape[1]
    g = torch.empty(k, d, k, d, dtype=torch.float64)
    for a in range(k):  # block (a, b) = H^T diag(hp[:, a, b]) H / N; memory stays O(K^2 d^2)
        for b in range(a, k):
            blk = (h * hp[:, a, b, None]).T @ h / n
            g[a, :, b, :] = blk
            g[b, :, a, :] = blk.T
    return g.reshape(k * d, k * d)


def class_mean_subspace(means: Tensor) -> Tensor:
    """Orthonormal basis [K*d, (K-1)*r] of span{v (x) mu_c : v orthogonal to 1}, r = rank of the means."""
    k = means.shape[0]
    ones_perp = torch.linalg.qr(torch.eye(k, dtype=torch.float64) - 1.0 / k)[0][:, : k - 1]
    u, s, _ = torch.linalg.svd(means.double().T, full_matrices=False)
    r = int((s > s[0] * 1e-8).sum())
    return torch.kron(ones_perp.contiguous(), u[:, :r].contiguous())


def kfac_subspace(feats: Tensor, W: Tensor, b: Tensor | None, r: int) -> Tensor:
    """The strong baseline's prediction (issue 42): orthonormal basis [K*d, r] of the top-r eigenvectors of the
    Kronecker-factored Gauss-Newton A (x) B, A = mean_i (diag p_i - p_i p_i^T), B = mean_i h_i h_i^T (K-FAC);
    its eigenvectors are a_i (x) b_j with eigenvalues alpha_i beta_j, the r largest kept. Uses no labels."""
    h, W = feats.double(), W.double()
    p = (h @ W.T + (b.double() if b is not None else 0.0)).softmax(-1)
    a = torch.diag(p.mean(0)) - p.T @ p / len(p)
    alpha, ua = torch.linalg.eigh(a)
    beta, ub = torch.linalg.eigh(h.T @ h / len(h))
    k, d = len(alpha), len(beta)
    if not 1 <= r <= k * d:
        raise ValueError(f"r={r} must lie in 1..{k * d}")
    top = torch.argsort((alpha[:, None] * beta[None, :]).flatten(), descending=True)[:r]
    return torch.stack([torch.kron(ua[:, int(t) // d], ub[:, int(t) % d]) for t in top], 1)


def subspace_overlap(u: Tensor, basis: Tensor) -> float:
    """Mean squared projection of the orthonormal columns of u onto span(basis): 1 = inside, r/D = random."""
    return float((basis.T @ u).pow(2).sum() / u.shape[1])


def outlier_count(eigs: Tensor, max_k: int) -> int:
    """Index of the largest relative gap among the top max_k+1 eigenvalues (descending)."""
    e = eigs.double().sort(descending=True).values[: max_k + 1].clamp_min(1e-300)
    return int(torch.argmax(e[:-1] / e[1:])) + 1


def spectrum_check(feats: Tensor, labels: Tensor, W: Tensor, b: Tensor | None = None) -> dict[str, float]:
    """Bulk-outlier check: top eigenvectors of the last-layer Gauss-Newton vs the class-mean prediction.

    Returns the overlap of the top-r eigenvectors (r = predicted dimension) with the predicted subspace,
    the random-subspace baseline r / (K*d), the eigengap outlier count, the fraction of the trace in
    the predicted subspace, and (strong baseline) the overlap of the same eigenvectors with the top-r
    eigenspace of the K-FAC approximation (`kfac_subspace`).
    """
    means, _ = class_means(feats, labels)
    if W.shape[0] != means.shape[0]:
        raise ValueError(f"W has {W.shape[0]} rows but labels name {means.shape[0]} classes")
    g = gauss_newton_last_layer(feats, W, b)
    evals, evecs = torch.linalg.eigh(g)
    evals, evecs = evals.flip(0), evecs.flip(1)
    basis = class_mean_subspace(means)
    r = basis.shape[1]
    k = means.shape[0]
    return {
        "predicted_dim": r,
        "total_dim": g.shape[0],
        "overlap_top": subspace_overlap(evecs[:, :r], basis),
        "random_baseline": r / g.shape[0],
        "trace_in_subspace": float(torch.trace(basis.T @ g @ basis) / torch.trace(g).clamp_min(1e-300)),
        "overlap_kfac": subspace_overlap(evecs[:, :r], kfac_subspace(feats, W, b, r)),
        "outliers": outlier_count(evals, min(k * k + k, g.shape[0] - 1)),
        "top_eigs": evals[: min(2 * r, len(evals))].tolist(),
    }
