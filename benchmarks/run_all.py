"""Run every `benchmarks/bench_*.py` script and write one JSON summary.

    .venv/bin/python benchmarks/run_all.py [--quick] [--out runs/bench/summary.json]

Each script prints one JSON object on stdout; a script that fails is recorded with its error instead.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="pass --quick to every script")
    ap.add_argument("--out", default="runs/bench/summary.json")
    args = ap.parse_args()
    summary = {}
    for script in sorted(HERE.glob("bench_*.py")):
        t0 = time.perf_counter()
        cmd = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        entry = {"seconds": round(time.perf_counter() - t0, 1), "command": " ".join(cmd[1:])}
        if proc.returncode == 0:
            entry["result"] = json.loads(proc.stdout)
        else:
            entry["error"] = proc.stderr[-2000:]
        summary[script.stem] = entry
        print(f"{script.name}: {'ok' if proc.returncode == 0 else 'FAILED'} in {entry['seconds']} s", file=sys.stderr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
