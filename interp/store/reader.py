"""Reading an `ActivationStore`: whole shards, random rows, shuffled streams, integrity checks.

Every read goes through `interp.store.verified` (file named by its index, header checked against the
manifest, sha256 checked once per file per process), then `safetensors.safe_open` (memory-mapped),
slicing the first dimension so random access touches only the rows it needs. When a whole shard is
read and its hash is due, it is parsed from the same bytes that were hashed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from safetensors import safe_open
from safetensors.torch import load
from torch import Tensor

from interp.store import verified
from interp.store.errors import StoreCorruptError
from interp.store.shards import INDEX_COLUMNS

if TYPE_CHECKING:
    from interp.store.view import StoreView

MAX_GAP_ROWS = 64
"""Random access reads one contiguous slice for requested rows closer than this; farther ones split."""


def ensure_verified(store: StoreView, index: int) -> None:
    """Check shard `index` (header always, hash once per file per process); raise if it is damaged."""
    verified.checked_path(store, index, verify=True)


def read_shard(store: StoreView, index: int, hooks: list[str], verify: bool) -> dict[str, Tensor]:
    """Tensors of `hooks` plus the index columns of shard `index` (see `ActivationStore.read_shard`)."""
    keys = [*hooks, *INDEX_COLUMNS]
    if verify and not verified.is_verified(store, index):
        data, _ = verified.checked_bytes(store, index)  # one read serves the hash and the parse
        try:
            tensors = load(data)
        except Exception as e:  # noqa: BLE001 - safetensors' own error types
            raise verified.unreadable(store, index, e) from None
        del data
        return {k: tensors[k] for k in keys}
    path = verified.checked_path(store, index, verify)
    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: f.get_tensor(k) for k in keys}
    except Exception as e:  # noqa: BLE001
        raise verified.unreadable(store, index, e) from None


@dataclass
class VerifyReport:
    """Result of `ActivationStore.verify()`."""

    good: list[str] = field(default_factory=list)
    """Shard files whose hash matches the manifest."""
    corrupt: dict[str, str] = field(default_factory=dict)
    """Shard file -> message, for files whose hash differs."""
    missing: list[str] = field(default_factory=list)
    """Committed shard files that are not on disk."""

    @property
    def ok(self) -> bool:
        return not self.corrupt and not self.missing

    def __str__(self) -> str:
        lines = [f"{len(self.good)} shard(s) good, {len(self.corrupt)} corrupt, {len(self.missing)} missing"]
        lines += [f"  {msg}" for msg in self.corrupt.values()]
        lines += [f"  missing: {name}" for name in self.missing]
        return "\n".join(lines)


def verify_all(store: StoreView) -> VerifyReport:
    """Hash every committed shard file (streamed in chunks); see `VerifyReport`."""
    report = VerifyReport()
    for index in store.shard_indices:
        info = store.shard_info(index)
        path = verified.shard_path(store, index)
        if not path.is_file():
            report.missing.append(path.name)
            continue
        actual = verified.sha256_of_file(path)  # always re-read: an explicit check trusts no memory
        if actual != info.sha256:
            report.corrupt[path.name] = str(verified.corrupt(store, index, actual))
            continue
        try:
            verified.check_header(store, index, verified.header_of_file(path))
        except StoreCorruptError as e:
            report.corrupt[path.name] = str(e)
            continue
        except Exception as e:  # noqa: BLE001
            report.corrupt[path.name] = str(verified.unreadable(store, index, e))
            continue
        verified.remember(path, actual)
        report.good.append(path.name)
    return report


def _as_index(store: StoreView, indices: Tensor | Sequence[int] | slice) -> Tensor:
    n = len(store)
    if isinstance(indices, slice):
        return torch.arange(*indices.indices(n), dtype=torch.int64)
    idx = torch.as_tensor(indices, dtype=torch.int64).reshape(-1)
    idx = torch.where(idx < 0, idx + n, idx)
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= n):
        raise IndexError(f"row index out of range for a store of {n} rows")
    return idx


def _runs(rows: Tensor) -> list[tuple[int, int, Tensor]]:
    """Split sorted unique rows into (start, stop, rows) runs whose inner gaps are <= MAX_GAP_ROWS."""
    cuts = (torch.nonzero(rows.diff() > MAX_GAP_ROWS).flatten() + 1).tolist()
    return [(int(r[0]), int(r[-1]) + 1, r) for r in torch.tensor_split(rows, cuts) if r.numel()]


def get_rows(
    store: StoreView, indices: Tensor | Sequence[int] | slice, hooks: list[str], verify: bool
) -> dict[str, Tensor]:
    """Rows by global index, in the order asked (duplicates allowed); see `ActivationStore.get_rows`."""
    idx = _as_index(store, indices)
    keys = [*hooks, *INDEX_COLUMNS]
    row_shapes = store.hooks
    shapes = {**{h: row_shapes[h] for h in hooks}, **{c: () for c in INDEX_COLUMNS}}
    dtypes = {**{h: store.dtype for h in hooks}, **INDEX_COLUMNS}
    out = {k: torch.empty((idx.numel(), *shapes[k]), dtype=dtypes[k]) for k in keys}
    if idx.numel() == 0:
        return out
    offsets = store.row_offsets()
    which = torch.searchsorted(offsets[1:], idx, right=True)  # position of the shard in shard_indices
    local = idx - offsets[which]
    shard_ids = store.shard_indices
    for p in torch.unique(which).tolist():
        mask = which == p
        rows, inverse = torch.unique(local[mask], sorted=True, return_inverse=True)
        index = shard_ids[p]
        path = verified.checked_path(store, index, verify)
        try:
            with safe_open(str(path), framework="pt") as f:
                for k in keys:
                    sl = f.get_slice(k)
                    parts = [sl[a:b][r - a] for a, b, r in _runs(rows)]
                    out[k][mask] = torch.cat(parts)[inverse]
        except Exception as e:  # noqa: BLE001 - safetensors' own error types
            raise verified.unreadable(store, index, e) from None
    return out


class BatchIterator(Iterator[dict[str, Tensor]]):
    """Shuffled (or ordered) batches from a store with bounded memory: one pass, each row exactly once.

    Shards are visited in a seeded random order and their rows pooled in a buffer that is re-shuffled
    each time a shard joins; batches leave from the front of the buffer, and a new shard is read only
    once it fits. The buffer never holds more than `buffer_limit_rows` rows, which is
    `buffer_shards * (rows of the largest shard)` unless `batch_size` is larger than what that leaves
    room for (then one shard plus one batch); while a shard joins, the mixing makes transient copies of
    the buffer. With `shuffle=False` rows come in store order. Each call of `iter_batches` is one pass;
    pass another `seed` for another order.

    Instrumentation (read after or during iteration): `peak_buffer_rows`, `buffer_limit_rows`,
    `shards_read`, `rows_yielded`.
    """

    def __init__(
        self,
        store: StoreView,
        batch_size: int,
        hooks: list[str],
        shuffle: bool = True,
        seed: int = 0,
        buffer_shards: int = 4,
        drop_last: bool = False,
        verify: bool = True,
        shards: list[int] | None = None,
    ):
        if batch_size <= 0 or buffer_shards <= 0:
            raise ValueError(f"batch_size and buffer_shards must be positive, got {batch_size}, {buffer_shards}")
        self.store, self.batch_size, self.hooks = store, batch_size, hooks
        self.shuffle, self.drop_last, self.verify = shuffle, drop_last, verify
        self._gen = torch.Generator().manual_seed(seed)
        order = store.shard_indices
        if shards is not None:
            bad = sorted(set(shards) - set(order))
            if bad:
                raise ValueError(
                    f"shards {bad} are not committed in {store.path}; it has shards {order[:3]}...{order[-3:]}"
                )
            order = sorted(set(shards))
        if shuffle:
            order = [order[i] for i in torch.randperm(len(order), generator=self._gen).tolist()]
        self._queue = deque(order)
        self._n_rows = sum(store.shard_info(i).n_rows for i in order)
        biggest = max((store.shard_info(i).n_rows for i in order), default=0)
        self.buffer_limit_rows = max(buffer_shards * biggest, biggest + batch_size - 1)
        """Most rows the buffer may hold."""
        self.peak_buffer_rows = 0
        """Most rows the buffer did hold so far."""
        self.shards_read = 0
        self.rows_yielded = 0
        self._it = self._batches()

    def __len__(self) -> int:
        """Number of batches in the pass."""
        full, rest = divmod(self._n_rows, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> dict[str, Tensor]:
        return next(self._it)

    def _batches(self) -> Iterator[dict[str, Tensor]]:
        pool: dict[str, Tensor] = {}
        head, size = 0, 0  # pool rows before `head` were already yielded; `size` rows remain after it
        bs, queue = self.batch_size, self._queue

        def next_fits() -> bool:
            return bool(queue) and size + self.store.shard_info(queue[0]).n_rows <= self.buffer_limit_rows

        while queue or size:
            loaded = [{k: v[head:] for k, v in pool.items()}] if size else []
            n_new = 0
            while next_fits():
                shard = read_shard(self.store, queue.popleft(), self.hooks, self.verify)
                size += shard["seq"].shape[0]
                loaded.append(shard)
                n_new += 1
            self.shards_read += n_new
            if n_new:
                pool, head = self._mix(loaded, size), 0
                self.peak_buffer_rows = max(self.peak_buffer_rows, size)
            del loaded
            # Yield until the next shard fits; when none is left, drain the pool.
            yielded = False
            while size >= bs and (not queue or not next_fits()):
                yield self._take(pool, head, bs)
                head, size, yielded = head + bs, size - bs, True
            if not queue and size:
                if not self.drop_last:
                    yield self._take(pool, head, size)
                head, size = head + size, 0
            # The limit leaves room for one shard beside a partial batch, so each round makes progress.
            assert yielded or next_fits() or not queue, "BatchIterator made no progress"

    def _mix(self, parts: list[dict[str, Tensor]], size: int) -> dict[str, Tensor]:
        """Concatenate the parts; when shuffling, scatter rows straight to random places (one copy)."""
        if not self.shuffle:
            return {k: torch.cat([part[k] for part in parts]) for k in parts[0]}
        dest = torch.randperm(size, generator=self._gen)  # row j of the concatenation goes to dest[j]
        out = {}
        for k, first in parts[0].items():
            buf = torch.empty((size, *first.shape[1:]), dtype=first.dtype)
            start = 0
            for part in parts:
                n = part[k].shape[0]
                buf[dest[start : start + n]] = part[k]
                start += n
            out[k] = buf
        return out

    def _take(self, pool: dict[str, Tensor], head: int, n: int) -> dict[str, Tensor]:
        self.rows_yielded += n
        # clone: a batch the caller keeps must not pin the whole buffer in memory
        return {k: v[head : head + n].clone() for k, v in pool.items()}
