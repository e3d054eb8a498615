"""Clean up a local Ray when the process that started it dies without shutting it down (kill -9, OOM).

`ray.init()` starts the GCS server, the raylet and their workers as children of the coordinator, with
session files under a temp folder. A normal exit calls `ray.shutdown()` (and `interp.jobs.ray_session`
removes the folder), but a coordinator killed with SIGKILL runs no cleanup: the Ray processes are
orphaned and keep their memory, and the temp folder stays.

`watched(ray)` starts a small watchdog process in its own session. It records the coordinator's pid and
the Ray processes started by it (pid and start time, so a reused pid is never touched), polls the
coordinator twice a second, and when it is gone terminates those processes and their children (SIGTERM,
then SIGKILL after 3 s) and removes the temp folder (only a folder named `interp-ray-*`, which
`ray_session` creates). When the block ends normally the watchdog is stopped and does nothing.

    python -m attribution.raywatch PARENT_PID TEMP_DIR PID:START ...   # the watchdog itself
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
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
    procs = [f"{p.pid}:{p.create_time()}" for p in me.children(recursive=False)]
    cmd = [sys.executable, "-m", "attribution.raywatch", str(me.pid), f"{me.create_time()}", _ray_temp_dir(ray), *procs]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                                    os.environ.get("PYTHONPATH")])))
    dog = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True, env=env)
    try:
        yield
    finally:
        dog.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            dog.wait(timeout=5)


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
    procs = [(int(x.split(":")[0]), float(x.split(":")[1])) for x in rest]
    while _alive(psutil, int(parent), float(parent_start)):
        time.sleep(0.5)
    _cleanup(psutil, procs, temp_dir)


if __name__ == "__main__":
    main(sys.argv[1:])
