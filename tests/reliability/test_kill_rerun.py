"""kill -9 of the long jobs that write, then the same command (issue 29): the rerun finishes cleanly, its output
equals an uninterrupted run's, and nothing stale (temporary files, half-written page folders) is left.

Each killed run is a real process that sends itself SIGKILL at a fixed point (a patch in the child: the Nth
dashboard page, the rename of the output file, the contrib cache's key), so the kill always lands inside the
window it tests. The reference and the rerun run in-process. One child process per test: seconds each.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from interp.store.atomic import is_temp_name
from tests.reliability.refusals import invoke, snapshot, token_store

ROOT = Path(__file__).resolve().parents[2]
HOOK = "blocks.0.hook_resid_post"

KILL_AT = {
    # the rename of a file written atomically: its bytes are in the temporary file, the final name is not there yet
    "rename": """
import interp.store.atomic as A
_real = A.os.replace
def _replace(src, dst):
    if Path(dst).name == AT or (AT.endswith("*") and Path(dst).name.startswith(AT[:-1])):
        os.kill(os.getpid(), signal.SIGKILL)
    return _real(src, dst)
A.os.replace = _replace
""",
    # the AT-th dashboard page: earlier pages are in .features.partial/, nothing else is written yet
    "page": """
import interp.dashboards.build as B
_real, _n = B.feature_fragment, [0]
def _page(*a, **k):
    _n[0] += 1
    if _n[0] == AT:
        os.kill(os.getpid(), signal.SIGKILL)
    return _real(*a, **k)
B.feature_fragment = _page
""",
    # the contrib cache: the store is complete, its key file not yet written
    "key": """
import interp.contrib.lm_features as L
L._write_key = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
""",
}


def _killed(kind: str, at, main: str) -> None:
    """Run `main` (Python) in a child that kills itself with SIGKILL at `KILL_AT[kind]`; check that it did."""
    code = f"import os, signal, sys\nfrom pathlib import Path\nAT = {at!r}\n{KILL_AT[kind]}\n{main}\n"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr[-3000:])


def _cli(args) -> str:
    return f"sys.argv = ['interp', *{[str(a) for a in args]!r}]\nfrom interp.cli.main import main\nmain()"


def _finished(out: Path) -> dict[str, str]:
    """The output as a user sees it: every file but the lock; no temporary file or partial folder may be left."""
    snap = snapshot(out)
    stale = [k for k in snap if is_temp_name(Path(k).name) or ".partial" in k]
    assert not stale, stale
    return {k: v for k, v in snap.items() if k != ".writer.lock"}


def _killed_then_rerun(tmp_path, args, kind, at, left_behind, read=_finished):
    """Reference run, then the killed run (checked to leave `left_behind(out)` true), then the same command;
    `read(out)`: what must be equal (default every file's bytes)."""
    out = Path(args[args.index("--out") + 1])
    r = invoke(args)
    assert r.exit_code == 0, r.output
    want = read(out)
    shutil.rmtree(out)
    _killed(kind, at, _cli(args))
    assert left_behind(out), snapshot(out)  # the kill landed where it should
    r = invoke(args)  # the same command, no --overwrite
    assert r.exit_code == 0, r.output
    assert read(out) == want
    return out


@pytest.fixture
def store(tmp_path):
    token_store(tmp_path / "store")
    return tmp_path / "store"


def _temp_of(name):
    return lambda out: (
        any(is_temp_name(p.name) and p.name.startswith(f".{name}") for p in out.iterdir()) and not (out / name).exists()
    )


def test_killed_dashboard_reruns_to_the_same_folder(tmp_path, store):
    args = ["dashboard", "--store", store, "--hook", HOOK, "--out", tmp_path / "dash", "--top", "5"]
    out = _killed_then_rerun(
        tmp_path,
        args,
        "page",
        3,
        lambda out: len(list((out / ".features.partial").iterdir())) > 0 and not (out / "dashboard.json").exists(),
    )
    assert (out / "dashboard.json").is_file() and (out / "index.html").is_file()
    assert not (out / ".features.partial").exists()  # the rerun finished the pages and left no half-written ones


def test_killed_sae_eval_reruns_to_the_same_metrics(tmp_path, store):
    r = invoke(
        [
            "sae",
            "train",
            "--store",
            store,
            "--arch",
            "topk",
            "--d-sae",
            "16",
            "--k",
            "2",
            "--out",
            tmp_path / "sae",
            "--max-tokens",
            "256",
            "--batch-size",
            "64",
            "--exclude",
            "none",
        ]
    )
    assert r.exit_code == 0, r.output
    args = ["sae", "eval", "--sae", tmp_path / "sae", "--store", store, "--out", tmp_path / "eval", "--device", "cpu"]
    _killed_then_rerun(tmp_path, args, "rename", "metrics.json", _temp_of("metrics.json"))


def test_killed_eap_ig_extract_reruns_to_the_same_circuit(tmp_path):
    from tests.circuits.conftest import make_model

    make_model("gpt_neox_seq").hf_model.save_pretrained(tmp_path / "model")
    args = [
        "circuits",
        "extract",
        "--model",
        tmp_path / "model",
        "--task",
        "quotes",
        "--method",
        "eap-ig",
        "--ig-steps",
        "2",
        "--max-rows",
        "8",
        "--top-n",
        "20",
        "--min-accuracy",
        "0",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--out",
        tmp_path / "circuit",
    ]

    def circuit(out):
        assert list(_finished(out)) == ["circuit.json"]
        c = json.loads((out / "circuit.json").read_text())
        c["extra"]["score_info"].pop("seconds")  # wall-clock time of the scoring: the one field that may differ
        return c

    _killed_then_rerun(tmp_path, args, "rename", "circuit.json", _temp_of("circuit.json"), circuit)


CONTRIB = """
import torch
torch.set_num_threads(1)
from interp.contrib.lm_features import corpus_store
corpus_store("stdlib-docs", n_seq=4, ctx_len=16, model="pythia-14m-init", layers=(0, 1), root=ROOT_DIR)
"""


@pytest.mark.parametrize("kind, at", [("rename", "shard_*"), ("key", None)])
def test_killed_contrib_cache_reruns_to_the_same_store(tmp_path, kind, at):
    """What `interp contrib run NAME` writes: the corpus store of `interp.contrib.lm_features` (cached once, then
    read), killed while its shard is renamed in, or after the store is complete but before its key file."""
    import torch

    from interp.contrib.lm_features import KEY_FILE, corpus_store
    from interp.store import ActivationStore

    def run(root):
        return corpus_store("stdlib-docs", n_seq=4, ctx_len=16, model="pythia-14m-init", layers=(0, 1), root=root)

    ref = run(tmp_path / "ref")
    _killed(kind, at, CONTRIB.replace("ROOT_DIR", repr(str(tmp_path / "cut"))))
    (folder,) = (tmp_path / "cut").iterdir()
    assert folder.name == ref.path.name and not (folder / KEY_FILE).exists()
    got = run(tmp_path / "cut")  # the experiment's next run
    assert ActivationStore.open(folder).complete and got.verify().ok
    a, b = ref.get_rows(slice(None)), got.get_rows(slice(None))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (folder / KEY_FILE).read_text() == (ref.path / KEY_FILE).read_text()
    assert not [p.name for p in folder.iterdir() if is_temp_name(p.name)]
