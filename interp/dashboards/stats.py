"""One streaming pass over "feature x token" activations that gathers everything a dashboard shows.

`FeatureStats.update(chunk)` takes dense activations of a chunk of rows ([n, F]) with their global row
ids, sequence ids and positions, and keeps only per-feature accumulators, so peak memory does not grow
with the number of rows (`benchmarks/bench_dashboards.py` measures it):

- firing count, sum and max (and min for signed values) -> frequency, mean when active, density class;
- exact activation histograms (`StreamingHistogram`);
- the top activations, and a uniform random sample of active rows for the quantile buckets, each with
  the feature's values on its context window (`TopTracker`); bottom activations for signed channels;
- firing counts per position in the sequence;
- co-firing counts between features (over the first `coact_rows` rows), for the Jaccard index.

"Active" means value > 0. Values are never clamped: a channel with negative values is *signed*, its
histogram spans [-hi, hi] and its page also lists its most negative contexts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from interp.dashboards.histogram import StreamingHistogram
from interp.dashboards.tracker import TopTracker


@dataclass
class StatsConfig:
    """What the pass keeps per feature."""

    n_top: int = 20
    """Top contexts shown per feature (3x as many are kept, so that duplicates can be dropped)."""
    n_sample: int = 64
    """Active rows sampled uniformly per feature, for the quantile buckets."""
    before: int = 12
    """Tokens of context before the active token."""
    after: int = 4
    """Tokens of context after it."""
    bins: int = 64
    """Histogram bins per feature (a power of two; the range doubles, so 32-64 of them span the data)."""
    n_pos: int = 128
    """Position bins (one per position; the last one collects positions >= n_pos - 1)."""
    coact_rows: int = 262_144
    """Rows over which co-firing counts are gathered (the cost is the sum of L0^2 over rows)."""
    signed: bool | None = None
    """Treat values as signed (histogram over [-hi, hi], bottom contexts); None: signed if the first chunk has a
    negative value."""

    def __post_init__(self) -> None:
        for name in ("n_top", "n_sample", "before", "after", "n_pos", "coact_rows"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.bins < 2 or self.bins & (self.bins - 1):
            raise ValueError(f"bins must be a power of two >= 2, got {self.bins}")
        if self.n_pos < 1:
            raise ValueError("n_pos must be >= 1")

    @property
    def window(self) -> int:
        return self.before + 1 + self.after


def neighbours(seq: Tensor, pos: Tensor, before: int, after: int) -> Tensor:
    """[n, before+1+after] index (within the chunk) of each row's context tokens, -1 where the
    sequence has no such token inside the chunk."""
    n = len(seq)
    offs = torch.arange(-before, after + 1)
    j = torch.arange(n)[:, None] + offs[None]
    inside = (j >= 0) & (j < n)
    jc = j.clamp(0, max(n - 1, 0))
    same = inside & (seq[jc] == seq[:, None]) & (pos[jc] == pos[:, None] + offs[None])
    return torch.where(same, jc, torch.full_like(jc, -1))


class FeatureStats:
    """Streaming accumulators for `n_features` features; call `update` per chunk."""

    def __init__(self, n_features: int, cfg: StatsConfig | None = None):
        self.cfg = cfg or StatsConfig()
        F = self.n_features = n_features
        self.n_rows = 0
        self.count = torch.zeros(F, dtype=torch.int64)
        self.sum = torch.zeros(F, dtype=torch.float64)
        self.max = torch.full((F,), -float("inf"))
        self.min = torch.full((F,), float("inf"))
        self.min_active = torch.full((F,), float("inf"))
        """Smallest value > 0 per feature (the low end of the lowest quantile bucket)."""
        self.l0_sum = 0
        self.signed: bool | None = self.cfg.signed
        self.hist: StreamingHistogram | None = None
        W = self.cfg.window
        self.top = TopTracker(F, 3 * self.cfg.n_top, W)
        self.sample = TopTracker(F, self.cfg.n_sample, W)
        self.bottom: TopTracker | None = None
        self.pos_counts = torch.zeros(F, self.cfg.n_pos, dtype=torch.int64)
        self.pos_rows = torch.zeros(self.cfg.n_pos, dtype=torch.int64)
        self.coact = torch.zeros(F, F, dtype=torch.float32)
        """Co-firing counts (diagonal: firing counts) over the first `coact_rows` rows."""
        self.coact_prod = torch.zeros(F, F, dtype=torch.float32)
        """Sums of products of activations over the same rows (for cosine and Pearson correlations)."""
        self.coact_sum = torch.zeros(F, dtype=torch.float64)
        self.coact_rows = 0
        self._gen = torch.Generator().manual_seed(0)

    def update(self, z: Tensor, rows: Tensor, seq: Tensor, pos: Tensor, keep: Tensor | None = None) -> None:
        """Add a chunk: `z` [n, F] activations, `rows` [n] global row ids, `seq`/`pos` [n]; `keep` [n]
        marks the rows the statistics cover (the others, e.g. BOS or attention-sink rows, count as zero
        and appear only as context around other rows)."""
        z = z.float()
        n, F = z.shape
        if keep is not None and not bool(keep.all()):
            z = z.clone()
            z[~keep] = 0
            n_kept = int(keep.sum())
        else:
            n_kept = n
        if F != self.n_features:
            raise ValueError(f"chunk has {F} features, expected {self.n_features}")
        if self.signed is None:
            self.signed = bool((z < 0).any())
        if self.hist is None:
            self.hist = StreamingHistogram(F, self.cfg.bins, signed=self.signed)
            if self.signed:
                self.bottom = TopTracker(F, self.cfg.n_top, self.cfg.window)
        self.n_rows += n_kept
        nz = (z != 0).nonzero() if self.signed else (z > 0).nonzero()
        r, f = nz[:, 0], nz[:, 1]
        v = z[r, f]
        act = v > 0
        ra, fa, va = r[act], f[act], v[act]
        self.count += torch.bincount(fa, minlength=F)
        self.sum += torch.bincount(fa, weights=va.double(), minlength=F)
        self.l0_sum += int(act.sum())
        if len(va):
            self.min_active = torch.minimum(
                self.min_active, torch.full((F,), float("inf")).scatter_reduce_(0, fa, va, "amin")
            )
        if len(v):
            self.max = torch.maximum(self.max, torch.full((F,), -float("inf")).scatter_reduce_(0, f, v, "amax"))
            self.min = torch.minimum(self.min, torch.full((F,), float("inf")).scatter_reduce_(0, f, v, "amin"))
        if self.signed and n_kept:  # a signed feature's min/max run over every kept row, zeros included
            zk = z if keep is None else z[keep]
            self.max = torch.maximum(self.max, zk.max(0).values)
            self.min = torch.minimum(self.min, zk.min(0).values)
        self.hist.add(f, v)
        P = self.cfg.n_pos
        pbin = pos.long().clamp(0, P - 1)
        self.pos_rows += torch.bincount(pbin if keep is None else pbin[keep], minlength=P)
        self.pos_counts.view(-1).index_add_(0, fa * P + pbin[ra], torch.ones_like(fa))
        nbr = neighbours(seq, pos, self.cfg.before, self.cfg.after)
        gr = rows.long()

        def windows(r_sel: Tensor, f_sel: Tensor) -> Tensor:
            idx = nbr[r_sel]
            w = z[idx.clamp_min(0), f_sel[:, None]]
            return torch.where(idx >= 0, w, torch.full_like(w, float("nan")))

        self.top.offer(fa, va, va, gr[ra], lambda m: windows(ra[m], fa[m]))
        keys = torch.rand(len(fa), generator=self._gen)
        self.sample.offer(fa, keys, va, gr[ra], lambda m: windows(ra[m], fa[m]))
        if self.bottom is not None:
            neg = v < 0
            self.bottom.offer(f[neg], -v[neg], v[neg], gr[r[neg]], lambda m: windows(r[neg][m], f[neg][m]))
        if self.coact_rows < self.cfg.coact_rows:
            take = min(n, self.cfg.coact_rows - self.coact_rows)
            self._coact(ra, fa, va, take, F)
            self.coact_rows += take if keep is None else int(keep[:take].sum())

    def _coact(self, r: Tensor, f: Tensor, v: Tensor, take: int, F: int) -> None:
        m = r < take
        r, f, v = r[m], f[m], v[m]
        self.coact_sum += torch.bincount(f, weights=v.double(), minlength=F)
        c = torch.bincount(r, minlength=take)
        if int(c.square().sum()) * 50 > take * F * F:  # dense rows: a matrix product beats listing the pairs
            fires = torch.zeros(take, F)
            fires[r, f] = 1.0
            self.coact += fires.T @ fires
            fires[r, f] = v
            self.coact_prod += fires.T @ fires
            return
        cr = c[r]
        a = torch.repeat_interleave(torch.arange(len(r)), cr)  # each active entry once per entry in its row
        first = (c.cumsum(0) - c)[r]  # index of the row's first active entry (entries come row-major)
        within = torch.arange(len(a)) - torch.repeat_interleave(cr.cumsum(0) - cr, cr)
        b = first[a] + within
        pair = f[a] * F + f[b]
        self.coact.view(-1).index_add_(0, pair, torch.ones(len(a)))
        self.coact_prod.view(-1).index_add_(0, pair, v[a] * v[b])

    # ---- results -------------------------------------------------------------------------------
    @property
    def freq(self) -> Tensor:
        return self.count.double() / max(self.n_rows, 1)

    @property
    def mean_active(self) -> Tensor:
        return torch.where(self.count > 0, self.sum / self.count.clamp_min(1), torch.zeros((), dtype=torch.float64))

    @property
    def max_value(self) -> Tensor:
        """Max activation (0 for features that never fire)."""
        return torch.where(torch.isfinite(self.max), self.max, torch.zeros(()))

    def correlations(self, f: int) -> tuple[Tensor, Tensor]:
        """([F] cosine, [F] Pearson) between feature f's activations and every feature's, over the
        co-activation rows (inactive rows count as 0; only active values are used, so for signed
        channels these cover the positive parts)."""
        n = max(self.coact_rows, 1)
        sq = self.coact_prod.diagonal().double()
        prod = self.coact_prod[f].double()
        cos = prod / (sq[f].sqrt() * sq.sqrt()).clamp_min(1e-12)
        mu = self.coact_sum / n
        var = (sq / n - mu.square()).clamp_min(0)
        pear = (prod / n - mu[f] * mu) / (var[f].sqrt() * var.sqrt()).clamp_min(1e-12)
        return cos.float(), pear.float()

    def jaccard(self, f: int) -> Tensor:
        """[F] Jaccard index of feature f's firing set with every feature's, over the co-activation rows."""
        diag = self.coact.diagonal()
        inter = self.coact[f]
        return inter / (diag[f] + diag - inter).clamp_min(1)
