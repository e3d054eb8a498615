"""One writer per store: an exclusive `fcntl.flock` on `<store>/.writer.lock`, held for a writer's whole run.

Why: two caching runs on the same `--out` each believe they own the folder; the second one's start-up
clean-up deletes the first one's temporary files (and kills its write), and both compute every shard.
With the lock the second run is refused at once with a message naming the holder (pid, host, start
time), or, asked to wait, blocks until the first has finished and then reads the manifest it left, so
it resumes instead of recomputing.

The kernel drops a flock when its holder exits, however it exits (kill -9 included), so a stale lock
never needs cleaning. The lock file is opened without following a symlink (`O_NOFOLLOW`), and a lock path that
is there but is not a plain file of its own (a symlink to `~/.bashrc` from a tarball, a fifo, a hard link) is
refused by name (`UnsafeLockError`) before the folder is touched: writing the pid record would overwrite the
file behind it. Within one process the lock is shared by every store object of the same folder
(counted), because flock would otherwise make a process conflict with itself. Readers take no lock:
the manifest is replaced atomically, so they always see a consistent set of committed shards.

    >>> lock = acquire("runs/acts", wait=False)   # StoreLockedError if another process writes there
    >>> ...                                       # clean_partial, commit shards
    >>> release(lock)
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from interp.store.errors import StoreLockedError, UnsafeLockError

LOCK_NAME = ".writer.lock"
"""File in the store folder that writers flock (never removed: removing a locked file breaks the lock)."""

_held: dict[str, list] = {}  # real path -> [fd, count]
_guard = threading.Lock()


@dataclass(frozen=True)
class WriterLock:
    """A held writer lock (release it with `release`)."""

    key: str
    """Real path of the lock file."""


def _holder(lock: Path | int) -> str:
    """Who holds the lock, from its record (`lock`: the lock file, or a descriptor open on it)."""
    try:
        text = os.pread(lock, 1 << 16, 0).decode() if isinstance(lock, int) else Path(lock).read_text()
        # raw_decode: a holder that wrote without truncating leaves an older, longer record's tail behind
        info, _ = json.JSONDecoder().raw_decode(text or "{}")
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(info["since"]))
        return f"pid {info['pid']} on {info['host']}, since {when}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _key(folder: Path) -> str:
    """Real path of the lock file of `folder`, without following the lock path itself (it may be a planted link)."""
    return os.path.join(os.path.realpath(folder), LOCK_NAME)


def _not_a_lock_file(path: Path, st: os.stat_result) -> str | None:
    """Why `path` (with lstat result `st`) must not be opened, truncated and written as a lock file, or None."""
    if stat.S_ISLNK(st.st_mode):
        return f"is a symbolic link (to {os.readlink(path)}): writing the lock would overwrite the file it points to"
    if not stat.S_ISREG(st.st_mode):
        kinds = {stat.S_IFIFO: "a named pipe (fifo)", stat.S_IFDIR: "a folder", stat.S_IFSOCK: "a socket"}
        return f"is {kinds.get(stat.S_IFMT(st.st_mode), 'a device or special file')}, not a lock file"
    if st.st_nlink > 1:
        return f"has {st.st_nlink} hard links: writing the lock would overwrite the file behind its other names"
    return None


def _refusal(path: Path, why: str) -> UnsafeLockError:
    return UnsafeLockError(f"{path} {why}; remove {path} (the run makes a lock file of its own) and run again")


def check_lock_path(folder: str | Path) -> None:
    """Refuse (`UnsafeLockError`, naming the path and the fix) a lock path of `folder` that is there but is not a
    plain file of its own: a symlink (to `~/.bashrc`, say, from a tarball or a shared drive), a fifo, a folder,
    a hard link. Opening it would truncate and overwrite another file, or block. Writes nothing; a command
    calls it (through `acquire`) before its first write."""
    path = Path(folder) / LOCK_NAME
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        return  # `folder` is a file: the caller's own check names that
    why = _not_a_lock_file(path, st)
    if why:
        raise _refusal(path, why)


def _open_lock_file(path: Path) -> int:
    """Open (creating) the lock file without following a symlink and without blocking on a fifo, and check on
    the open descriptor that it is a plain file of its own (a path swapped since `check_lock_path` is refused)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO, errno.EISDIR):  # a symlink, a fifo, a folder
            check_lock_path(path.parent)
            raise _refusal(path, "is not a plain file") from None
        raise
    try:
        why = _not_a_lock_file(path, os.fstat(fd))
        if why:
            raise _refusal(path, why)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def acquire(
    folder: str | Path, wait: bool | float = False, what: str = "the store", fix: str | None = None
) -> WriterLock:
    """Take the writer lock of the store at `folder` (created if needed).

    `wait=False`: refuse with `StoreLockedError` if another process holds it; `True`: block until it is
    free; a number: block at most that many seconds. `what` names the folder in the refusal ("the
    store", "the dashboard folder", "the SAE run folder"); only stores offer --wait. `fix`: what the refusal
    advises besides waiting (default: --wait for a store, another --out for other folders).
    A lock path that is not a plain file of its own is refused first (`check_lock_path`).
    """
    folder = Path(folder)
    check_lock_path(folder)  # before the folder is made: a refused run writes nothing
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    key = _key(folder)
    with _guard:
        if key in _held:
            _held[key][1] += 1
            return WriterLock(key)
        fd = _open_lock_file(path)
        try:
            _lock(fd, folder, wait, what, fix)
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}).encode())
        except BaseException:
            os.close(fd)
            raise
        _held[key] = [fd, 1]
        return WriterLock(key)


def _lock(fd: int, folder: Path, wait: bool | float, what: str = "the store", fix: str | None = None) -> None:
    deadline = None if wait is True else time.monotonic() + float(wait or 0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if deadline is None else fcntl.LOCK_NB))
            return
        except BlockingIOError:
            pass
        except OSError as e:
            if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):  # a filesystem without flock
                warnings.warn(
                    f"{folder}: this filesystem does not support file locks; make sure only one "
                    "process writes to this store",
                    stacklevel=4,
                )
                return
            raise
        if time.monotonic() >= deadline:
            fix = fix or ("pass --wait to queue behind it" if what == "the store" else "choose another --out")
            hint = f"wait for it to finish, or {fix}" if not wait else f"it still held the lock after {float(wait):g} s"
            raise StoreLockedError(f"{what} {folder} is being written by {_holder(fd)}: {hint}")
        time.sleep(0.05)


def release(lock: WriterLock | None) -> None:
    """Drop one hold of `lock`; the flock is released when the process's last hold goes."""
    if lock is None:
        return
    with _guard:
        entry = _held.get(lock.key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _held[lock.key]
            os.close(entry[0])  # closing the descriptor releases the flock


@contextmanager
def holding(folder: str | Path, what: str, fix: str | None = None) -> Iterator[WriterLock]:
    """Hold the writer lock of an output folder (a dashboard, an SAE run) for the block.

    A second writer into the same folder is refused at once (`StoreLockedError` naming the holder)
    instead of deleting the first one's temporary files. Once the lock is held, the temporary files of
    dead writers (a run killed with kill -9 between writing a file and renaming it) are removed, so a
    rerun leaves nothing stale. When the block fails in a folder that did not exist before and now holds
    nothing but the lock file, the folder is removed: a refused or failed run leaves the disk as it was.
    """
    folder = Path(folder)
    existed = folder.exists()
    lock = acquire(folder, False, what, fix)
    try:
        clean_leftovers(folder)
        yield lock
    except BaseException:
        if not existed and {p.name for p in folder.iterdir()} <= {LOCK_NAME}:
            (folder / LOCK_NAME).unlink(missing_ok=True)  # we created it: nobody else can hold it yet
            try:
                folder.rmdir()
            except OSError:
                pass
        raise
    finally:
        release(lock)


def clean_leftovers(folder: str | Path) -> list[str]:
    """Remove the temporary files (`interp.store.atomic.temp_path_for` names) that dead processes left at
    the top of `folder`; a live process's write in progress is spared. Returns the names removed."""
    from interp.store.atomic import is_temp_name
    from interp.store.leftovers import owned_by_live_process

    removed = []
    for p in sorted(Path(folder).iterdir()):
        if is_temp_name(p.name) and p.is_file() and not p.is_symlink() and not owned_by_live_process(p):
            p.unlink(missing_ok=True)
            removed.append(p.name)
    return removed


def held(folder: str | Path) -> bool:
    """True when this process holds the writer lock of `folder`."""
    return _key(Path(folder)) in _held
