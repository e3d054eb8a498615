"""Run independent tasks (shards of a batch job) in-process or on Ray, committing results in one place.

Activation caching and attribution scoring split their work into shards that do not depend on each
other. `run_tasks` runs `fn(task)` for each, in this process or on Ray (a local Ray it starts and stops,
or a cluster at `ray_address`), and hands each result to `on_result` *in the calling process* as it
arrives: that is where the caller commits a shard to its manifest, so only one process ever writes it.

>>> def cache_shard(i: int) -> ShardInfo:
...     model = worker_cache(("model", spec), lambda: load_model(spec))   # once per worker process
...     return write_shard_file(out, i, run_and_collect(model, i))
>>> run_tasks(store.missing(), cache_shard, executor="ray", num_workers=4, on_result=store.commit_shard)

Results come back in task order; `on_result` sees them in completion order. Ctrl-C cancels outstanding
work and re-raises; everything already handed to `on_result` stays committed, so a rerun resumes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

from interp.infra.extras import install_hint, missing_module_hint
from interp.infra.logs import progress as _progress

T = TypeVar("T")
R = TypeVar("R")
V = TypeVar("V")

Executor = Literal["inprocess", "ray"]
EXECUTORS: tuple[str, ...] = ("inprocess", "ray")
RAY_INSTALL_HINT = install_hint("ray")

_cache: dict[Hashable, Any] = {}
_cache_lock = threading.RLock()  # re-entrant: a factory may itself use worker_cache


def worker_cache(key: Hashable, factory: Callable[[], V]) -> V:
    """`factory()` the first time `key` is asked for in this process, the same object afterwards.

    Why: a Ray worker runs many tasks; loading the model once per process, not once per task, is what
    makes sharding cheap. In-process runs share the same memo.
    """
    with _cache_lock:
        if key not in _cache:
            _cache[key] = factory()
        return _cache[key]


def clear_worker_cache() -> None:
    """Forget everything `worker_cache` holds in this process (frees models; used by tests)."""
    with _cache_lock:
        _cache.clear()


def run_tasks(
    tasks: Sequence[T],
    fn: Callable[[T], R],
    *,
    executor: Executor = "inprocess",
    ray_address: str | None = None,
    num_workers: int | None = None,
    on_result: Callable[[R], None] | None = None,
    progress: bool | str = True,
    desc: str = "tasks",
    ray_options: Mapping[str, Any] | None = None,
) -> list[R]:
    """Run `fn(task)` for every task; return the results in task order.

    - `executor`: "inprocess" (a plain loop) or "ray".
    - `ray_address`: None starts a local Ray for this call (and shuts it down after); otherwise the
      address of a running cluster ("auto", "ray://host:10001", ...). A Ray already initialised by the
      caller is used as is and left running.
    - `num_workers`: Ray CPUs for a local Ray, and the pace of submission (at most 2x this many tasks
      in flight); None means all CPUs. Ignored in-process.
    - `on_result`: called in this process with each result as it arrives (completion order).
    - `progress`: True or "auto" (the same): a tqdm bar on stderr counting tasks when stderr is a terminal, one
      log line when the job starts and one when it ends otherwise (no carriage-return redraws in a log file);
      False: nothing.
    - `ray_options`: options for the Ray tasks, e.g. {"num_gpus": 1} or {"num_cpus": 2}.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; valid executors: {', '.join(EXECUTORS)}")
    if isinstance(progress, str) and progress != "auto":
        raise ValueError(f"progress must be True, False or 'auto', got {progress!r}")
    if num_workers is not None and num_workers <= 0:
        raise ValueError(f"num_workers must be positive, got {num_workers}")
    tasks = list(tasks)
    with _progress(total=len(tasks), desc=desc, unit="task", enabled=bool(progress)) as bar:
        if executor == "inprocess" or not tasks:
            return _run_inprocess(tasks, fn, on_result, bar)
        return _run_ray(tasks, fn, on_result, bar, ray_address, num_workers, dict(ray_options or {}))


def _run_inprocess(tasks: list[T], fn: Callable[[T], R], on_result: Callable[[R], None] | None,
                   bar: _progress) -> list[R]:
    results = []
    for task in tasks:
        result = fn(task)
        results.append(result)
        if on_result is not None:
            on_result(result)
        bar.update(1)
    return results


def import_ray() -> Any:
    """The `ray` module, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as e:
        raise ImportError(missing_module_hint("ray", 'executor="ray"')) from e
    return ray


@contextlib.contextmanager
def ray_session(address: str | None = None, num_workers: int | None = None) -> Iterator[Any]:
    """Ray, initialised for the duration of the block; shut down afterwards only if we started it.

    A local Ray keeps its session files in a short folder of its own under /tmp (Unix socket paths are
    limited to ~107 bytes) that is removed afterwards, and runs without auth tokens, dashboard or usage
    stats, so nothing is written to the home folder. Its workers get this process's extra `sys.path`
    entries, so what imports here (a script's folder, a test package) imports there too; on a cluster,
    install the code on the nodes or pass a `runtime_env`.
    """
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    temp_dir = None
    if address is None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        temp_dir = tempfile.mkdtemp(prefix="interp-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
        # Workers are children of the raylet, which inherits this environment at start: extend PYTHONPATH
        # for the duration of `init` (cheaper than a runtime_env, which defeats prestarted workers).
        old_path = os.environ.get("PYTHONPATH")
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
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = old_path
    else:
        ray.init(address=address, log_to_driver=False, ignore_reinit_error=True)
    try:
        yield ray
    finally:
        ray.shutdown()
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


def _extra_sys_path() -> list[str]:
    """Folders on this process's `sys.path` that a fresh interpreter of the same environment lacks."""
    env_roots = tuple(os.path.abspath(p) + os.sep for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    out: list[str] = []
    for entry in sys.path:
        path = os.path.abspath(entry or os.getcwd())
        if os.path.isdir(path) and not (path + os.sep).startswith(env_roots) and path not in out:
            out.append(path)
    return out


def _apply(fn: Callable[[T], R], task: T) -> R:
    """Ray task body: `fn` travels once as an object ref, so any callable works (partials too)."""
    return fn(task)


def _run_ray(
    tasks: list[T],
    fn: Callable[[T], R],
    on_result: Callable[[R], None] | None,
    bar: _progress,
    address: str | None,
    num_workers: int | None,
    options: dict[str, Any],
) -> list[R]:
    with ray_session(address, num_workers) as ray:
        remote = ray.remote(**options)(_apply) if options else ray.remote(_apply)
        fn_ref = ray.put(fn)
        workers = num_workers or max(1, int(ray.available_resources().get("CPU", 1)))
        max_in_flight = 2 * workers  # enough to keep workers busy, few enough to stop quickly on Ctrl-C
        results: list[Any] = [None] * len(tasks)
        pending: dict[Any, int] = {}
        next_task = 0
        try:
            while next_task < len(tasks) or pending:
                while next_task < len(tasks) and len(pending) < max_in_flight:
                    pending[remote.remote(fn_ref, tasks[next_task])] = next_task
                    next_task += 1
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    i = pending.pop(ref)
                    results[i] = ray.get(ref)  # re-raises a task's exception here
                    if on_result is not None:
                        on_result(results[i])
                    bar.update(1)
        except BaseException:  # Ctrl-C or a failed task: stop what is still queued or running
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            raise
        return results
