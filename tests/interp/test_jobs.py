"""`run_tasks` and `worker_cache`: same results in-process and on Ray, `on_result` once per task."""

from __future__ import annotations

import functools
import os
import sys

import pytest

from interp import jobs
from interp.infra.jobs import run_tasks, worker_cache

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
    with pytest.raises(ImportError, match=r'pip install -e "\.\[ray\]"'):
        run_tasks([1, 2], abs, executor="ray", progress=False)


def test_progress_bar_counts_tasks(capsys):
    run_tasks(range(3), abs, progress=True, desc="shards")
    err = capsys.readouterr().err
    assert "shards" in err and "3/3" in err


class FakeRay:
    """Just enough of the `ray` module to watch the coordinator: tasks run when `get` asks for them."""

    def __init__(self, initialized: bool = False):
        self.initialized, self.init_kwargs, self.env_at_init = initialized, None, {}
        self.in_flight: set = set()
        self.max_in_flight, self.cancelled, self.shutdowns = 0, [], 0

    def is_initialized(self):
        return self.initialized

    def init(self, **kwargs):
        self.initialized, self.init_kwargs = True, kwargs
        self.env_at_init = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "PYTHONPATH")}

    def shutdown(self):
        self.initialized, self.shutdowns = False, self.shutdowns + 1

    def available_resources(self):
        return {"CPU": 3.0}

    def put(self, value):
        return value

    def remote(self, *fn, **options):
        fake = self

        class Remote:
            def __init__(self, f):
                self.f = f

            def remote(self, *args):
                ref = (self.f, args)
                fake.in_flight.add(ref)
                fake.max_in_flight = max(fake.max_in_flight, len(fake.in_flight))
                return ref

        return Remote(fn[0]) if fn else Remote

    def wait(self, refs, num_returns=1):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        self.in_flight.discard(ref)
        f, args = ref
        return f(*args)

    def cancel(self, ref, force=False):
        self.cancelled.append(ref)


def test_ray_coordinator_paces_starts_and_stops(monkeypatch):
    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setenv("RAY_AUTH_MODE", "x")
    monkeypatch.delenv("RAY_AUTH_MODE")
    seen = []
    out = run_tasks(range(20), lambda x: -x, executor="ray", num_workers=2, on_result=seen.append, progress=False)
    assert out == [-x for x in range(20)] and sorted(seen) == sorted(out)
    assert fake.max_in_flight == 4  # 2 x workers
    kw = fake.init_kwargs
    assert kw["include_dashboard"] is False and kw["num_cpus"] == 2 and kw["log_to_driver"] is False
    assert kw["_temp_dir"].startswith("/tmp/") and not os.path.exists(kw["_temp_dir"])  # ours, removed after
    assert fake.env_at_init["RAY_AUTH_MODE"] == "disabled" and fake.shutdowns == 1


def test_ray_interrupt_cancels_outstanding_work(monkeypatch):
    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    seen = []

    def fn(x):
        if x == 2:
            raise KeyboardInterrupt
        return x

    with pytest.raises(KeyboardInterrupt):
        run_tasks(range(10), fn, executor="ray", num_workers=2, on_result=seen.append, progress=False)
    assert seen == [0, 1] and len(fake.cancelled) == 3 and fake.shutdowns == 1


def test_ray_started_by_the_caller_is_left_running(monkeypatch):
    fake = FakeRay(initialized=True)
    monkeypatch.setitem(sys.modules, "ray", fake)
    assert run_tasks([1, 2, 3], abs, executor="ray", progress=False) == [1, 2, 3]
    assert fake.init_kwargs is None and fake.shutdowns == 0 and fake.max_in_flight == 3  # 2 x 3 CPUs, 3 tasks
    fake.initialized = False
    run_tasks([1], abs, executor="ray", ray_address="ray://head:10001", progress=False)
    assert fake.init_kwargs["address"] == "ray://head:10001" and fake.shutdowns == 1


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


@pytest.mark.slow
def test_ray_task_failure_is_raised_and_ray_stopped():
    ray = pytest.importorskip("ray")
    seen = []
    with pytest.raises(RuntimeError, match="task 3 failed"):
        run_tasks(range(8), fail_on_three, executor="ray", num_workers=2, on_result=seen.append, progress=False)
    assert 3 not in seen and not ray.is_initialized()
