"""Is a temporary file a leftover of a dead run, or the write in progress of a live process?

Temporary names carry the writer's pid (`.{name}.tmp-{pid}-{random}`, see `interp.store.atomic`). A
file is spared when that pid is a live process on this machine other than the caller, and (where
`/proc` tells) that process started before the file was last written, so a recycled pid does not keep
a dead run's leftover alive. The caller's own pid is never spared: a run cleans up before its own
writers start, so a file with its pid is from an earlier use of the same pid.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_PID = re.compile(r"\.tmp-(\d+)-[0-9a-f]+$")


def temp_owner(name: str) -> int | None:
    """The pid in a temporary file name, or None."""
    m = _PID.search(name)
    return int(m[1]) if m else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _start_time(pid: int) -> float | None:
    """Wall-clock start time of `pid` from /proc (Linux), or None where that is not available."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: start time in clock ticks after boot
        boot = next(
            int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime ")
        )
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def owned_by_live_process(path: Path) -> bool:
    """True when temporary file `path` belongs to another live process that may still be writing it."""
    pid = temp_owner(path.name)
    if pid is None or pid == os.getpid() or not _alive(pid):
        return False
    started = _start_time(pid)
    if started is None:
        return True
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return False
    return started <= mtime + 1.0  # +1 s: btime is whole seconds
