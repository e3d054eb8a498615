"""Atomic file writes and file hashing.

A file is written under a temporary name in its own folder, flushed and fsynced, then renamed onto its
final name with `os.replace` (atomic on POSIX within one filesystem). A run killed at any instant thus
leaves either the old file or the new one under the final name, never half of one; what it may leave is
a temporary file, which `ActivationStore.clean_partial` recognises by `is_temp_name` and removes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

TEMP_TAG = ".tmp-"
"""Marker in the names of temporary files: `.{final name}.tmp-{pid}-{random}`."""


def temp_path_for(path: Path) -> Path:
    """A fresh temporary path next to `path` (same folder, so `os.replace` stays atomic)."""
    return path.with_name(f".{path.name}{TEMP_TAG}{os.getpid()}-{uuid.uuid4().hex[:8]}")


def is_temp_name(name: str) -> bool:
    """True for names made by `temp_path_for`."""
    return name.startswith(".") and TEMP_TAG in name


def fsync_dir(folder: Path) -> None:
    """Persist a rename in `folder` (best effort: some filesystems refuse to fsync a directory)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_with(path: Path, write: Callable[[Path], T]) -> T:
    """Atomically create `path` with `write(tmp_path)`: temporary file in the same folder, fsync, `os.replace`.

    Returns what `write` returns (e.g. the hash it computed on the way).
    """
    path = Path(path)
    tmp = temp_path_for(path)
    try:
        result = write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)
    return result


def atomic_write_bytes(path: Path, data: bytes | bytearray | memoryview) -> None:
    """Write `data` to `path` atomically (see `atomic_write_with`)."""
    atomic_write_with(path, lambda tmp: Path(tmp).write_bytes(data))


def sha256_bytes(data: bytes | bytearray | memoryview) -> str:
    """Hex sha256 of a byte string."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, chunk_bytes: int = 1 << 22) -> str:
    """Hex sha256 of a file, read in chunks so memory stays small whatever the file size."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk_bytes):
            h.update(block)
    return h.hexdigest()
