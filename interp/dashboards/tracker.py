"""Per-feature top-K selection over a stream of (feature, key) entries, keeping a payload for each winner.

Used three ways by `FeatureStats`: the highest activations (key = value), the lowest ones of signed
channels (key = -value), and a uniform random sample of each feature's active rows (key = a random number:
keeping the K largest of i.i.d. keys is reservoir sampling). Entries below a feature's current K-th key
are dropped before any sorting, so after the first chunks almost nothing is merged and the cost is one
comparison per entry. Memory is `[features, K]` (plus the context window of each winner), whatever the
number of rows.
"""

from __future__ import annotations

import torch
from torch import Tensor


class TopTracker:
    """Keeps, per feature, the K entries with the largest key: their key, value, row id and window."""

    def __init__(self, n_features: int, k: int, window: int):
        self.k, self.window = k, window
        self.key = torch.full((n_features, k), -float("inf"))
        self.val = torch.zeros(n_features, k)
        self.row = torch.full((n_features, k), -1, dtype=torch.int64)
        self.win = torch.full((n_features, k, window), float("nan"))
        """Activation of the feature on each token of the winner's context window (NaN: no token there)."""

    def offer(self, feature: Tensor, key: Tensor, val: Tensor, row: Tensor, win_fn) -> None:
        """Offer entries; `win_fn(mask)` returns the [m', window] windows of the entries `mask` selects
        (computed only for entries that pass the threshold)."""
        if not len(feature) or self.k == 0:
            return
        ok = key > self.key[feature, -1]
        if not ok.any():
            return
        feature, key, val, row = feature[ok], key[ok], val[ok], row[ok]
        win = win_fn(ok)
        touched = torch.unique(feature)
        k = self.k
        f_all = torch.cat([touched.repeat_interleave(k), feature])
        key_all = torch.cat([self.key[touched].flatten(), key])
        val_all = torch.cat([self.val[touched].flatten(), val])
        row_all = torch.cat([self.row[touched].flatten(), row])
        win_all = torch.cat([self.win[touched].reshape(-1, self.window), win])
        order = torch.argsort(key_all, descending=True, stable=True)
        order = order[torch.argsort(f_all[order], stable=True)]  # by feature, then key descending
        f_sorted = f_all[order]
        counts = torch.bincount(f_sorted, minlength=int(touched.max()) + 1)
        start = counts.cumsum(0) - counts
        rank = torch.arange(len(order)) - start[f_sorted]
        keep = rank < k
        dst_f, dst_r, src = f_sorted[keep], rank[keep], order[keep]
        self.key[dst_f, dst_r] = key_all[src]
        self.val[dst_f, dst_r] = val_all[src]
        self.row[dst_f, dst_r] = row_all[src]
        self.win[dst_f, dst_r] = win_all[src]

    def entries(self, f: int) -> list[tuple[float, int, list[float]]]:
        """(value, row id, window values; NaN = no token) of feature `f`'s winners, best key first."""
        live = self.row[f] >= 0
        return list(zip(self.val[f][live].tolist(), self.row[f][live].tolist(), self.win[f][live].tolist()))
