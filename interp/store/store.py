"""`ActivationStore`: a folder of activation shards plus `manifest.json`, written so a killed run resumes.

Lifecycle of a caching run (the coordinator is the only process that touches the manifest):

>>> store = ActivationStore.open_or_create("runs/acts", meta, n_shards_planned=64)
>>> store.clean_partial()                    # drop leftovers of a killed run
>>> for i in store.missing():                # only the shards not yet committed
...     store.commit_shard(write_shard_file(store.path, i, tensors_for(i)))

Reading (`interp.store.reader` does the work): `read_shard`, `get_rows` (random access), `iter_batches`
(shuffled streaming with bounded memory, for SAE training), `verify`, `summary`.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.store import reader
from interp.store.atomic import is_temp_name
from interp.store.errors import StoreError, StoreMismatchError
from interp.store.manifest import Manifest, StoreMeta, manifest_path, read_manifest, write_manifest
from interp.store.shards import (
    INDEX_COLUMNS,
    SAFETENSORS_DTYPES,
    ShardInfo,
    parse_shard_index,
    read_header,
    shard_file_name,
    torch_dtype,
)


class ActivationStore:
    """An on-disk activation store. Build one with `create`, `open` or `open_or_create`."""

    def __init__(self, path: str | Path, manifest: Manifest):
        self.path = Path(path)
        self._manifest = manifest
        self._verified: set[int] = set()  # shards whose file hash was checked by this object
        self._offsets: Tensor | None = None  # row offsets of committed shards, rebuilt after commits

    # ---- opening -------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | Path, meta: StoreMeta, *, n_shards_planned: int | None = None) -> ActivationStore:
        """Make a new, empty store at `path`; refuses a folder that already has content."""
        path = Path(path)
        if manifest_path(path).exists():
            raise FileExistsError(f"{path} already holds a store; use ActivationStore.open or open_or_create")
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise FileExistsError(f"{path} exists and is not empty; choose an empty or new folder for a store")
        path.mkdir(parents=True, exist_ok=True)
        manifest = Manifest(meta, {}, n_shards_planned)
        write_manifest(path, manifest)
        return cls(path, manifest)

    @classmethod
    def open(cls, path: str | Path) -> ActivationStore:
        """Open an existing store; `NotAStoreError` if `path` has no manifest."""
        return cls(path, read_manifest(Path(path)))

    @classmethod
    def open_or_create(
        cls, path: str | Path, meta: StoreMeta, *, n_shards_planned: int | None = None
    ) -> ActivationStore:
        """Open the store at `path` if there is one and its meta is compatible with `meta`, else create it.

        An existing store written with other settings raises `StoreMismatchError` (naming each
        differing field with both values) and nothing on disk changes. A known `n_shards_planned`
        replaces the stored plan.
        """
        path = Path(path)
        if not manifest_path(path).exists():
            return cls.create(path, meta, n_shards_planned=n_shards_planned)
        store = cls.open(path)
        diffs = store.meta.differences(meta)
        if diffs:
            lines = "\n".join(f"  {name}: {text}" for name, text in diffs)
            raise StoreMismatchError(
                f"The store at {path} was written with other settings than this run:\n{lines}\n"
                f"Choose another --out folder, or delete {path} to start over.",
                [name for name, _ in diffs],
            )
        if n_shards_planned is not None and n_shards_planned != store._manifest.n_shards_planned:
            store._manifest.n_shards_planned = n_shards_planned
            write_manifest(path, store._manifest)
        return store

    # ---- what it holds -------------------------------------------------------------------------
    @property
    def meta(self) -> StoreMeta:
        return self._manifest.meta

    @property
    def manifest(self) -> Manifest:
        """The in-memory manifest (treat as read-only; the store keeps it in step with the file)."""
        return self._manifest

    @property
    def hooks(self) -> dict[str, tuple[int, ...]]:
        """Hook name -> row shape."""
        return {name: tuple(shape) for name, shape in self.meta.hooks.items()}

    @property
    def dtype(self) -> torch.dtype:
        return torch_dtype(self.meta.dtype)

    @property
    def shard_indices(self) -> list[int]:
        """Indices of committed shards, ascending (the order of global rows)."""
        return sorted(self._manifest.shards)

    @property
    def complete(self) -> bool:
        """True when `n_shards_planned` is known and all of those shards are committed."""
        return self._manifest.complete

    def __len__(self) -> int:
        return self._manifest.n_rows

    def __repr__(self) -> str:
        n_shards = self._manifest.n_shards
        return f"ActivationStore({str(self.path)!r}, rows={len(self)}, shards={n_shards}, hooks={list(self.hooks)})"

    def shard_path(self, index: int) -> Path:
        return self.path / self.shard_info(index).file

    def shard_info(self, index: int) -> ShardInfo:
        try:
            return self._manifest.shards[index]
        except KeyError:
            raise IndexError(
                f"shard {index} is not committed in {self.path} ({self._manifest.n_shards} committed)"
            ) from None

    def select_hooks(self, hooks: str | Iterable[str] | None) -> list[str]:
        """Hook names matching `hooks` (names or glob patterns; None = all), in store order."""
        if hooks is None:
            return list(self.meta.hooks)
        patterns = [hooks] if isinstance(hooks, str) else list(hooks)
        chosen: list[str] = []
        for pat in patterns:
            if pat in INDEX_COLUMNS:
                continue  # index columns are always returned
            hits = [h for h in self.meta.hooks if fnmatch.fnmatchcase(h, pat)]
            if not hits:
                near = difflib.get_close_matches(pat, list(self.meta.hooks), n=5, cutoff=0.4)
                hint = f"; nearest: {', '.join(near)}" if near else f"; it holds: {', '.join(self.meta.hooks)}"
                raise KeyError(f"hook {pat!r} is not in the store at {self.path}{hint}")
            chosen += [h for h in hits if h not in chosen]
        return [h for h in self.meta.hooks if h in chosen]

    # ---- writing -------------------------------------------------------------------------------
    def has_shard(self, index: int) -> bool:
        return index in self._manifest.shards

    def missing(self, indices: Iterable[int] | None = None) -> list[int]:
        """Indices in `indices` (default: `range(n_shards_planned)`) that are not committed yet."""
        if indices is None:
            if self._manifest.n_shards_planned is None:
                raise ValueError("this store has no n_shards_planned; pass the indices to check")
            indices = range(self._manifest.n_shards_planned)
        return [i for i in indices if i not in self._manifest.shards]

    def commit_shard(self, info: ShardInfo) -> None:
        """Record a shard written by `write_shard_file` in the manifest (atomic rewrite).

        The file's header is checked against the meta (hooks, row shapes, dtype, index columns, row
        count) first, so a malformed shard is never committed. Committing an index again is an error
        unless the info is identical (then it is a no-op, which makes retries safe).
        """
        old = self._manifest.shards.get(info.index)
        if old is not None:
            if old == info:
                return
            raise StoreError(
                f"shard {info.index} is already committed in {self.path} with other content "
                f"(sha256 {old.sha256[:12]}..., {old.n_rows} rows) than the new one "
                f"(sha256 {info.sha256[:12]}..., {info.n_rows} rows)"
            )
        self._check_shard_file(info)
        self._manifest.shards[info.index] = info
        self._offsets = None
        try:
            write_manifest(self.path, self._manifest)
        except BaseException:
            del self._manifest.shards[info.index]  # keep memory in step with the file
            raise

    def _check_shard_file(self, info: ShardInfo) -> None:
        if info.file != shard_file_name(info.index):
            raise StoreError(f"shard {info.index} must be named {shard_file_name(info.index)}, not {info.file!r}")
        path = self.path / info.file
        if not path.is_file():
            raise StoreError(f"cannot commit shard {info.index}: {path} does not exist")
        header = read_header(path)
        want = {h: (SAFETENSORS_DTYPES[self.dtype], [info.n_rows, *s]) for h, s in self.meta.hooks.items()}
        want |= {c: (SAFETENSORS_DTYPES[d], [info.n_rows]) for c, d in INDEX_COLUMNS.items()}
        problems = [
            f"{k}: expected {w[0]} {w[1]}, file has " + (f"{header[k][0]} {header[k][1]}" if k in header else "nothing")
            for k, w in want.items()
            if header.get(k) != w
        ]
        problems += [f"{k}: not a hook of this store" for k in header if k not in want]
        if problems:
            raise StoreError(f"cannot commit {info.file} to {self.path}:\n  " + "\n  ".join(problems))

    def clean_partial(self) -> list[str]:
        """Remove temporary files and shard files the manifest does not list (leftovers of a killed run).

        Call it when a run resumes, before workers start writing: it would also remove the temporary
        file of a write in progress. Returns the names removed.
        """
        committed = {s.file for s in self._manifest.shards.values()}
        removed = []
        for p in sorted(self.path.iterdir()):
            stray_shard = parse_shard_index(p.name) is not None and p.name not in committed
            if p.is_file() and (is_temp_name(p.name) or stray_shard):
                p.unlink(missing_ok=True)
                removed.append(p.name)
        return removed

    # ---- reading (implemented in interp.store.reader) --------------------------------------------
    def read_shard(
        self, index: int, hooks: str | Iterable[str] | None = None, verify: bool = True
    ) -> dict[str, Tensor]:
        """One shard as {hook: [row, ...], "tokens", "seq", "pos": [row]}; index columns always included.

        With `verify`, the file's sha256 is checked against the manifest (once per store object) and a
        mismatch raises `StoreCorruptError` naming the file and both hashes.
        """
        return reader.read_shard(self, index, self.select_hooks(hooks), verify)

    def verify(self) -> reader.VerifyReport:
        """Hash every committed shard file; a report of good, corrupt and missing shards (never raises)."""
        return reader.verify_all(self)

    def get_rows(
        self, indices: Tensor | Sequence[int] | slice, hooks: str | Iterable[str] | None = None, verify: bool = False
    ) -> dict[str, Tensor]:
        """Rows by global index (shards in index order), reading only the needed slices of each file.

        `verify` defaults to False here because hashing means reading whole shards; call `verify()` once
        beforehand if the files might be damaged.
        """
        return reader.get_rows(self, indices, self.select_hooks(hooks), verify)

    def iter_batches(
        self,
        batch_size: int,
        hooks: str | Iterable[str] | None = None,
        shuffle: bool = True,
        seed: int = 0,
        buffer_shards: int = 4,
        drop_last: bool = False,
        verify: bool = True,
        shards: Iterable[int] | None = None,
    ) -> reader.BatchIterator:
        """Stream `[batch_size, ...]` batches, each row once per pass, holding about `buffer_shards` shards.

        `shards` restricts the pass to those shard indices (e.g. all but a held-out few). See
        `reader.BatchIterator` for the memory bound and the instrumentation it exposes.
        """
        return reader.BatchIterator(
            self, batch_size, self.select_hooks(hooks), shuffle, seed, buffer_shards, drop_last, verify,
            None if shards is None else list(shards),
        )

    def shard_rows(self, shards: Iterable[int]) -> Tensor:
        """Global row indices of the given committed shards, in store order (for `get_rows`)."""
        offsets, order = self.row_offsets(), self.shard_indices
        pos = {s: i for i, s in enumerate(order)}
        missing = [s for s in shards if s not in pos]
        if missing:
            raise ValueError(f"shards {missing} are not committed in {self.path}")
        return torch.cat([torch.arange(int(offsets[pos[s]]), int(offsets[pos[s] + 1])) for s in sorted(set(shards))] or [torch.zeros(0, dtype=torch.long)])

    def row_offsets(self) -> Tensor:
        """[n_shards + 1] int64: global row at which each committed shard starts, then the total."""
        if self._offsets is None:
            sizes = [self._manifest.shards[i].n_rows for i in self.shard_indices]
            self._offsets = torch.tensor([0, *sizes], dtype=torch.int64).cumsum(0)
        return self._offsets

    def identity(self, hook: str | None = None, shards: Iterable[int] | None = None) -> dict[str, Any]:
        """What a run that reads this store records among its settings, so that it refuses to resume on
        another store: model weights hash, data description, hook, dtype and a digest of the shards it
        reads (index and sha256 of each; default all committed). Equal identities mean the same rows.
        The folder path is left out on purpose: a store may move."""
        import hashlib

        order = self.shard_indices if shards is None else sorted(set(shards))
        h = hashlib.sha256()
        for i in order:
            h.update(f"{i}:{self.shard_info(i).sha256}\n".encode())
        return {
            "model": self.meta.model,
            "model_sha256": self.meta.model_sha256,
            "data": self.meta.data,
            "hook": hook,
            "dtype": self.meta.dtype,
            "n_rows": sum(self.shard_info(i).n_rows for i in order),
            "shards_sha256": h.hexdigest(),
        }

    def summary(self) -> dict[str, Any]:
        """What `interp inspect` prints: hooks, shapes, dtype, rows, shards and sizes in bytes."""
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        n = len(self)
        files = [self.path / s.file for s in self._manifest.shards.values()]
        return {
            "path": str(self.path),
            "model": self.meta.model,
            "tokenizer": self.meta.tokenizer,
            "ctx_len": self.meta.ctx_len,
            "dtype": self.meta.dtype,
            "hooks": {h: list(s) for h, s in self.hooks.items()},
            "n_rows": n,
            "n_shards": self._manifest.n_shards,
            "n_shards_planned": self._manifest.n_shards_planned,
            "complete": self.complete,
            "bytes_per_hook": {h: n * math.prod(s) * itemsize for h, s in self.hooks.items()},
            "bytes_on_disk": sum(p.stat().st_size for p in files if p.exists())
            + manifest_path(self.path).stat().st_size,
            "missing_files": sorted(p.name for p in files if not p.exists()),
        }


__all__ = ["ActivationStore"]
