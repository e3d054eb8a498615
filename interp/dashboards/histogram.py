"""Exact per-feature activation histograms in one streaming pass, with memory independent of the rows.

Each feature has `bins` equal-width bins over `[0, hi]` (or `[-hi, hi]` for signed values). `hi` starts at
the first value the feature shows and doubles whenever a larger one arrives; doubling merges pairs of
bins, so counts stay exact and at least half of the bins span the data at the end. This is the
streaming trick that lets a 1M-row pass keep a `[features, bins]` table instead of the activations.

    >>> h = StreamingHistogram(n_features=3, bins=8)
    >>> h.add(feature_idx, values)        # 1-D tensors, one entry per non-zero activation
    >>> edges, counts = h.feature(2)      # [bins + 1], [bins]
"""

from __future__ import annotations

import torch
from torch import Tensor


class StreamingHistogram:
    """Per-feature equal-width histograms whose range grows by doubling (exact counts)."""

    def __init__(self, n_features: int, bins: int = 64, signed: bool = False):
        if bins < 2 or bins & (bins - 1):
            raise ValueError(f"bins must be a power of two >= 2, got {bins}")
        self.n_features, self.bins, self.signed = n_features, bins, signed
        self.counts = torch.zeros(n_features, bins, dtype=torch.int64)
        self.hi = torch.zeros(n_features, dtype=torch.float64)
        """Upper edge of each feature's range (0 until the feature has a value)."""

    def _merge_index(self, d: int) -> Tensor:
        """Old bin -> new bin after the range doubles `d` times."""
        i = torch.arange(self.bins)
        if self.signed:  # range [-hi, hi]: old bin i sits at -hi + i*w; new bins are 2^d times wider
            return (i + (self.bins // 2) * ((1 << d) - 1)) >> d
        return i >> d

    def add(self, feature: Tensor, value: Tensor) -> None:
        """Count `value[j]` in the histogram of feature `feature[j]` (zeros should be left out by the caller)."""
        if not len(feature):
            return
        mag = value.abs().double() if self.signed else value.double().clamp_min(0)
        top = torch.zeros(self.n_features, dtype=torch.float64).scatter_reduce_(0, feature, mag, "amax")
        fresh = (self.hi == 0) & (top > 0)
        self.hi[fresh] = top[fresh] * (1 + 1e-9)
        grow = top > self.hi
        if grow.any():
            need = torch.ceil(torch.log2(top[grow] / self.hi[grow])).clamp_min(1).long()
            feats = grow.nonzero().flatten()
            for d in need.unique().tolist():
                sel = feats[need == d]
                idx = self._merge_index(min(d, 40)).expand(len(sel), -1)
                self.counts[sel] = torch.zeros(len(sel), self.bins, dtype=torch.int64).scatter_add_(
                    1, idx, self.counts[sel]
                )
                self.hi[sel] *= float(2**d)
        hi = self.hi[feature]
        v = value.double()
        pos = (v + hi) / (2 * hi) if self.signed else v / hi
        b = (pos * self.bins).long().clamp_(0, self.bins - 1)
        self.counts.view(-1).index_add_(0, feature * self.bins + b, torch.ones_like(b))

    def feature(self, f: int) -> tuple[Tensor, Tensor]:
        """(edges [bins + 1], counts [bins]) of feature `f`; empty bins above the data are kept."""
        hi = float(self.hi[f])
        lo = -hi if self.signed else 0.0
        return torch.linspace(lo, hi, self.bins + 1, dtype=torch.float64), self.counts[f].clone()

    def trimmed(self, f: int) -> tuple[Tensor, Tensor]:
        """Like `feature` but without the empty bins at both ends (at least one bin)."""
        edges, counts = self.feature(f)
        nz = counts.nonzero().flatten()
        if not len(nz):
            return edges[:2], counts[:1]
        a, b = int(nz[0]), int(nz[-1]) + 1
        return edges[a : b + 1], counts[a:b]

    def quantile(self, f: int, q: Tensor) -> Tensor:
        """Quantiles of feature `f`'s counted values, interpolated linearly inside bins."""
        edges, counts = self.feature(f)
        cdf = torch.cat([torch.zeros(1), counts.double().cumsum(0)])
        total = float(cdf[-1])
        if total == 0:
            return torch.zeros_like(q, dtype=torch.float64)
        target = q.double() * total
        j = torch.searchsorted(cdf, target, right=False).clamp(1, self.bins)
        lo_c, hi_c = cdf[j - 1], cdf[j]
        frac = torch.where(hi_c > lo_c, (target - lo_c) / (hi_c - lo_c).clamp_min(1e-12), torch.zeros_like(target))
        e = edges.double()
        return e[j - 1] + frac * (e[j] - e[j - 1])
