"""A coordinator killed with SIGKILL leaves no Ray processes and no temp folder behind (attribution.raywatch)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

COORDINATOR = textwrap.dedent("""
    import json, sys, time
    import psutil
    from interp.infra.jobs import ray_session
    from attribution.raywatch import _ray_temp_dir, watched
    with ray_session(None, 1) as ray, watched(ray):
        ray.get(ray.remote(lambda: 1).remote())  # a worker exists
        kids = [p.pid for p in psutil.Process().children(recursive=True)]
        open(sys.argv[1], "w").write(json.dumps({"temp": _ray_temp_dir(ray), "pids": kids}))
        time.sleep(600)
""")


@pytest.mark.slow
def test_killed_coordinator_leaves_no_ray_processes_or_temp_folder(tmp_path):
    info = tmp_path / "info.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]), *sys.path]))
    proc = subprocess.Popen([sys.executable, "-c", COORDINATOR, str(info)], env=env)
    deadline = time.time() + 240
    while not info.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
    assert info.exists(), "the coordinator did not start Ray"
    data = json.loads(info.read_text())
    assert data["temp"] and Path(data["temp"]).is_dir() and data["pids"]
    watchdogs = [p for p in data["pids"] if "raywatch" in " ".join(psutil.Process(p).cmdline())]
    ray_pids = [p for p in data["pids"] if p not in watchdogs]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 60
    while time.time() < deadline and (
        any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in ray_pids)
        or Path(data["temp"]).exists()
    ):
        time.sleep(0.5)
    alive = [p for p in ray_pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not alive, [" ".join(psutil.Process(p).cmdline())[:80] for p in alive]
    assert not Path(data["temp"]).exists()
