"""Start-up cost of the `interp` command, side by side with a bare interpreter; prints JSON.

    .venv/bin/python benchmarks/bench_cli.py             # 9 interleaved rounds
    .venv/bin/python benchmarks/bench_cli.py --reps 3    # quicker

Each round runs, as fresh processes: `python -c pass`, `interp --help`, each family's `--help` (`interp sae`,
`interp circuits`, `interp attribute`, and one sub-command of each), `interp models` and `interp inspect STORE`
on a 4-shard store made once beforehand (pythia-14m-init, 4 x 16 x 32 tokens).
Bytecode caches are written (PYTHONDONTWRITEBYTECODE is dropped for the runs) and one untimed warm-up
round goes first, so each case runs as an installed CLI does after its first call. (This sandbox sets
PYTHONDONTWRITEBYTECODE=1; with it the toolkit's own modules are compiled from source on every call, which
made `--help` 4.4x instead of ~2x.) Reported: median wall seconds of each and the ratio to `python -c pass`. The goal of issues 15 and 27 is
every `--help` <= 4x a bare interpreter start (`goal_help_le_4x`: all of them); `inspect` reads torch and the shards, so it is expected to
cost the torch import (~1-2 s here).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
FAMILY_HELP = (("sae",), ("circuits",), ("attribute",), ("sae", "train"), ("circuits", "extract"), ("attribute", "show"))
"""Family commands whose --help is timed: the family's package __init__ (torch, sae-lens) must not run."""


def run(args: list[str]) -> float:
    """Wall seconds of `python ARGS` in a fresh process, bytecode caches on."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed CLI runs from cached bytecode
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    return dt


def make_store(folder: Path) -> Path:
    out = folder / "store"
    run(["-m", "interp", "cache", "--model", "pythia-14m-init", "--hooks", "blocks.1.hook_resid_post",
         "--data", "synthetic:repeat", "--ctx-len", "32", "--max-tokens", "2048", "--seqs-per-shard", "16",
         "--device", "cpu", "--out", str(out)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=9, help="Interleaved rounds (median reported).")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(Path(tmp))
        cases = {
            "python -c pass": ["-c", "pass"],
            "interp --help": ["-m", "interp", "--help"],
            **{f"interp {' '.join(c)} --help": ["-m", "interp", *c, "--help"] for c in FAMILY_HELP},
            "interp models": ["-m", "interp", "models"],
            "interp inspect (4 shards)": ["-m", "interp", "inspect", str(store)],
        }
        times: dict[str, list[float]] = {k: [] for k in cases}
        for argv in cases.values():  # warm-up round, not timed: writes the bytecode caches, fills the page cache
            run(argv)
        for _ in range(args.reps):
            for name, argv in cases.items():
                times[name].append(run(argv))
    base = statistics.median(times["python -c pass"])
    result = {
        "reps": args.reps,
        "python": sys.version.split()[0],
        "median_s": {k: round(statistics.median(v), 4) for k, v in times.items()},
        "ratio_to_bare_python": {k: round(statistics.median(v) / base, 2) for k, v in times.items()},
        "goal_help_le_4x": all(statistics.median(v) / base <= 4.0 for k, v in times.items() if k.endswith("--help")),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
