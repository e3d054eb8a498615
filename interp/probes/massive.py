"""Massive activations (Sun et al. 2024): residual-stream entries far larger than everything around them.

Criterion, as in the paper's code: an entry `h_l[t, c]` of a layer's output (`blocks.{l}.hook_resid_post`)
is massive when `|h| > abs_threshold` (default 100) **and** `|h| > ratio_threshold * median(|h_l|)`
(default 1000x), the median taken in fp32 over all tokens and channels of that layer output for that
sequence (padding excluded). Small models may sit under the absolute threshold, so every report also
gives the entries that pass the ratio alone, and the per-layer ratio max|h| / median|h|.

`MassiveScanner` is a hook function that accumulates these statistics during a forward pass without
keeping the activations; `interp.probes.scan.probe_scan` runs it over a corpus. Example::

    scanner = MassiveScanner(model.n_layers, MassiveCriterion())
    with model.hooks([("blocks.*.hook_resid_post", scanner.hook)]):
        scanner.begin_batch(ids, mask); model(ids)
    report = scanner.report(decode=model.tokenizer.decode)
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

MAX_ENTRIES = 200_000
"""Entries passing the ratio criterion that a scan keeps (the rest are counted, not stored)."""


@dataclass(frozen=True)
class MassiveCriterion:
    """Sun et al.'s two thresholds."""

    abs_threshold: float = 100.0
    """|h| must exceed this (the paper's MASSIVE_ACTIVATION_ABS_THRESHOLD)."""
    ratio_threshold: float = 1000.0
    """|h| must exceed this many times the layer output's median |h| for the sequence."""

    def __post_init__(self):
        for name in ("abs_threshold", "ratio_threshold"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}; the defaults are 100 and 1000")


def sequence_medians(a: Tensor, valid: Tensor) -> Tensor:
    """fp32 median of |h| over valid positions and all channels, per sequence: [batch].

    `a` is |h| [batch, pos, d_model] in fp32; `valid` [batch, pos] bool. Lower median (torch's).
    """
    if bool(valid.all()):
        flat = a.flatten(1)
        return flat.kthvalue((flat.shape[1] + 1) // 2, dim=1).values
    return torch.stack([a[b][valid[b]].median() for b in range(a.shape[0])])


def massive_mask(
    h: Tensor, valid: Tensor | None, criterion: MassiveCriterion, a: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """(massive [batch,pos,d] bool, ratio-only [batch,pos,d] bool, medians [batch]) for one layer output.

    `ratio-only` marks entries over the ratio threshold whatever their absolute size (a superset of massive).
    `a` may pass |h| in fp32 when the caller has it already.
    """
    a = h.detach().float().abs() if a is None else a
    if valid is None:
        valid = torch.ones(a.shape[:2], dtype=torch.bool, device=a.device)
    valid = valid.to(torch.bool)
    med = sequence_medians(a, valid)
    by_ratio = (a > criterion.ratio_threshold * med[:, None, None]) & valid[:, :, None]
    return by_ratio & (a > criterion.abs_threshold), by_ratio, med


class MassiveScanner:
    """Accumulates massive-activation statistics of `hook_resid_post` over many batches.

    Call `begin_batch(ids, mask)` before each forward, and install `hook` on `blocks.*.hook_resid_post`.
    """

    def __init__(self, n_layers: int, criterion: MassiveCriterion | None = None, top_k: int = 3):
        self.n_layers = n_layers
        self.criterion = criterion or MassiveCriterion()
        self.top_k = top_k
        self.max_abs = [0.0] * n_layers
        self.top: list[list[tuple[float, int, int, int]]] = [[] for _ in range(n_layers)]  # (|h|, seq, pos, ch)
        self.medians: list[list[float]] = [[] for _ in range(n_layers)]
        self.ratios: list[list[float]] = [[] for _ in range(n_layers)]  # per-sequence max|h| / median
        self.topk_sum = torch.zeros(n_layers, top_k, dtype=torch.float64)  # sum over sequences of the k-th largest |h|
        self.n_massive = [0] * n_layers
        self.n_by_ratio = [0] * n_layers
        self.entries: list[tuple[int, int, int, int, float, bool]] = []  # (layer, seq, pos, ch, value, passes abs)
        self.pos0: list[list[Tensor]] = [[] for _ in range(n_layers)]  # h[:, 0, :] per batch
        self.tokens: list[Tensor] = []
        self._offset = 0
        self._ids: Tensor | None = None
        self._valid: Tensor | None = None

    def begin_batch(self, ids: Tensor, mask: Tensor | None) -> None:
        if self._ids is not None:
            self._offset += self._ids.shape[0]
        self._ids = ids.detach().cpu()
        self._valid = (torch.ones_like(ids) if mask is None else mask).to(torch.bool)
        self.tokens.append(self._ids)

    def hook(self, h: Tensor, hook) -> None:
        layer = hook.layer
        a = h.detach().float().abs()
        massive, by_ratio, med = massive_mask(h, self._valid, self.criterion, a)
        if not bool(self._valid.all()):
            a = a.masked_fill(~self._valid[:, :, None], 0.0)
        flat = a.flatten(1)
        seq_max, seq_arg = flat.max(dim=1)
        k = min(self.top_k, flat.shape[1])
        self.topk_sum[layer, :k] += flat.topk(k, dim=1).values.sum(0).double().cpu()
        self.medians[layer] += med.tolist()
        self.ratios[layer] += (seq_max / med.clamp_min(1e-30)).tolist()
        d = h.shape[-1]
        for value, arg, b in zip(seq_max.tolist(), seq_arg.tolist(), range(h.shape[0])):
            self.top[layer].append((value, self._offset + b, arg // d, arg % d))
        self.top[layer] = sorted(self.top[layer], reverse=True)[: self.top_k * 4]
        self.max_abs[layer] = max(self.max_abs[layer], float(seq_max.max()))
        self.n_massive[layer] += int(massive.sum())
        self.n_by_ratio[layer] += int(by_ratio.sum())
        if by_ratio.any() and len(self.entries) < MAX_ENTRIES:
            idx = by_ratio.nonzero().tolist()[: MAX_ENTRIES - len(self.entries)]
            vals = h.detach().float()[by_ratio].tolist()
            flags = massive[by_ratio].tolist()
            for (b, p, c), v, f in zip(idx, vals, flags):
                self.entries.append((layer, self._offset + b, p, c, v, f))
        self.pos0[layer].append(h.detach()[:, 0, :].float().cpu())

    # ---------------------------------------------------------------- summary
    def report(self, decode: Callable[[list[int]], str] | None = None) -> dict:
        """JSON-able summary: per-layer profile, where the massive entries are, and how constant they are."""
        decode = decode or (lambda ids: str(ids[0]))
        ids = torch.cat(self.tokens) if self.tokens else torch.zeros(0, 0, dtype=torch.long)
        layers = []
        for l in range(self.n_layers):
            meds = self.medians[l]
            median = sum(meds) / len(meds) if meds else float("nan")
            ratios = self.ratios[l]
            top = sorted(self.top[l], reverse=True)[: self.top_k]
            layers.append(
                {
                    "layer": l,
                    "max_abs": self.max_abs[l],
                    "median_abs": median,
                    "ratio": self.max_abs[l] / median if median and median > 0 else float("inf"),
                    "mean_seq_ratio": sum(ratios) / len(ratios) if ratios else float("nan"),
                    "mean_topk_abs": (self.topk_sum[l] / max(1, len(meds))).tolist(),
                    "top": [
                        {"abs": v, "seq": s, "pos": p, "channel": c, "token": decode([int(ids[s, p])])}
                        for v, s, p, c in top
                    ],
                    "n_massive": self.n_massive[l],
                    "n_over_ratio": self.n_by_ratio[l],
                }
            )
        return {
            "criterion": {
                "abs_threshold": self.criterion.abs_threshold,
                "ratio_threshold": self.criterion.ratio_threshold,
            },
            "n_seq": int(ids.shape[0]),
            "layers": layers,
            "massive": self._where([e for e in self.entries if e[5]], ids, decode),
            "over_ratio": self._where(self.entries, ids, decode),
            "entries_truncated": sum(self.n_by_ratio) > len(self.entries),
        }

    def _where(self, entries, ids: Tensor, decode) -> dict:
        """Channels, positions, tokens and layer span of a set of entries, plus constancy at position 0."""
        if not entries:
            return {
                "n_entries": 0,
                "layers": [],
                "first_layer": None,
                "last_layer": None,
                "channels": {},
                "positions": {},
                "tokens": {},
                "constancy": [],
            }
        by_layer = Counter(e[0] for e in entries)
        channels = Counter(e[3] for e in entries)
        positions = Counter(e[2] for e in entries)
        tokens = Counter(decode([int(ids[e[1], e[2]])]) for e in entries)
        n_seq = ids.shape[0]
        layers_sorted = sorted(by_layer)
        constancy = []
        pos0_pairs = sorted({(e[0], e[3]) for e in entries if e[2] == 0})
        for layer, ch in pos0_pairs:
            v = torch.cat(self.pos0[layer])[:, ch]
            mean, std = float(v.mean()), float(v.std()) if v.numel() > 1 else 0.0
            constancy.append(
                {
                    "layer": layer,
                    "channel": ch,
                    "position": 0,
                    "mean": mean,
                    "std": std,
                    "cv": abs(std / mean) if mean else float("inf"),
                    "n_seq": int(v.numel()),
                }
            )
        other = defaultdict(list)
        for e in entries:
            if e[2] != 0:
                other[(e[0], e[3])].append(e[4])
        for (layer, ch), vals in sorted(other.items()):
            v = torch.tensor(vals)
            mean, std = float(v.mean()), float(v.std()) if v.numel() > 1 else 0.0
            constancy.append(
                {
                    "layer": layer,
                    "channel": ch,
                    "position": "other",
                    "mean": mean,
                    "std": std,
                    "cv": abs(std / mean) if mean else float("inf"),
                    "n_entries": int(v.numel()),
                }
            )
        pos0_seqs = {e[1] for e in entries if e[2] == 0}
        return {
            "n_entries": len(entries),
            "layers": layers_sorted,
            "first_layer": layers_sorted[0],
            "last_layer": layers_sorted[-1],
            "entries_per_layer": {str(k): by_layer[k] for k in layers_sorted},
            "channels": {str(k): v for k, v in channels.most_common()},
            "positions": {str(k): v for k, v in positions.most_common(20)},
            "share_at_position_0": positions[0] / len(entries),
            "seqs_with_position_0": len(pos0_seqs) / max(1, n_seq),
            "tokens": dict(tokens.most_common(20)),
            "constancy": constancy,
        }
