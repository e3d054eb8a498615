"""`run_tasks` and `worker_cache`: same results in-process and on Ray, `on_result` once per task."""

from __future__ import annotations

import functools
import os
import sys

import pytest

from interp import jobs
from interp.jobs import run_tasks, worker_cache

_factory_calls = 0


def _load_expensive() -> dict[str, int]:
    global _factory_calls
    _factory_calls += 1
    return {"pid": os.getpid(), "loads_in_this_process": _factory_calls}


def square_with_cache(x: int, offset: int = 0) -> tuple[int, int, int]:
    """(x*x + offset, worker pid, how often this process built the cached object)."""
    obj = worker_cache("expensive", _load_expensive)
    return x * x + offset, obj["pid"], obj["loads_in_this_process"]


def fail_on_three(x: int) -> int:
    if x == 3:
        raise RuntimeError("task 3 failed")
    return x


@pytest.fixture(autouse=True)
def _fresh_cache():
    jobs.clear_worker_cache()
    yield
    jobs.clear_worker_cache()


def test_inprocess_runs_each_task_once_in_order():
    seen = []
    out = run_tasks(range(6), square_with_cache, on_result=seen.append, progress=False)
    assert [r[0] for r in out] == [0, 1, 4, 9, 16, 25]
    assert seen == out
    assert {r[1] for r in out} == {os.getpid()} and {r[2] for r in out} == {1}


def test_worker_cache_builds_once_per_key():
    calls = []
    a = worker_cache(("model", "x"), lambda: calls.append(1) or object())
    b = worker_cache(("model", "x"), lambda: calls.append(1) or object())
    c = worker_cache(("model", "y"), lambda: calls.append(1) or object())
    assert a is b and a is not c and len(calls) == 2


def test_interrupt_keeps_completed_results():
    seen = []

    def fn(x: int) -> int:
        if x == 3:
            raise KeyboardInterrupt
        return x

    with pytest.raises(KeyboardInterrupt):
        run_tasks(range(6), fn, on_result=seen.append, progress=False)
    assert seen == [0, 1, 2]


def test_bad_arguments():
    with pytest.raises(ValueError, match="inprocess, ray"):
        run_tasks([1], abs, executor="dask")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="progress"):
        run_tasks([1], abs, progress="yes")
    assert run_tasks([], abs, executor="ray") == []  # nothing to do: no Ray started


def test_missing_ray_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail
    with pytest.raises(ImportError, match=r'pip install "interp-toolkit\[ray\]"'):
        run_tasks([1, 2], abs, executor="ray", progress=False)


def test_progress_bar_counts_tasks(capsys):
    run_tasks(range(3), abs, progress=True, desc="shards")
    err = capsys.readouterr().err
    assert "shards" in err and "3/3" in err


@pytest.mark.slow
def test_ray_matches_inprocess():
    pytest.importorskip("ray")
    import ray

    tasks = list(range(10))
    local = run_tasks(tasks, square_with_cache, progress=False)
    seen = []
    remote = run_tasks(
        tasks, functools.partial(square_with_cache, offset=0), executor="ray", num_workers=2, on_result=seen.append
    )
    assert [r[0] for r in remote] == [r[0] for r in local]
    assert sorted(seen) == sorted(remote) and len(seen) == len(tasks)  # once per task, in completion order
    assert os.getpid() not in {r[1] for r in remote}  # ran in worker processes
    assert {r[2] for r in remote} == {1}  # each worker built the cached object once
    assert not ray.is_initialized()  # the Ray we started was shut down

    seen = []
    with pytest.raises(RuntimeError, match="task 3 failed"):
        run_tasks(range(8), fail_on_three, executor="ray", num_workers=2, on_result=seen.append, progress=False)
    assert 3 not in seen and not ray.is_initialized()
