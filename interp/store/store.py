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
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.store import lock as writer_lock
from interp.store import reader, verified
from interp.store.atomic import is_temp_name
from interp.store.errors import StoreError, StoreMismatchError
from interp.store.leftovers import owned_by_live_process
from interp.store.manifest import Manifest, StoreMeta, manifest_path, read_manifest, write_manifest
from interp.store.shards import INDEX_COLUMNS, ShardInfo, parse_shard_index, shard_file_name, torch_dtype


class ActivationStore:
    """An on-disk activation store. Build one with `create`, `open` or `open_or_create`."""

    def __init__(self, path: str | Path, manifest: Manifest):
        self.path = Path(path)
        self._manifest = manifest
        self._offsets: Tensor | None = None  # row offsets of committed shards, rebuilt after commits
        self._lock: writer_lock.WriterLock | None = None  # held while this object writes

    # ---- opening -------------------------------------------------------------------------------
    @classmethod
    def create(
        cls, path: str | Path, meta: StoreMeta, *, n_shards_planned: int | None = None, wait: bool | float = False
    ) -> ActivationStore:
        """Make a new, empty store at `path` and take its writer lock (see `interp.store.lock`).

        Refuses a folder that already has content, except what a run killed while creating a store
        leaves (its temporary manifest, the lock file): such a folder is accepted and tidied.
        """
        path = Path(path)
        _check_creatable(path)
        lock = writer_lock.acquire(path, wait)
        try:
            _check_creatable(path)  # again, now that no other writer can change the folder
            for p in path.iterdir():
                if is_temp_name(p.name) and p.is_file():
                    p.unlink(missing_ok=True)
            manifest = Manifest(meta, {}, n_shards_planned)
            write_manifest(path, manifest)
        except BaseException:
            writer_lock.release(lock)
            raise
        store = cls(path, manifest)
        store._lock = lock
        return store

    @classmethod
    def open(cls, path: str | Path) -> ActivationStore:
        """Open an existing store for reading; `NotAStoreError` if `path` has no manifest.

        An incomplete store (fewer shards committed than planned: a caching run was interrupted or is
        still running) opens with a `UserWarning` naming the missing shards.
        """
        store = cls(path, read_manifest(Path(path)))
        gaps = store.missing() if store._manifest.n_shards_planned is not None else []
        if gaps:
            shown = ", ".join(map(str, gaps[:10])) + (", ..." if len(gaps) > 10 else "")
            warnings.warn(
                f"the store {path} is incomplete: {len(gaps)} of {store._manifest.n_shards_planned} planned shards "
                f"are not committed ({shown}); reading the {store._manifest.n_shards} committed ones. Rerun the "
                "caching command to finish it.",
                UserWarning,
                stacklevel=2,
            )
        return store

    @classmethod
    def open_or_create(
        cls, path: str | Path, meta: StoreMeta, *, n_shards_planned: int | None = None, wait: bool | float = False
    ) -> ActivationStore:
        """Open the store at `path` for writing if its meta is compatible with `meta`, else create it.

        Takes the writer lock first (`wait`: see `interp.store.lock.acquire`), then reads the manifest,
        so a run that waited for another writer resumes from what that one committed. An existing
        store written with other settings raises `StoreMismatchError` (naming each differing field
        with both values) and nothing on disk changes. A known `n_shards_planned` replaces the plan.
        """
        path = Path(path)
        if not manifest_path(path).exists():
            return cls.create(path, meta, n_shards_planned=n_shards_planned, wait=wait)
        store = cls(path, read_manifest(path))
        store._check_meta(meta)  # a mismatch is refused before anything (the lock file included) is written
        store._lock = writer_lock.acquire(path, wait)
        try:
            store._manifest = read_manifest(path)  # what the previous writer left
            store._check_meta(meta)
            if n_shards_planned is not None and n_shards_planned != store._manifest.n_shards_planned:
                store._manifest.n_shards_planned = n_shards_planned
                write_manifest(path, store._manifest)
        except BaseException:
            store.close()
            raise
        return store

    def _check_meta(self, meta: StoreMeta) -> None:
        diffs = self.meta.differences(meta)
        if diffs:
            lines = "\n".join(f"  {name}: {text}" for name, text in diffs)
            raise StoreMismatchError(
                f"The store at {self.path} was written with other settings than this run:\n{lines}\n"
                f"Choose another --out folder, or delete {self.path} to start over.",
                [name for name, _ in diffs],
            )

    def close(self) -> None:
        """Release the writer lock if this object holds it (reading stays possible)."""
        lock, self._lock = self._lock, None
        writer_lock.release(lock)

    def __enter__(self) -> ActivationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _writer(self) -> None:
        """Take the writer lock before a first write through an object opened for reading, and re-read
        the manifest under it (another writer may have committed since this object read it)."""
        if self._lock is None:
            self._lock = writer_lock.acquire(self.path, False)
            self._manifest = read_manifest(self.path)
            self._offsets = None

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
        """File of committed shard `index`: always `shard_file_name(index)` inside the store folder."""
        return verified.shard_path(self, index)

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
        self._writer()
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
        try:
            header = verified.header_of_file(path)
        except Exception as e:  # noqa: BLE001 - safetensors' own error types
            raise StoreError(
                f"cannot commit {info.file} to {self.path}: not a readable safetensors file ({e})"
            ) from None
        problems = verified.header_problems(verified.expected_header(self, info), header)
        if problems:
            raise StoreError(f"cannot commit {info.file} to {self.path}:\n  " + "\n  ".join(problems))

    def clean_partial(self) -> list[str]:
        """Remove temporary files and shard files the manifest does not list (leftovers of a killed run).

        Takes the writer lock (so no other run is writing here) and spares temporary files that belong
        to a live process other than this one (e.g. an orphaned worker still finishing a write). Call
        it when a run resumes, before its own workers start. Returns the names removed.
        """
        self._writer()
        committed = {s.file for s in self._manifest.shards.values()}
        removed = []
        for p in sorted(self.path.iterdir()):
            stray_shard = parse_shard_index(p.name) is not None and p.name not in committed
            temp = is_temp_name(p.name)
            if p.is_file() and (temp or stray_shard) and not (temp and owned_by_live_process(p)):
                p.unlink(missing_ok=True)
                removed.append(p.name)
        return removed

    # ---- reading (implemented in interp.store.reader) --------------------------------------------
    def read_shard(
        self, index: int, hooks: str | Iterable[str] | None = None, verify: bool = True
    ) -> dict[str, Tensor]:
        """One shard as {hook: [row, ...], "tokens", "seq", "pos": [row]}; index columns always included.

        The header is always checked against the manifest; with `verify`, the file's sha256 too (once per
        file per process), and a mismatch raises `StoreCorruptError` naming the file and both hashes.
        """
        return reader.read_shard(self, index, self.select_hooks(hooks), verify)

    def verify(self) -> reader.VerifyReport:
        """Hash every committed shard file; a report of good, corrupt and missing shards (never raises)."""
        return reader.verify_all(self)

    def get_rows(
        self, indices: Tensor | Sequence[int] | slice, hooks: str | Iterable[str] | None = None, verify: bool = True
    ) -> dict[str, Tensor]:
        """Rows by global index (shards in index order), reading only the needed slices of each file.

        Each shard touched is verified like every read (header always; sha256 once per file per
        process, which reads the whole shard the first time). `verify=False` skips only the hash.
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
            self,
            batch_size,
            self.select_hooks(hooks),
            shuffle,
            seed,
            buffer_shards,
            drop_last,
            verify,
            None if shards is None else list(shards),
        )

    def shard_rows(self, shards: Iterable[int]) -> Tensor:
        """Global row indices of the given committed shards, in store order (for `get_rows`)."""
        offsets, order = self.row_offsets(), self.shard_indices
        pos = {s: i for i, s in enumerate(order)}
        missing = [s for s in shards if s not in pos]
        if missing:
            raise ValueError(f"shards {missing} are not committed in {self.path}")
        return torch.cat(
            [torch.arange(int(offsets[pos[s]]), int(offsets[pos[s] + 1])) for s in sorted(set(shards))]
            or [torch.zeros(0, dtype=torch.long)]
        )

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
        files = [self.shard_path(i) for i in self.shard_indices]
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
            + sum(
                p.stat().st_size for p in (manifest_path(self.path), self.path / writer_lock.LOCK_NAME) if p.exists()
            ),
            "missing_files": sorted(p.name for p in files if not p.exists()),
        }


def _check_creatable(path: Path) -> None:
    """Raise `FileExistsError` unless `path` is absent, or a folder holding nothing but what a killed
    `create` leaves (temporary files, the lock file)."""
    if manifest_path(path).exists():
        raise FileExistsError(f"{path} already holds a store; use ActivationStore.open or open_or_create")
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{path} exists and is not a folder; choose an empty or new folder for a store")
    if path.is_dir():
        other = [p.name for p in path.iterdir() if p.name != writer_lock.LOCK_NAME and not is_temp_name(p.name)]
        if other:
            raise FileExistsError(
                f"{path} exists and is not empty (it holds {', '.join(sorted(other)[:3])}"
                f"{', ...' if len(other) > 3 else ''}); choose an empty or new folder for a store"
            )


__all__ = ["ActivationStore"]
