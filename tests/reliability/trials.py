"""Many-trial versions of the kill/resume and concurrency checks (a script, not part of the test suite).

    python -m tests.reliability.trials --kind store --trials 20 --out /tmp/trials
    python -m tests.reliability.trials --kind sae   --trials 10 --out /tmp/trials   # c2r, kill -9 at random times
    python -m tests.reliability.trials --kind writers --trials 10 --out /tmp/trials

store: a writer process is killed with SIGKILL at a random moment after its first commit, then the run is
finished in a new process; the store must verify and hold exactly the rows of an uninterrupted run.
sae: a C²R training process is killed with SIGKILL at a random moment after a checkpoint exists (one to
three times), then resumed to the end; the final weights must be bitwise those of an uninterrupted run.
writers: two writers start on one store at once; exactly one may write at a time, the other is refused
(or, with --wait, finishes after it), and the store ends complete and verified.
Prints one JSON line per trial and a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIZES = [40] * 150

STORE_WRITER = """
import sys
from interp.store import ActivationStore, write_shard_file
from tests.interp.store.store_helpers import make_meta, shard_tensors
sizes = {sizes}
wait = {wait}
store = ActivationStore.open_or_create({folder!r}, make_meta(), n_shards_planned=len(sizes), wait=wait)
store.clean_partial()
for i in store.missing():
    store.commit_shard(write_shard_file(store.path, i, shard_tensors(sum(sizes[:i]), sizes[i])))
    print(i, flush=True)
"""

SAE_RUN = """
import torch
torch.set_num_threads(1)
from interp.store import ActivationStore
from sae.train import TrainConfig, train_sae
cfg = TrainConfig(arch="c2r", d_sae=64, k=4, total_tokens=256 * 400, batch_size=256, checkpoint_every=7,
                  settings={{"c2r_interval": 1, "c2r_chunk_size": 16}})
sae, report = train_sae(ActivationStore.open({store!r}), cfg, {out!r}, progress=False)
print(report["resumed_from_step"])
"""


def _env() -> dict:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
    }


def _spawn(code: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _reference_rows():
    from tests.interp.store.store_helpers import concat, shard_tensors

    return concat([shard_tensors(sum(SIZES[:i]), n) for i, n in enumerate(SIZES)])


def store_trial(folder: Path, rng: random.Random) -> dict:
    import torch

    from interp.store import ActivationStore

    p = _spawn(STORE_WRITER.format(sizes=SIZES, wait=False, folder=str(folder)))
    p.stdout.readline()  # the first shard is committed: the run is writing
    delay = rng.uniform(0.0, 2.0)
    time.sleep(delay)
    killed = p.poll() is None
    if killed:
        os.kill(p.pid, signal.SIGKILL)
    p.wait()
    try:
        at_kill = len(json.loads((folder / "manifest.json").read_text())["shards"])
    except (OSError, ValueError, KeyError):
        at_kill = None  # killed before the store existed (or while its first manifest was written)
    q = _spawn(STORE_WRITER.format(sizes=SIZES, wait=False, folder=str(folder)))
    _, err = q.communicate()
    store = ActivationStore.open(folder)
    want, got = _reference_rows(), store.get_rows(slice(None))
    ok = q.returncode == 0 and store.complete and store.verify().ok and all(torch.equal(got[k], want[k]) for k in want)
    return {
        "kind": "store",
        "delay_s": round(delay, 2),
        "killed": killed,
        "shards_committed_at_kill": at_kill,
        "ok": bool(ok),
        "stderr": err[-300:] if not ok else "",
    }


def sae_trial(root: Path, rng: random.Random, reference: dict) -> dict:
    import torch

    from sae import load_sae

    out = root / "run"
    kills = 0
    for _ in range(rng.randint(1, 3)):
        p = _spawn(SAE_RUN.format(store=str(root / "store"), out=str(out)))
        while p.poll() is None and not (out / "checkpoint" / "cfg.json").exists():
            time.sleep(0.05)  # training has written a checkpoint: from here a kill lands mid-run
        time.sleep(rng.uniform(0.0, 2.0))
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            kills += 1
        p.wait()
    p = _spawn(SAE_RUN.format(store=str(root / "store"), out=str(out)))
    stdout, err = p.communicate()
    if p.returncode != 0:
        return {"kind": "sae", "kills": kills, "ok": False, "stderr": err[-300:]}
    got = load_sae(out).state_dict()
    ok = all(torch.equal(got[k], reference[k]) for k in reference)
    return {"kind": "sae", "kills": kills, "final_run_resumed_from_step": int(stdout.split()[-1]), "ok": bool(ok)}


def writers_trial(folder: Path, rng: random.Random) -> dict:
    from interp.store import ActivationStore

    wait = rng.random() < 0.5
    a = _spawn(STORE_WRITER.format(sizes=SIZES, wait=wait, folder=str(folder)))
    time.sleep(rng.uniform(0.0, 3.0))
    b = _spawn(STORE_WRITER.format(sizes=SIZES, wait=wait, folder=str(folder)))
    ea, eb = a.communicate()[1], b.communicate()[1]
    refused = [("StoreLockedError" in e) for e in (ea, eb)]
    codes = [a.returncode, b.returncode]
    store = ActivationStore.open(folder)
    clean = store.complete and store.verify().ok
    # without --wait at most one may be refused (the loser); with it both must succeed
    ok = clean and (all(c == 0 for c in codes) if wait else all(c == 0 or r for c, r in zip(codes, refused)))
    return {
        "kind": "writers",
        "wait": wait,
        "exit_codes": codes,
        "refused": refused,
        "ok": bool(ok),
        "stderr": (ea + eb)[-300:] if not ok else "",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=["store", "sae", "writers"], required=True)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="work folder (emptied)")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    rng = random.Random(a.seed)
    root = Path(a.out)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    reference = None
    if a.kind == "sae":
        import torch

        from sae import load_sae
        from sae.synthetic import write_store

        g = torch.Generator().manual_seed(0)
        write_store(
            root / "store",
            torch.relu(torch.randn(4096, 48, generator=g)) @ torch.randn(48, 32, generator=g),
            rows_per_shard=1024,
        ).close()
        subprocess.run(
            [sys.executable, "-c", SAE_RUN.format(store=str(root / "store"), out=str(root / "reference"))],
            env=_env(),
            check=True,
        )
        reference = load_sae(root / "reference").state_dict()
    results = []
    for t in range(a.trials):
        work = root / f"t{t}"
        work.mkdir()
        if a.kind == "store":
            r = store_trial(work / "store", rng)
        elif a.kind == "writers":
            r = writers_trial(work / "store", rng)
        else:
            shutil.copytree(root / "store", work / "store")
            r = sae_trial(work, rng, reference)
        r["trial"] = t
        results.append(r)
        print(json.dumps(r), flush=True)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"kind": a.kind, "trials": len(results), "ok": sum(r["ok"] for r in results)}))


if __name__ == "__main__":
    main()
