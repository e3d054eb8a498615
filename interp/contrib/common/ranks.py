"""Rank statistics from scipy and scikit-learn: Spearman correlation and the AUROC.

    spearman(a, b)              # one correlation of two flat tensors (ties share their average rank)
    rowwise_spearman(A, B)      # one correlation per row of two [batch, n] tensors
    auroc(score_pos, score_neg) # P(positive scores above negative), ties counting one half

Ties always get their average rank (scipy's default). Where one side is constant the correlation is
undefined; these return 0 there (no evidence of a monotone relation) rather than scipy's nan, so a mean
over rows or seeds stays finite.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def _numpy(x: Tensor) -> np.ndarray:
    return x.detach().cpu().double().numpy()


def spearman(a: Tensor, b: Tensor) -> float:
    """Spearman rank correlation of two tensors of the same size, flattened (scipy.stats.spearmanr)."""
    from scipy.stats import spearmanr

    a, b = _numpy(a).ravel(), _numpy(b).ravel()
    if a.shape != b.shape or a.size < 2:
        raise ValueError(f"spearman needs two tensors of the same size >= 2; got {a.size} and {b.size}")
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(spearmanr(a, b).statistic)


def rowwise_spearman(a: Tensor, b: Tensor) -> Tensor:
    """Spearman correlation of each row of `a` [batch, n] with the same row of `b`: [batch] float32.

    The ranks are scipy.stats.rankdata's (average for ties) along each row; the correlation is Pearson's of
    the ranks, which is Spearman's."""
    from scipy.stats import rankdata

    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"rowwise_spearman needs two [batch, n] tensors; got {tuple(a.shape)}, {tuple(b.shape)}")
    ra, rb = (torch.from_numpy(rankdata(_numpy(x), axis=1)) for x in (a, b))
    ra, rb = ra - ra.mean(1, keepdim=True), rb - rb.mean(1, keepdim=True)
    den = (ra.norm(dim=1) * rb.norm(dim=1)).clamp_min(1e-30)
    return ((ra * rb).sum(1) / den).float()


def auroc(score_pos: Tensor, score_neg: Tensor) -> float:
    """Area under the ROC curve of "positive" vs "negative" scores (sklearn.metrics.roc_auc_score): the
    probability that a positive scores above a negative, ties counting one half (Mann-Whitney)."""
    from sklearn.metrics import roc_auc_score

    pos, neg = _numpy(score_pos).ravel(), _numpy(score_neg).ravel()
    if pos.size == 0 or neg.size == 0:
        raise ValueError("auroc needs at least one positive and one negative score")
    labels = np.concatenate([np.ones(pos.size), np.zeros(neg.size)])
    return float(roc_auc_score(labels, np.concatenate([pos, neg])))
