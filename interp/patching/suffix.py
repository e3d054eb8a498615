"""Per-position sweeps run only the positions a patch can change.

A patch at position p of layer l leaves every position before p as it is in the corrupted run: attention is
causal. So the copy that patches position p needs its positions p..n-1 only; the keys and values before p are
the corrupted run's, read from its key/value cache. The copies of one layer are packed into one sequence
(copy k's positions p_k..n-1, one after the other) that attends, through a 4D mask, to the cached keys before
its own p_k and to its own earlier rows. On SmolLM2's 14-token IOI prompt a layer's 14 copies are 105 rows
instead of 196, and the unembedding runs on those rows only; logits before p_k are the corrupted run's.

This is the same arithmetic as the stacked copies of `interp.patching.activation` (tested equal, family by
family, to the run from the embeddings). It is used when nothing else sees the packed layout: no `fwd_hooks`,
no persistent hooks, a per-position kind other than `pattern`, a prompt shorter than every sliding window, and an
adapter that does not opt out (`packs_suffixes = False`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp.patching.sites import LogitDiff, Metric, Sweep, scalar
from interp.wrapper.kv_cache import cache_kwarg, returned_cache
from interp.wrapper.layer_range import run_from_layer


def can_pack(model, sweep: Sweep, fwd_hooks, n_pos: int) -> bool:
    """Whether `sweep` may run packed suffixes on `model` (see the module docstring)."""
    if sweep.kind == "pattern" or fwd_hooks:
        return False
    if any(model.persistent_hooks()) or not getattr(model.adapter, "packs_suffixes", True):
        return False
    text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    window = getattr(text, "sliding_window", None)
    return window is None or n_pos < int(window)  # a sliding layer's cache keeps its window's last tokens


def first_change(sweep: Sweep, site: tuple, src: Tensor, corrupted: Tensor) -> int | None:
    """The first position at which patching `site` changes the corrupted run (None: the clean activation there
    equals the corrupted one, so the patch changes nothing and the copy's score is the corrupted run's)."""
    at = sweep.index(site)
    clean, same = src[at], corrupted[at]
    if sweep.per in ("pos", "pos_head"):
        return None if torch.equal(clean, same) else site[0]
    moved = (clean != same).reshape(clean.shape[0], clean.shape[1], -1).any(-1).any(0).nonzero().flatten()
    return int(moved[0]) if len(moved) else None


LAYERS_PER_RUN = 4
"""Copies of up to this many consecutive layers share one packed forward, which starts at the lowest of them:
a later layer's copies run the blocks before their own unpatched (as the corrupted run did), and in exchange the
weights and the unembedding are read once for all of them (a few rows per layer leave the matrix products
memory-bound)."""


def suffix_chunks(live: list[tuple[int, tuple, int]], n_pos: int, batch: int, max_rows: int) -> list[list]:
    """(layer, site, first position) triples in sweep order, cut so that one packed forward holds at most
    max(4 * max_rows, n_pos) rows per batch row (the mask and the attention scores grow with the rows' square)
    and copies of layers at most `LAYERS_PER_RUN` apart (`live` is in ascending layer order)."""
    cap, chunks, rows = max(4 * max_rows // batch, n_pos), [[]], 0
    for layer, site, first in live:
        lowest = min([c[0] for c in chunks[-1]] + [layer])
        if chunks[-1] and (rows + n_pos - first > cap or layer - lowest >= LAYERS_PER_RUN):
            chunks.append([])
            rows = 0
        chunks[-1].append((layer, site, first))
        rows += n_pos - first
    return [c for c in chunks if c]


class SuffixRuns:
    """The corrupted run's key/value cache and logits, and the packed runs of one sweep's layers."""

    def __init__(self, model, x_ids: Tensor, x_mask: Tensor, metric: Metric, resid: dict[int, Tensor]):
        self.model, self.ids, self.mask, self.metric, self.resid = model, x_ids, x_mask, metric, resid
        with torch.no_grad():
            out = model.hf_model(input_ids=x_ids, attention_mask=x_mask, use_cache=True)
        self.logits = out.logits
        self.kv = [(layer.keys, layer.values) for layer in returned_cache(out).layers]
        self.complete = all(k is not None and k.shape[-2] == x_ids.shape[1] for k, _ in self.kv)
        """Whether the cache holds every position's keys and values (else the sweep runs stacked copies)."""

    def _mask(self, pos_of_row: Tensor, copy_of_row: Tensor, first: Tensor, dtype) -> Tensor:
        """[batch, 1, rows, n + rows] additive mask: a row sees the cached keys before its copy's first position
        and its copy's rows up to its own position (padding keys never)."""
        n = self.ids.shape[1]
        real = self.mask.bool()  # [batch, n]
        prefix = torch.arange(n)[None, :] < first[copy_of_row][:, None]  # [rows, n]
        own = (copy_of_row[:, None] == copy_of_row[None, :]) & (pos_of_row[None, :] <= pos_of_row[:, None])
        allowed = torch.cat(
            [prefix[None] & real[:, None, :], own[None] & real[:, pos_of_row][:, None, :]], dim=2
        )  # [batch, rows, n + rows]
        zero = torch.zeros((), dtype=dtype)
        return torch.where(allowed, zero, torch.finfo(dtype).min)[:, None].to(self.ids.device)

    def scores(self, sweep: Sweep, chunk: list[tuple[int, tuple, int]], srcs: dict[int, Tensor]) -> list[float]:
        """Metric of each copy (layer, site, first position) patching `srcs[layer]` at `sweep`'s hook of its layer
        from its first changed position on, in one packed forward from the chunk's lowest layer."""
        from transformers import DynamicCache

        n, b = self.ids.shape[1], self.ids.shape[0]
        first = torch.tensor([f for _, _, f in chunk])
        lengths = n - first
        offsets = torch.cumsum(lengths, 0) - lengths
        copy_of_row = torch.repeat_interleave(torch.arange(len(chunk)), lengths)
        pos_of_row = first[copy_of_row] + torch.arange(int(lengths.sum())) - offsets[copy_of_row]
        dev = self.ids.device
        start = min(layer for layer, _, _ in chunk)
        resid = self.resid[start][:, pos_of_row.to(dev)]
        mask = self._mask(pos_of_row, copy_of_row, first, resid.dtype)
        one_position = sweep.per in ("pos", "pos_head")

        def patcher(layer: int):
            def patch(t, hook_point):
                t = t.clone()
                for (at_layer, site, f), offset in zip(chunk, offsets.tolist()):
                    if at_layer != layer:
                        continue
                    source = list(sweep.index(site)) + [slice(None)] * (sweep.per == "layer")
                    target = list(source)
                    if one_position:
                        target[1] = offset
                    else:  # the site's whole span of positions: rows offset.. hold positions f..n-1
                        source[1], target[1] = slice(f, None), slice(offset, offset + n - f)
                    t[tuple(target)] = srcs[layer][tuple(source)]
                return t

            return patch

        kw = {}
        if isinstance(self.metric, LogitDiff):  # the rows of each copy's kept positions that it recomputes
            keep = self.metric.keep.cpu()
            mine = (pos_of_row[:, None] == keep[None, :]).any(1)
            rows = torch.nonzero(mine).flatten()
            kw["logits_to_keep"] = rows.to(dev)
        cache = DynamicCache(ddp_cache_data=self.kv)
        hooks = [(sweep.hook(layer), patcher(layer)) for layer in sorted({c[0] for c in chunk})]
        with torch.no_grad(), run_from_layer(self.model, start, resid), self.model.hooks(hooks):
            logits = self.model.hf_model(
                input_ids=self.ids[:, pos_of_row.to(dev)],
                attention_mask=mask,
                position_ids=pos_of_row.to(dev)[None].expand(b, -1),
                **{cache_kwarg(self.model.hf_model): cache},
                use_cache=True,
                **kw,
            ).logits
        if not kw:
            return [self._score_full(logits, int(offsets[i]), int(first[i])) for i in range(len(chunk))]
        return [self._score_kept(logits, rows, pos_of_row, copy_of_row, i) for i in range(len(chunk))]

    def _score_full(self, packed: Tensor, offset: int, first: int) -> float:
        logits = self.logits.clone()
        logits[:, first:] = packed[:, offset : offset + logits.shape[1] - first]
        return scalar(self.metric(logits)).item()

    def _score_kept(self, packed: Tensor, rows: Tensor, pos_of_row: Tensor, copy_of_row: Tensor, i: int) -> float:
        keep = self.metric.keep.to(self.logits.device)
        kept = self.logits[:, keep].clone()  # [batch, len(keep), vocab]
        for j, row in enumerate(rows.tolist()):
            if int(copy_of_row[row]) == i:
                kept[:, int(torch.searchsorted(keep.cpu(), pos_of_row[row]))] = packed[:, j]
        return scalar(self.metric.on_kept(kept)).item()
