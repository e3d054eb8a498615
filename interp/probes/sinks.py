"""Attention sinks: how much attention each head puts on the first token (and on any other sink token),
and how far it looks.

Metrics, on patterns `A` [batch, head, query, key] (rows sum to 1, causal, right padding):

- Gu et al. 2025: `alpha_k(l, h) = 1/(T-k+1) * sum_{t>=k} A[t, k]` (1-indexed), the mean attention that the
  queries from k on give key k; `Sink_k^eps = fraction of (layer, head) with alpha_k > eps`, eps = 0.3.
  Here k = 1 is key position 0; T counts the sequence's valid (non-padded) tokens.
- Attention distance of a head: mean over queries t >= 1 of `sum_j A[t, j] |t - j|`; without the sink it is the
  same with key 0 removed and the row renormalised (`sum_{j>=1} A[t,j] |t-j| / sum_{j>=1} A[t,j]`).
- Sink tokens: keys other than position 0 whose alpha exceeds eps in some head, among keys with at least
  `min_queries` queries after them (alpha of the last few keys rests on a handful of queries).

Pure functions over a pattern (`alpha_per_key`, `head_sink_scores`, `attention_distance`) are what the
tests check exactly; `SinkScanner` accumulates them from `blocks.*.attn.hook_pattern` during a scan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import torch
from torch import Tensor

DEFAULT_EPS = 0.3


def _valid(pattern: Tensor, mask: Tensor | None) -> Tensor:
    b, _, q, _ = pattern.shape
    if mask is None:
        return torch.ones(b, q, dtype=torch.bool, device=pattern.device)
    return mask.to(device=pattern.device, dtype=torch.bool)


def alpha_per_key(pattern: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(alpha [batch, head, key], number of queries averaged [batch, key]).

    alpha[b, h, k] = mean over valid queries t >= k of A[b, h, t, k] (Gu et al.'s alpha_{k+1}).
    """
    valid = _valid(pattern, mask).float()
    p = pattern.float()
    n = p.shape[-1]
    causal = torch.ones(n, n, device=p.device).tril()  # [query, key]: query >= key
    counts = valid @ causal  # [batch, key]: valid queries at or after each key
    # A causal pattern is already zero above the diagonal, so only padded queries need masking.
    sums = torch.einsum("bhqk,bq->bhk", p, valid)
    return sums / counts.clamp_min(1)[:, None, :], counts


def head_sink_scores(pattern: Tensor, mask: Tensor | None = None) -> Tensor:
    """alpha of key position 0 per (batch, head): the mean attention every valid query gives the first token."""
    return alpha_per_key(pattern, mask)[0][..., 0]


def attention_distance(pattern: Tensor, mask: Tensor | None = None, exclude_sink: bool = False) -> Tensor:
    """Mean attention distance per (batch, head) over valid queries t >= 1: [batch, head].

    With `exclude_sink`, key 0 is dropped and each row renormalised over the keys that remain.
    """
    valid = _valid(pattern, mask)
    p = pattern.float()
    n = p.shape[-1]
    pos = torch.arange(n, device=p.device, dtype=torch.float32)
    dist = (pos[:, None] - pos[None, :]).abs()  # [query, key]
    per_query = (p * dist).sum(-1)  # [batch, head, query]
    if exclude_sink:
        # key 0 sits at distance t from query t: remove its share and renormalise the rest of the row
        first = p[..., 0]
        per_query = (per_query - first * pos) / (1 - first).clamp_min(1e-12)
    w = valid.float().clone()
    w[:, 0] = 0  # query 0 can only look at itself
    return (per_query * w[:, None, :]).sum(-1) / w.sum(-1).clamp_min(1)[:, None]


def sink_fraction(alpha_first: Tensor, eps: float = DEFAULT_EPS) -> float:
    """Gu et al.'s Sink_1^eps from alpha [layer, head] (already averaged over sequences)."""
    if eps < 0 or eps > 1:
        raise ValueError(f"sink threshold eps must be in [0, 1], got {eps}; Gu et al. use 0.3")
    return float((alpha_first > eps).float().mean())


class SinkScanner:
    """Accumulates per-head sink scores, distances and sink tokens from `blocks.*.attn.hook_pattern`."""

    def __init__(self, n_layers: int, n_heads: int, eps: float = DEFAULT_EPS, min_queries: int = 16):
        if eps < 0 or eps > 1:
            raise ValueError(f"sink threshold eps must be in [0, 1], got {eps}; Gu et al. use 0.3")
        self.n_layers, self.n_heads, self.eps, self.min_queries = n_layers, n_heads, eps, min_queries
        self.alpha_first = torch.zeros(n_layers, n_heads, dtype=torch.float64)
        self.dist = torch.zeros(n_layers, n_heads, dtype=torch.float64)
        self.dist_no_sink = torch.zeros(n_layers, n_heads, dtype=torch.float64)
        self.other_sink_mass = torch.zeros(n_layers, n_heads, dtype=torch.float64)
        self.n_seq = [0] * n_layers
        self.sink_tokens: Counter = Counter()  # token id -> (layer, head, seq) hits
        self.sink_positions: Counter = Counter()
        self.sinks_found: list[tuple[int, int, int, int]] = []  # (layer, head, seq, pos), pos >= 1
        self._offset = 0
        self._ids: Tensor | None = None
        self._mask: Tensor | None = None

    def begin_batch(self, ids: Tensor, mask: Tensor | None) -> None:
        if self._ids is not None:
            self._offset += self._ids.shape[0]
        self._ids = ids.detach().cpu()
        self._mask = torch.ones_like(ids) if mask is None else mask

    def hook(self, pattern: Tensor, hook) -> None:
        layer = hook.layer
        alpha, counts = alpha_per_key(pattern.detach(), self._mask)
        self.alpha_first[layer] += alpha[..., 0].sum(0).double().cpu()
        self.dist[layer] += attention_distance(pattern.detach(), self._mask).sum(0).double().cpu()
        self.dist_no_sink[layer] += (
            attention_distance(pattern.detach(), self._mask, exclude_sink=True).sum(0).double().cpu()
        )
        self.n_seq[layer] += pattern.shape[0]
        eligible = counts >= self.min_queries  # [batch, key]
        eligible[:, 0] = False
        hits = (alpha > self.eps) & eligible[:, None, :]
        if hits.any():
            for b, h, k in hits.nonzero().tolist():
                self.sinks_found.append((layer, h, self._offset + b, k))
                self.sink_tokens[int(self._ids[b, k])] += 1
                self.sink_positions[k] += 1
            self.other_sink_mass[layer] += (alpha * hits).sum(-1).sum(0).double().cpu()

    def per_head(self) -> dict[str, Tensor]:
        """Averages over sequences, each [layer, head]."""
        n = torch.tensor(self.n_seq, dtype=torch.float64).clamp_min(1)[:, None]
        return {
            "alpha_first": self.alpha_first / n,
            "distance": self.dist / n,
            "distance_no_sink": self.dist_no_sink / n,
            "other_sink_alpha": self.other_sink_mass / n,
        }

    def report(self, decode: Callable[[list[int]], str] | None = None) -> dict:
        decode = decode or (lambda ids: str(ids[0]))
        heads = self.per_head()
        a = heads["alpha_first"]
        per_layer = (a > self.eps).double().mean(1)
        return {
            "eps": self.eps,
            "n_seq": self.n_seq[0] if self.n_seq else 0,
            "sink_fraction": sink_fraction(a, self.eps),
            "sink_fraction_per_layer": per_layer.tolist(),
            "alpha_first": a.tolist(),
            "distance": heads["distance"].tolist(),
            "distance_no_sink": heads["distance_no_sink"].tolist(),
            "mean_alpha_first": float(a.mean()),
            "other_sinks": {
                "n_hits": len(self.sinks_found),
                "tokens": {decode([t]): n for t, n in self.sink_tokens.most_common(15)},
                "positions": {str(p): n for p, n in self.sink_positions.most_common(15)},
            },
        }


def window_mask(n: int, window: int, n_sink: int, device=None) -> Tensor:
    """[query, key] bool: keys a query may see under StreamingLLM attention (its last `window` keys, and the
    first `n_sink` keys), causal."""
    if window < 1 or n_sink < 0:
        raise ValueError(f"window must be >= 1 and n_sink >= 0 (got window={window}, n_sink={n_sink})")
    q = torch.arange(n, device=device)[:, None]
    k = torch.arange(n, device=device)[None, :]
    return (k <= q) & ((q - k < window) | (k < n_sink))


def streaming_hook(window: int, n_sink: int):
    """A `hook_attn_scores` function that imposes `window_mask` (keeps original positions: one forward)."""

    def fn(scores: Tensor, hook) -> Tensor:
        allowed = window_mask(scores.shape[-1], window, n_sink, scores.device)
        return scores.masked_fill(~allowed, float("-inf"))

    return fn
