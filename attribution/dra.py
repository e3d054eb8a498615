"""Denoised Representation Attribution (DRA): find unsafe training samples from a few unsafe targets.

Pan et al., "Detecting and Filtering Unsafe Training Data via Data Attribution with Denoised
Representation" (arXiv 2502.11411). No official code exists, and the paper's exact denoising formula
was not available; this is our reconstruction from its abstract (see the research spec, section 3.2).
Each operator is a switch in `DenoiseConfig`, so the contribution of each can be measured:

1. `center`: subtract the training pool's mean representation from training and target representations
   (removes the component every fluent text shares).
2. `whiten`: multiply by `(Sigma_pool + lambda I)^(-1/2)` (shrinkage `lambda = whiten_shrink * tr(Sigma)/d`),
   so directions of large benign variance stop dominating cosine similarity.
3. `neutral_frac`: token-level removal of neutral-token contributions in the *targets*: drop the fraction
   of target tokens whose (centered, per-dimension z-scored) token representation is most typical of the
   training pool's tokens, then pool the rest. Needs token-level representations.
4. `select_dims`: keep the K dimensions that best separate the targets from the pool
   (`d_j = mean_targets(r_j) / std_pool(r_j)`), with K chosen by leave-one-target-out: each held-out
   target is ranked among the pool using the other targets, and the K with the best mean reciprocal
   rank wins. "auto" searches a grid; an int fixes K; None keeps every dimension.

Score: cosine similarity over the kept dimensions, aggregated over targets by max (or mean).
Representations are hidden states (`hidden_representations`: mean over tokens of a residual-stream hook)
or gradients (`gradient_representations`: per-example sketched gradients of chosen Linear modules).
Baselines are the same similarity with every switch off: raw representation similarity (RepSim) and raw
gradient similarity (GradSim). The metric is AUPRC, as step-wise average precision (`average_precision`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor


# ----------------------------------------------------------------------------------------------- metric
def average_precision(scores: Tensor, labels: Tensor) -> float:
    """AUPRC as step-wise average precision: sum_k (R_k - R_{k-1}) P_k over distinct score thresholds.

    Tied scores form one threshold (as sklearn's `average_precision_score`). Labels are 0/1.
    """
    scores, labels = torch.as_tensor(scores, dtype=torch.float64).flatten(), torch.as_tensor(labels).flatten()
    if scores.shape != labels.shape:
        raise ValueError(f"scores and labels differ in length: {scores.numel()} vs {labels.numel()}")
    n_pos = int(labels.sum())
    if n_pos == 0:
        raise ValueError("average precision needs at least one positive label")
    order = torch.argsort(scores, descending=True, stable=True)
    s, y = scores[order], labels[order].double()
    tp, seen = torch.cumsum(y, 0), torch.arange(1, len(y) + 1, dtype=torch.float64)
    last = torch.ones_like(s, dtype=torch.bool)  # last index of each run of tied scores
    last[:-1] = s[1:] != s[:-1]
    tp, seen = tp[last], seen[last]
    recall, precision = tp / n_pos, tp / seen
    d_recall = torch.diff(recall, prepend=torch.zeros(1, dtype=torch.float64))
    return float((d_recall * precision).sum())


# ------------------------------------------------------------------------------------ representations
@torch.no_grad()
def hidden_representations(
    model, ids: Tensor, mask: Tensor, hook: str, batch_size: int = 32, tokens: bool = False
) -> Tensor | list[Tensor]:
    """Mean over non-padded tokens of a hook's activations -> [n, d] (or a list of [len_i, d] with `tokens`).

    `model` is an `interp.HookedModel`; `hook` e.g. "blocks.3.hook_resid_post".
    """
    pooled, per_token = [], []
    for i in range(0, len(ids), batch_size):
        b_ids, b_mask = ids[i : i + batch_size], mask[i : i + batch_size]
        _, cache = model.run_with_cache(b_ids, names=[hook], return_logits=False, device="cpu")
        h = cache[hook].float()
        m = b_mask.to(h.dtype)[..., None].cpu()
        pooled.append((h * m).sum(1) / m.sum(1).clamp(min=1))
        if tokens:
            per_token += [h[j, b_mask[j].bool().cpu()] for j in range(len(h))]
    return per_token if tokens else torch.cat(pooled)


def gradient_representations(
    model,
    ids: Tensor,
    mask: Tensor,
    modules: Sequence[str],
    sketch_dim: int | None = 4096,
    seed: int = 0,
    batch_size: int = 16,
) -> Tensor:
    """Per-example gradients of the mean-token loss w.r.t. the named Linear modules of `model.hf_model`
    (sketched to `sketch_dim` per parameter tensor, or exact with None) -> [n, dim]."""
    from attribution.capture import GradientFeaturizer
    from attribution.tracin import features

    hf = model.hf_model
    names = dict(hf.named_modules())
    unknown = [m for m in modules if m not in names]
    if unknown:
        raise ValueError(
            f"no module named {unknown} in {type(hf).__name__}; e.g. "
            f"{[n for n, x in names.items() if isinstance(x, torch.nn.Linear)][-4:]}"
        )
    feat = GradientFeaturizer({m: [names[m]] for m in modules}, sketch_dim=sketch_dim, seed=seed)
    return features(hf, feat, ids, mask, batch_size).sum(1)


# ------------------------------------------------------------------------------------------ denoising
@dataclass
class DenoiseConfig:
    """Which of DRA's denoising operators to apply (all off = the raw-similarity baseline)."""

    center: bool = True
    """Subtract the training pool's mean representation."""
    whiten: bool = True
    """Whiten with the pool covariance (shrunk by `whiten_shrink`)."""
    whiten_shrink: float = 0.1
    """Shrinkage lambda as a fraction of the mean eigenvalue tr(Sigma)/d."""
    neutral_frac: float = 0.0
    """Fraction of target tokens dropped as neutral (most typical of the pool); needs token representations."""
    select_dims: int | Literal["auto"] | None = "auto"
    """Dimensions kept by target-vs-pool discriminability: "auto" (leave-one-target-out), K, or None (all)."""
    aggregate: Literal["max", "mean"] = "max"
    """How similarities to several targets combine."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.neutral_frac < 1.0:
            raise ValueError(f"neutral_frac must be in [0, 1), got {self.neutral_frac}")
        if self.aggregate not in ("max", "mean"):
            raise ValueError(f"aggregate must be 'max' or 'mean', got {self.aggregate!r}")


RAW = DenoiseConfig(center=False, whiten=False, neutral_frac=0.0, select_dims=None)
"""No denoising: plain cosine similarity (the RepSim / GradSim baselines)."""


@dataclass
class DRAResult:
    scores: Tensor
    """[n_train] similarity of each training sample to the targets (higher = more likely unsafe)."""
    dims: Tensor | None
    """Indices of the dimensions kept (None: all)."""
    k_curve: dict[int, float]
    """Leave-one-target-out mean reciprocal rank for each K tried (empty unless select_dims="auto")."""


def _similarity(train: Tensor, targets: Tensor, aggregate: str) -> Tensor:
    sim = torch.nn.functional.normalize(train, dim=-1) @ torch.nn.functional.normalize(targets, dim=-1).T
    return sim.max(-1).values if aggregate == "max" else sim.mean(-1)


def _discriminability(train: Tensor, targets: Tensor) -> Tensor:
    return (targets.mean(0) / train.std(0).clamp(min=1e-8)).abs()


def _loto_mrr(train: Tensor, targets: Tensor, k: int, aggregate: str) -> float:
    """Mean reciprocal rank of each held-out target among the pool, dims chosen without it."""
    rr = []
    for i in range(len(targets)):
        rest = torch.cat([targets[:i], targets[i + 1 :]])
        dims = _discriminability(train, rest).topk(k).indices
        pool = _similarity(train[:, dims], rest[:, dims], aggregate)
        held = _similarity(targets[i : i + 1, dims], rest[:, dims], aggregate)
        rr.append(1.0 / (1 + int((pool > held).sum())))
    return sum(rr) / len(rr)


def neutral_filtered_targets(target_tokens: Sequence[Tensor], pool_tokens: Tensor, frac: float) -> Tensor:
    """Pool each target's tokens after dropping the `frac` most pool-typical ones -> [n_targets, d].

    Typicality of a token = mean |z| of its representation against the pool tokens' per-dimension mean and
    std (low = neutral). `pool_tokens` [n_tokens, d] is a sample of training-pool token representations.
    """
    mean, std = pool_tokens.mean(0), pool_tokens.std(0).clamp(min=1e-8)
    out = []
    for t in target_tokens:
        z = ((t - mean) / std).abs().mean(-1)
        keep = max(1, int(round(len(t) * (1 - frac))))
        out.append(t[z.topk(keep).indices].mean(0))
    return torch.stack(out)


def dra_scores(
    train: Tensor, targets: Tensor, cfg: DenoiseConfig = DenoiseConfig(), k_grid: Sequence[int] | None = None
) -> DRAResult:
    """Scores of training representations [n, d] against target representations [t, d] after denoising.

    (Neutral-token removal happens before this call: pass targets pooled by `neutral_filtered_targets`.)
    """
    train, targets = train.double(), targets.double()
    if train.shape[-1] != targets.shape[-1]:
        raise ValueError(f"train and target representations differ in width: {train.shape[-1]} vs {targets.shape[-1]}")
    if cfg.center or cfg.whiten:
        mu = train.mean(0)
        train, targets = train - mu, targets - mu
    if cfg.whiten:
        train, targets = _whiten(train, targets, cfg.whiten_shrink)
    dims, curve = None, {}
    if cfg.select_dims is not None:
        d = train.shape[-1]
        if cfg.select_dims == "auto":
            if len(targets) < 2:
                raise ValueError("select_dims='auto' needs at least 2 targets (leave-one-target-out); give K instead")
            grid = [k for k in (k_grid or _default_grid(d)) if k <= d]
            curve = {k: _loto_mrr(train, targets, k, cfg.aggregate) for k in grid}
            k = max(curve, key=lambda k: (curve[k], k))  # ties: keep more dimensions
        else:
            k = min(int(cfg.select_dims), d)
        dims = _discriminability(train, targets).topk(k).indices
        train, targets = train[:, dims], targets[:, dims]
    return DRAResult(_similarity(train, targets, cfg.aggregate).float(), dims, curve)


def _whiten(train: Tensor, targets: Tensor, shrink: float) -> tuple[Tensor, Tensor]:
    """x -> x (Sigma + lambda I)^(-1/2), from an SVD of the (centered) pool, so no d x d matrix is formed.

    With train = U S V^T: W = V diag((s^2/(n-1) + lambda)^(-1/2)) V^T + (I - V V^T) lambda^(-1/2).
    """
    n, d = train.shape
    _, s, vt = torch.linalg.svd(train, full_matrices=False)
    var = s**2 / max(1, n - 1)
    lam = shrink * var.sum() / d
    scale = (var + lam).rsqrt()

    def apply(x: Tensor) -> Tensor:
        coords = x @ vt.T
        return (coords * scale) @ vt + (x - coords @ vt) * lam.rsqrt()

    return apply(train), apply(targets)


def _default_grid(d: int) -> list[int]:
    grid, k = [], 4
    while k < d:
        grid.append(k)
        k *= 2
    return [*grid, d]
