"""Clean up a local Ray when the process that started it dies without shutting it down (kill -9, OOM).

`ray.init()` starts the GCS server, the raylet and their workers as children of the coordinator, with
session files under a temp folder. A normal exit calls `ray.shutdown()` (and `interp.infra.jobs.ray_session`
removes the folder), but a coordinator killed with SIGKILL runs no cleanup: the Ray processes are
orphaned and keep their memory, and the temp folder stays.

`watched(ray)` starts a small watchdog process in its own session. Twice a second it records the
coordinator's descendants (pid and start time, so a reused pid is never touched: Ray adds agents and
workers after `init`, and they may be orphaned before the watchdog acts); when the coordinator is gone
it terminates those processes and their children (SIGTERM, then SIGKILL after 3 s) and removes the temp folder (only a
folder named `interp-ray-*`, which
`ray_session` creates). When the block ends normally the watchdog is stopped and does nothing.

    python attribution/raywatch.py PARENT_PID PARENT_START TEMP_DIR PID:START ...   # the watchdog itself
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

TEMP_PREFIX = "interp-ray-"


def _ray_temp_dir(ray) -> str:
    node = getattr(getattr(ray, "_private", None), "worker", None)
    node = getattr(node, "_global_node", None)
    for attr in ("get_temp_dir_path", "get_session_dir_path"):
        if node is not None and hasattr(node, attr):
            path = Path(getattr(node, attr)())
            while path != path.parent and not path.name.startswith(TEMP_PREFIX):
                path = path.parent
            if path.name.startswith(TEMP_PREFIX):
                return str(path)
    return ""


@contextlib.contextmanager
def watched(ray, started_here: bool = True) -> Iterator[None]:
    """Run the block with a watchdog that cleans up this process's local Ray if the process dies."""
    if not started_here:
        yield
        return
    import psutil

    me = psutil.Process()
    procs = [f"{p.pid}:{p.create_time()}" for p in me.children(recursive=True)]
    # Run as a plain script (not `-m attribution.raywatch`): importing the package would import torch, and a
    # watchdog still starting when the coordinator dies would miss the processes to clean.
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        str(me.pid),
        f"{me.create_time()}",
        _ray_temp_dir(ray),
        *procs,
    ]
    dog = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
    )
    dog.stdout.readline()  # "watching": the watchdog has taken its first snapshot
    try:
        yield
    finally:
        dog.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            dog.wait(timeout=5)


class RayStartError(ValueError):
    """Ray could not be started or reached (a ValueError, so the CLI reports it as one `error:` line)."""


@contextlib.contextmanager
def ray_for_job(executor: str, address: str | None = None, num_workers: int | None = None) -> Iterator[object]:
    """Ray for a batch job (None in-process), started before the job writes anything, with the watchdog.

    Unlike a bare `ray.init`, a start that fails leaves nothing behind: the local Ray's temp (session) folder is
    removed, whatever Ray started is shut down, and the failure is one `RayStartError` naming the cause. A Ray the
    caller initialised is used as is and left running.
    """
    if executor != "ray":
        yield None
        return
    from interp.infra.jobs import _extra_sys_path, import_ray

    try:
        ray = import_ray()
    except ImportError as e:
        raise RayStartError(str(e)) from None
    if ray.is_initialized():
        yield ray
        return
    temp_dir = None
    try:
        if address is None:
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            temp_dir = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir="/tmp" if os.path.isdir("/tmp") else None)
            old_path = os.environ.get("PYTHONPATH")  # workers inherit the raylet's environment
            os.environ["PYTHONPATH"] = os.pathsep.join([*_extra_sys_path(), *filter(None, [old_path])])
            try:
                ray.init(
                    include_dashboard=False,
                    _temp_dir=temp_dir,
                    num_cpus=num_workers,
                    log_to_driver=False,
                    ignore_reinit_error=True,
                )
            finally:
                if old_path is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = old_path
        else:
            ray.init(address=address, log_to_driver=False, ignore_reinit_error=True)
    except Exception as e:  # noqa: BLE001 - whatever Ray raises, the user gets one line
        with contextlib.suppress(Exception):
            ray.shutdown()
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        first = (str(e).strip().splitlines() or [""])[0]
        raise RayStartError(
            f"could not start {where}: {type(e).__name__}: {first} (nothing was written; rerun "
            "with --executor inprocess, or check `ray status`)"
        ) from None
    try:
        with watched(ray, started_here=address is None):
            yield ray
    finally:
        ray.shutdown()
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


def _alive(psutil, pid: int, start: float) -> bool:
    try:
        return abs(psutil.Process(pid).create_time() - start) < 0.01
    except psutil.Error:
        return False


def _cleanup(psutil, procs: list[tuple[int, float]], temp_dir: str) -> None:
    victims = []
    for pid, start in procs:
        if _alive(psutil, pid, start):
            p = psutil.Process(pid)
            with contextlib.suppress(psutil.Error):
                victims += p.children(recursive=True)
            victims.append(p)
    for p in victims:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, rest = psutil.wait_procs(victims, timeout=3)
    for p in rest:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(rest, timeout=3)
    if temp_dir and Path(temp_dir).name.startswith(TEMP_PREFIX):
        shutil.rmtree(temp_dir, ignore_errors=True)


def main(argv: list[str]) -> None:
    import psutil

    parent, parent_start, temp_dir, *rest = argv
    procs = {(int(x.split(":")[0]), float(x.split(":")[1])) for x in rest}
    me = os.getpid()
    first = True
    while _alive(psutil, int(parent), float(parent_start)):
        # Keep the coordinator's descendants up to date: Ray starts agents and workers after `init`, and
        # when the coordinator dies the raylet may exit first and orphan them (they lose their parent).
        with contextlib.suppress(psutil.Error):
            for p in psutil.Process(int(parent)).children(recursive=True):
                if p.pid != me:
                    procs.add((p.pid, p.create_time()))
        if first:
            print("watching", flush=True)
            first = False
        time.sleep(0.5)
    _cleanup(psutil, sorted(procs), temp_dir)


if __name__ == "__main__":
    main(sys.argv[1:])
