"""What the store's safety costs, side by side in one run; prints JSON with times and ratios.

    .venv/bin/python benchmarks/bench_store.py            # 1M rows x d 64 (256 MB on disk), 1,000-shard cache run
    .venv/bin/python benchmarks/bench_store.py --quick    # 100k rows, 200 shards: a smoke check

1. Verified reads of a 1M-row store, verification on against off (the header check runs in both):
   - a full shuffled pass (`iter_batches`, what SAE training does) and random rows (`get_rows`, what
     `sae eval` and the dashboards do);
   - "first": this process has verified nothing yet, so every shard is hashed once (what one command
     pays on its first pass); "cached": the hashes are remembered for the process (every later pass
     and every later store object). The goal is cached/off <= 1.1.
   Cases run round-robin, `--reps` times, medians reported; the files are in the page cache for all.
2. The writer lock on a 1,000-shard cache run: the same loop (`write_shard_file` + `commit_shard`,
   small shards, so per-shard overhead dominates) with the lock as shipped, and with the lock replaced
   by a no-op; plus the cost of one acquire + release.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from interp.store import ActivationStore, StoreMeta, verified, write_shard_file  # noqa: E402
from interp.store import lock as writer_lock  # noqa: E402

HOOK = "blocks.0.hook_resid_post"


def meta(d: int) -> StoreMeta:
    return StoreMeta(
        model="bench",
        model_sha256="-",
        hooks={HOOK: [d]},
        dtype="float32",
        tokenizer="-",
        ctx_len=128,
        data={"name": "bench"},
    )


def shard(start: int, n: int, d: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(start)
    rows = torch.arange(start, start + n)
    return {
        HOOK: torch.randn(n, d, generator=g),
        "tokens": torch.zeros(n, dtype=torch.int32),
        "seq": rows // 128,
        "pos": (rows % 128).to(torch.int32),
    }


def build(folder: Path, rows: int, rows_per_shard: int, d: int) -> ActivationStore:
    n = -(-rows // rows_per_shard)
    with ActivationStore.create(folder, meta(d), n_shards_planned=n) as store:
        for i in range(n):
            m = min(rows_per_shard, rows - i * rows_per_shard)
            store.commit_shard(write_shard_file(folder, i, shard(i * rows_per_shard, m, d)))
    return ActivationStore.open(folder)


def full_pass(store: ActivationStore, verify: bool) -> None:
    for _ in store.iter_batches(4096, hooks=HOOK, shuffle=True, seed=0, verify=verify):
        pass


def random_rows(store: ActivationStore, verify: bool, n: int) -> None:
    idx = torch.randint(0, len(store), (n,), generator=torch.Generator().manual_seed(1))
    store.get_rows(idx, hooks=HOOK, verify=verify)


def read_bench(folder: Path, reps: int, n_random: int) -> dict:
    store = ActivationStore.open(folder)
    time.sleep(max(0.0, verified.RACY_SECONDS + 0.5 - (time.time() - max(p.stat().st_mtime for p in folder.iterdir()))))
    out = {}
    for what, fn in (("full_pass", full_pass), ("random_rows", lambda s, v: random_rows(s, v, n_random))):
        fn(store, False)  # warm the page cache
        samples: dict[str, list[float]] = {"off": [], "first": [], "cached": []}
        for _ in range(reps):
            for case in ("off", "first", "cached"):
                if case == "first":
                    verified.forget()
                t0 = time.perf_counter()
                fn(ActivationStore.open(folder), case != "off")
                samples[case].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in samples.items()}
        out[what] = {
            "seconds_median": {k: round(v, 4) for k, v in med.items()},
            "ratio_first_vs_off": round(med["first"] / med["off"], 3),
            "ratio_cached_vs_off": round(med["cached"] / med["off"], 3),
            "goal_cached_le_1.1": med["cached"] / med["off"] <= 1.1,
        }
    return out


def cache_run(folder: Path, n_shards: int, lock: bool) -> float:
    real = writer_lock.acquire, writer_lock.release
    if not lock:
        writer_lock.acquire = lambda folder, wait=False: (Path(folder).mkdir(parents=True, exist_ok=True), None)[1]
        writer_lock.release = lambda lk: None
    try:
        t0 = time.perf_counter()
        store = ActivationStore.open_or_create(folder, meta(16), n_shards_planned=n_shards)
        store.clean_partial()
        for i in store.missing():
            store.commit_shard(write_shard_file(folder, i, shard(i * 8, 8, 16)))
        store.close()
        return time.perf_counter() - t0
    finally:
        writer_lock.acquire, writer_lock.release = real


def lock_bench(root: Path, n_shards: int, reps: int) -> dict:
    samples: dict[str, list[float]] = {"with_lock": [], "no_lock": []}
    for r in range(reps):
        for case in samples:
            folder = root / f"cache_{case}_{r}"
            samples[case].append(cache_run(folder, n_shards, case == "with_lock"))
            shutil.rmtree(folder)
    folder = root / "lockonly"
    folder.mkdir()
    t0 = time.perf_counter()
    for _ in range(1000):
        writer_lock.release(writer_lock.acquire(folder))
    acquire_us = (time.perf_counter() - t0) / 1000 * 1e6
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "shards": n_shards,
        "seconds_median": {k: round(v, 3) for k, v in med.items()},
        "ratio_with_vs_without_lock": round(med["with_lock"] / med["no_lock"], 3),
        "acquire_release_microseconds": round(acquire_us, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--rows-per-shard", type=int, default=16_384)
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--cache-shards", type=int, default=None)
    ap.add_argument("--only", choices=["reads", "lock"], default=None, help="run one part only")
    ap.add_argument(
        "--lock-reps", type=int, default=None, help="repetitions of each 1,000-shard run (default reps // 2)"
    )
    ap.add_argument("--dir", default=None, help="work folder (default: a temporary one, removed afterwards)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rows = a.rows or (100_000 if a.quick else 1_000_000)
    reps = a.reps or (3 if a.quick else 5)
    n_cache = a.cache_shards or (200 if a.quick else 1000)
    root = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="bench_store_"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        result: dict = {"reps": reps, "torch_threads": torch.get_num_threads(), "cpus": os.cpu_count()}
        if a.only != "lock":
            folder = root / "store"
            shutil.rmtree(folder, ignore_errors=True)
            t0 = time.perf_counter()
            store = build(folder, rows, a.rows_per_shard, a.d)
            built = time.perf_counter() - t0
            result["store"] = {
                "rows": len(store),
                "d": a.d,
                "shards": len(store.shard_indices),
                "bytes": sum(p.stat().st_size for p in folder.iterdir()),
                "build_seconds": round(built, 2),
            }
            result["reads"] = read_bench(folder, reps, n_random=min(65_536, rows))
        if a.only != "reads":
            result["writer_lock"] = lock_bench(root, n_cache, reps=a.lock_reps or max(1, reps // 2))
    finally:
        if not a.dir:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
