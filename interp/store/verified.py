"""The one gate every read of a shard goes through: right file, right header, right bytes.

For shard `index` of a store, `checked_path` returns `store/shard_{index:05d}.safetensors` (the name is
derived from the index, never taken from the manifest) after two checks:
- its header (keys, dtypes, shapes) matches the manifest: every hook with the store's row shape and
  dtype, the index columns, and exactly the row count the manifest records, so a reader can neither
  get a raw safetensors/index error nor iterate fewer rows than `len(store)` says;
- with `verify` (the default of every reader), its sha256 equals the manifest's.

Hashing reads the whole file, so it is done once per file per process: a verified (device, inode,
size, mtime, ctime) key is remembered, and any rewrite of the file changes the key. A file modified
less than `RACY_SECONDS` before it was hashed is not remembered (a second write within the
filesystem's timestamp granularity could keep the key), so it is hashed again at its next read; this
is the "racily clean" rule git uses for its index. Every failure is a `StoreCorruptError` naming the
shard file and the fix.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import struct
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp.store.atomic import sha256_bytes, sha256_file
from interp.store.errors import StoreCorruptError
from interp.store.safetensors_io import SAFETENSORS_DTYPES
from interp.store.shards import INDEX_COLUMNS, ShardInfo, shard_file_name
from interp.store.shards import read_header as header_of_file  # key -> (dtype, shape), header only

if TYPE_CHECKING:
    from interp.store.view import StoreView

RACY_SECONDS = 2.0
"""Files modified more recently than this before hashing are re-hashed at every read (see module doc)."""

_hashed: dict[tuple, str] = {}  # file key -> sha256 verified in this process
_headers: set[tuple] = set()  # (file key, expected header) pairs already checked


def sha256_of_file(path: Path) -> str:
    """sha256 of a file (a seam so tests can count how often shards are hashed)."""
    return sha256_file(path)


def forget() -> None:
    """Drop everything this process remembers about verified files (tests; long-lived services)."""
    _hashed.clear()
    _headers.clear()


def _key(path: Path, st: os.stat_result) -> tuple:
    return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _settled(st: os.stat_result) -> bool:
    return time.time() - st.st_mtime > RACY_SECONDS


def shard_path(store: StoreView, index: int) -> Path:
    """Path of committed shard `index` (name fixed by the index, inside the store folder)."""
    store.shard_info(index)  # IndexError for shards that are not committed
    return store.path / shard_file_name(index)


def missing(store: StoreView, index: int) -> StoreCorruptError:
    return StoreCorruptError(
        f"shard file {shard_file_name(index)} is missing from the store at {store.path}: run the caching "
        "command again to rewrite it"
    )


def corrupt(store: StoreView, index: int, actual: str) -> StoreCorruptError:
    info = store.shard_info(index)
    return StoreCorruptError(
        f"shard file {shard_file_name(index)} in {store.path} is damaged: its sha256 is {actual}, the manifest "
        f"records {info.sha256}. Delete the file and run the caching command again to rewrite that shard."
    )


def expected_header(store: StoreView, info: ShardInfo) -> dict[str, tuple[str, list[int]]]:
    """Key -> (safetensors dtype, shape) that shard `info` must have."""
    dt = SAFETENSORS_DTYPES[store.dtype]
    want = {h: (dt, [info.n_rows, *s]) for h, s in store.meta.hooks.items()}
    want |= {c: (SAFETENSORS_DTYPES[d], [info.n_rows]) for c, d in INDEX_COLUMNS.items()}
    return want


def header_problems(want: dict[str, tuple[str, list[int]]], header: dict[str, tuple[str, list[int]]]) -> list[str]:
    """Human-readable differences between a shard's header and what the manifest implies (empty: fine)."""
    problems = []
    for k, (dtype, shape) in want.items():
        got = header.get(k)
        if got is None or (got[0], list(got[1])) != (dtype, list(shape)):
            has = f"{got[0]} {list(got[1])}" if got is not None else "nothing"
            problems.append(f"{k}: expected {dtype} {list(shape)} ({shape[0]} rows), file has {has}")
    problems += [f"{k}: a tensor that is not a hook of this store" for k in header if k not in want]
    return problems


def header_of_bytes(data: bytes | memoryview) -> dict[str, tuple[str, list[int]]]:
    """Key -> (dtype, shape) parsed from the first bytes of a safetensors file held in memory."""
    (n,) = struct.unpack("<Q", bytes(data[:8]))
    if n > len(data) - 8:
        raise ValueError(f"header length {n} exceeds the file size {len(data)}")
    head = json.loads(bytes(data[8 : 8 + n]))
    return {k: (v["dtype"], list(v["shape"])) for k, v in head.items() if k != "__metadata__"}


def check_header(store: StoreView, index: int, header: dict[str, tuple[str, list[int]]]) -> None:
    problems = header_problems(expected_header(store, store.shard_info(index)), header)
    if problems:
        raise StoreCorruptError(
            f"shard file {shard_file_name(index)} in {store.path} does not match the manifest:\n  "
            + "\n  ".join(problems)
            + "\nDelete the file and run the caching command again to rewrite that shard."
        )


def unreadable(store: StoreView, index: int, exc: BaseException) -> StoreCorruptError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return StoreCorruptError(
        f"shard file {shard_file_name(index)} in {store.path} is not a readable safetensors file ({first}). "
        "Delete the file and run the caching command again to rewrite that shard."
    )


def unopenable(store: StoreView, index: int, exc: OSError) -> StoreCorruptError:
    """A shard path that exists but cannot be opened as a file: a symlink loop (ELOOP), a folder, ..."""
    return StoreCorruptError(
        f"shard file {shard_file_name(index)} in {store.path} cannot be opened ({exc.strerror or exc}). "
        "Delete it and run the caching command again to rewrite that shard."
    )


def _stat(store: StoreView, index: int, path: Path):
    """`path.stat()`, with a missing file and a file that cannot be opened each named (no raw errno)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise missing(store, index) from None
    except OSError as e:  # ELOOP (a symlink loop), ENAMETOOLONG, EACCES on a folder above, ...
        if isinstance(e, PermissionError):
            raise
        raise unopenable(store, index, e) from None
    if not stat.S_ISREG(st.st_mode):
        raise unopenable(store, index, IsADirectoryError(errno.EISDIR, "not a regular file"))
    return st


def checked_path(store: StoreView, index: int, verify: bool = True) -> Path:
    """The path of shard `index` after the header check and (with `verify`) the hash check; see module doc."""
    info = store.shard_info(index)
    path = shard_path(store, index)
    st = _stat(store, index, path)
    key = _key(path, st)
    settled = _settled(st)
    if verify and _hashed.get(key) != info.sha256:
        actual = sha256_of_file(path)
        if actual != info.sha256:
            raise corrupt(store, index, actual)
        if settled:
            _hashed[key] = actual
    hkey = (key, info.n_rows, json.dumps(store.meta.hooks, sort_keys=True), store.meta.dtype)
    if hkey not in _headers:
        try:
            header = header_of_file(path)
        except Exception as e:  # noqa: BLE001 - safetensors raises its own error types
            raise unreadable(store, index, e) from None
        check_header(store, index, header)
        if settled:
            _headers.add(hkey)
    return path


def checked_bytes(store: StoreView, index: int) -> tuple[bytes, Any]:
    """(bytes, stat) of shard `index` read once, hashed and header-checked from those same bytes.

    Used when a whole shard is read anyway and has not been verified in this process yet: one read
    serves the hash and the parse, and what is parsed is exactly what was hashed.
    """
    info = store.shard_info(index)
    path = shard_path(store, index)
    st = _stat(store, index, path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise missing(store, index) from None
    actual = sha256_bytes(data)
    if actual != info.sha256:
        raise corrupt(store, index, actual)
    try:
        header = header_of_bytes(data)
    except Exception as e:  # noqa: BLE001
        raise unreadable(store, index, e) from None
    check_header(store, index, header)
    if _settled(st):
        _hashed[_key(path, st)] = actual
    return data, st


def is_verified(store: StoreView, index: int) -> bool:
    """True when this process already verified the current file of shard `index` (no I/O beyond a stat)."""
    path = shard_path(store, index)
    try:
        st = path.stat()
    except OSError:  # missing, a symlink loop, ...: not verified (the read that follows names the problem)
        return False
    return _hashed.get(_key(path, st)) == store.shard_info(index).sha256


def remember(path: Path, sha256: str) -> None:
    """Record a file just hashed in full (by `verify_all`) as verified, if it is settled."""
    st = path.stat()
    if _settled(st):
        _hashed[_key(path, st)] = sha256
