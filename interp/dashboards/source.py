"""Where a dashboard's activations come from: store rows read in sequence-aligned chunks, encoded on the fly.

A `StoreSource` reads one hook's rows from an `ActivationStore` (the next chunk is read on a background
thread while the current one is encoded), applies the shared special-row rule (`interp.cache.rows`), and turns
each chunk into feature activations with an `encode` callable: an SAE's encoder for latents, nothing
for the hook's own channels. With a `decode` callable it also accumulates the reconstruction totals
behind FVU and L0, over exactly the rows the statistics cover. Chunks end on sequence boundaries, so
every context window lies inside its chunk.

`TensorSource` wraps activations already in memory (tests, notebooks, `write_dashboard`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

Encode = Callable[[Tensor], Tensor]


@dataclass
class Chunk:
    """A chunk of rows: activations, their place in the store, and which rows the statistics cover."""

    z: Tensor
    """[n, F] feature activations."""
    rows: Tensor
    """[n] global row ids."""
    seq: Tensor
    """[n] sequence ids."""
    pos: Tensor
    """[n] positions."""
    tokens: Tensor
    """[n] token ids."""
    keep: Tensor
    """[n] bool: row is covered by the statistics (not a special row)."""


@dataclass
class Reconstruction:
    """Running totals for FVU / L0 over kept rows (the same sums as `sae.metrics.reconstruction`)."""

    n: int = 0
    se: float = 0.0
    l0: float = 0.0
    s1: Tensor | None = None
    s2: Tensor | None = None

    def add(self, x: Tensor, x_hat: Tensor, z: Tensor) -> None:
        x = x.float()
        self.se += float((x_hat.float() - x).square().sum())
        self.s1 = x.sum(0) if self.s1 is None else self.s1 + x.sum(0)
        self.s2 = x.square().sum(0) if self.s2 is None else self.s2 + x.square().sum(0)
        self.l0 += float((z > 0).sum())
        self.n += x.shape[0]

    def result(self) -> dict[str, float]:
        if not self.n:
            return {}
        total_var = float((self.s2 - self.s1.square() / self.n).sum())
        return {"fvu": self.se / max(total_var, 1e-12), "l0": self.l0 / self.n, "mse": self.se / self.n, "rows": self.n}


@dataclass
class StoreSource:
    """Rows `rows` (global ids, default all) of `hook` in `store`, encoded by `encode` (default: the channels)."""

    store: Any
    hook: str
    rows: Tensor | None = None
    encode: Encode | None = None
    decode: Encode | None = None
    row_filter: Any | None = None
    """An `interp.cache.rows.RowFilter` (its `keep_tensor(x, pos)` marks ordinary rows); None keeps every row."""
    chunk_rows: int = 4096
    max_kept: int | None = None
    """Stop after this many ordinary rows (those the row filter keeps), as `interp sae eval --max-rows` does;
    None: read every row of `rows`."""
    recon: Reconstruction = field(default_factory=Reconstruction)
    n_read: int = 0
    """Rows read so far (ordinary and special)."""
    n_special: int = 0
    """Special rows the row filter left out, among the rows before the `max_kept` limit."""

    def __post_init__(self) -> None:
        shape = self.store.hooks.get(self.hook)
        if shape is None:
            raise KeyError(f"hook {self.hook!r} is not in the store; it holds: {', '.join(self.store.hooks)}")
        if len(shape) != 1:
            raise ValueError(f"{self.hook} rows have shape {list(shape)}; a dashboard needs one vector per token")
        if self.rows is None:
            self.rows = torch.arange(len(self.store))
        if self.chunk_rows < 1:
            raise ValueError("chunk_rows must be >= 1")

    @property
    def n_rows(self) -> int:
        """Rows the pass will cover at most (for progress)."""
        return len(self.rows) if self.max_kept is None else min(len(self.rows), self.max_kept)

    def _reads(self) -> Iterator[dict[str, Tensor]]:
        for i in range(0, len(self.rows), self.chunk_rows):
            yield self.store.get_rows(self.rows[i : i + self.chunk_rows], hooks=self.hook)

    def chunks(self) -> Iterator[Chunk]:
        from interp.store import prefetch

        carry: dict[str, Tensor] | None = None
        start, kept = 0, 0
        self.n_read = self.n_special = 0
        reads = prefetch(self._reads())
        for part in reads:
            n = len(part["seq"])
            part["_row"] = self.rows[start : start + n]
            start += n
            if carry is not None:
                part = {k: torch.cat([carry[k], part[k]]) for k in part}
            seq = part["seq"]
            other = (seq != seq[-1]).nonzero().flatten()
            # hold back the last sequence (it may continue in the next read) unless this is the end
            cut = len(seq) if start >= len(self.rows) or not len(other) else int(other[-1]) + 1
            carry = {k: v[cut:] for k, v in part.items()} if cut < len(seq) else None
            if cut:
                ch = self._chunk({k: v[:cut] for k, v in part.items()}, kept)
                kept += int(ch.keep.sum())
                yield ch
                if self.max_kept is not None and kept >= self.max_kept:
                    reads.close()
                    return
        if carry is not None:
            yield self._chunk(carry, kept)

    def tokens_of(self, rows: Tensor) -> dict[str, Tensor]:
        """Token ids, sequence ids and positions of global rows (for context windows)."""
        got = self.store.get_rows(rows, hooks=[])
        return {"tokens": got["tokens"], "seq": got["seq"], "pos": got["pos"]}

    def _width(self, x: Tensor) -> int:
        return int(self.encode(x[:1]).shape[1])

    def _chunk(self, part: dict[str, Tensor], kept_before: int = 0) -> Chunk:
        x = part[self.hook].float()
        keep = (
            self.row_filter.keep_tensor(x, part["pos"])
            if self.row_filter is not None
            else torch.ones(len(x), dtype=torch.bool)
        )
        considered = torch.ones_like(keep)
        if self.max_kept is not None:  # rows past the limit only serve as context
            before = keep.cumsum(0) - keep.long() + kept_before  # ordinary rows before this one
            considered = before < self.max_kept
            keep &= considered
        self.n_special += int((~keep & considered).sum())
        self.n_read += len(x)
        with torch.no_grad():
            if self.encode is None:
                z = x
            elif bool(keep.all()):
                z = self.encode(x)
            else:  # special rows never enter the encoder's pool (a batch-level top-k would let them take latents)
                zk = self.encode(x[keep]) if bool(keep.any()) else None
                z = torch.zeros(len(x), zk.shape[1] if zk is not None else self._width(x))
                if zk is not None:
                    z[keep] = zk.float()
            if self.decode is not None and bool(keep.any()):
                every = bool(keep.all())
                zk, xk = (z, x) if every else (z[keep], x[keep])
                self.recon.add(xk, self.decode(zk), zk)
        return Chunk(z, part["_row"], part["seq"], part["pos"], part["tokens"], keep)


@dataclass
class TensorSource:
    """Activations held in memory: `acts` [n, F] with the tokens, sequence ids and positions of the rows."""

    acts: Tensor
    tokens: Tensor
    seq: Tensor
    pos: Tensor
    keep: Tensor | None = None
    chunk_rows: int = 8192
    recon: Reconstruction = field(default_factory=Reconstruction)

    def __post_init__(self) -> None:
        n = self.acts.shape[0]
        if self.acts.dim() != 2:
            raise ValueError(f"acts must be [n_rows, n_features], got shape {tuple(self.acts.shape)}")
        for name in ("tokens", "seq", "pos"):
            if getattr(self, name).shape != (n,):
                raise ValueError(
                    f"{name} must have one entry per row ({n}), got shape {tuple(getattr(self, name).shape)}"
                )

    @property
    def n_rows(self) -> int:
        return self.acts.shape[0]

    def chunks(self) -> Iterator[Chunk]:
        n, s = self.n_rows, self.seq
        i = 0
        while i < n:
            j = min(n, i + self.chunk_rows)
            while j < n and j > i and s[j] == s[j - 1]:  # end the chunk on a sequence boundary
                j -= 1
            if j == i:
                j = min(n, i + self.chunk_rows)
            keep = torch.ones(j - i, dtype=torch.bool) if self.keep is None else self.keep[i:j]
            yield Chunk(self.acts[i:j].float(), torch.arange(i, j), s[i:j], self.pos[i:j], self.tokens[i:j], keep)
            i = j

    def tokens_of(self, rows: Tensor) -> dict[str, Tensor]:
        return {"tokens": self.tokens[rows], "seq": self.seq[rows], "pos": self.pos[rows]}


class _TextTable:
    """A stand-in tokenizer over a list of token strings (id = position in the list)."""

    def __init__(self, texts: list[str]):
        self.texts = texts

    def decode(self, ids: list[int]) -> str:
        return "".join(self.texts[i] for i in ids)

    def convert_ids_to_tokens(self, i: int) -> str:
        return self.texts[i]


@dataclass
class TokenRows:
    """Rows described by their token strings (no tokenizer): ids are assigned per distinct string."""

    token_text: list[str]
    """Text of the token of each row (any string; pages escape it)."""
    seq: Tensor
    """[n] sequence id of each row."""
    pos: Tensor
    """[n] position of each row in its sequence."""

    def __post_init__(self) -> None:
        n = len(self.token_text)
        if self.seq.shape != (n,) or self.pos.shape != (n,):
            raise ValueError(
                f"token_text, seq and pos must have one entry per row; got {n}, {tuple(self.seq.shape)}, "
                f"{tuple(self.pos.shape)}"
            )
        ids: dict[str, int] = {}
        self.token_ids = torch.tensor([ids.setdefault(t, len(ids)) for t in self.token_text], dtype=torch.long)
        self._texts = list(ids)

    def vocab(self, tokenizer: Any = None) -> Any:
        from interp.dashboards.tokens import Vocab

        return Vocab(tokenizer if tokenizer is not None else _TextTable(self._texts))
