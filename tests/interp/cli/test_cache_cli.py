"""`interp cache` / `inspect` / `models` as a user runs them: resume after SIGKILL, Ray, damage, bad input."""

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from interp.store import ActivationStore

HOOKS = "blocks.1.hook_resid_post,blocks.0.attn.hook_z"
BASE = ["--model", "pythia-14m-init", "--hooks", HOOKS, "--ctx-len", "32", "--batch-size", "4"]


def interp(*args, check=True, **kw):
    proc = subprocess.run([sys.executable, "-m", "interp", *args], capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"interp {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc


def all_rows(path):
    store = ActivationStore.open(path)
    return store, store.get_rows(slice(0, len(store)))


def snapshot(folder: Path) -> dict:
    if not folder.exists():
        return {}
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "store"
    interp("cache", *BASE, "--max-tokens", "2048", "--seqs-per-shard", "8", "--out", str(out))
    return out


def test_cache_writes_a_store_that_reads_back(reference):
    store, rows = all_rows(reference)
    assert len(store) == 2048 and store.complete
    assert rows["blocks.1.hook_resid_post"].shape == (2048, 128)
    assert rows["blocks.0.attn.hook_z"].shape == (2048, 4, 32)
    pairs = set(zip(rows["seq"].tolist(), rows["pos"].tolist()))
    assert len(pairs) == 2048  # every (sequence, position) exactly once
    out = interp("inspect", str(reference)).stdout
    assert "all sha256 match" in out and "blocks.0.attn.hook_z" in out


def test_cache_rows_equal_run_with_cache(reference):
    import interp as lib

    store, rows = all_rows(reference)
    model = lib.load_model("pythia-14m-init")
    seqs = rows["tokens"].view(-1, 32)[:3].long()
    _, cache = model.run_with_cache(seqs, names="blocks.1.hook_resid_post")
    assert torch.equal(rows["blocks.1.hook_resid_post"][: 3 * 32], cache["resid_post", 1].flatten(0, 1))


def test_killed_run_resumes_with_no_row_lost_or_duplicated(tmp_path, reference):
    out = tmp_path / "store"
    args = [
        sys.executable,
        "-m",
        "interp",
        "cache",
        *BASE,
        "--max-tokens",
        "2048",
        "--seqs-per-shard",
        "1",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    try:
        while time.time() < deadline:  # kill once a few shards are committed, mid-run
            if (out / "manifest.json").exists() and len(ActivationStore.open(out).shard_indices) >= 3:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    partial = ActivationStore.open(out)
    assert 3 <= len(partial.shard_indices) < 64, "the kill should land mid-run"
    interp("cache", *BASE, "--max-tokens", "2048", "--seqs-per-shard", "1", "--out", str(out))
    _, resumed = all_rows(out)
    _, ref = all_rows(reference)
    order = resumed["seq"] * 32 + resumed["pos"]
    assert torch.equal(order.sort().values, torch.arange(2048))
    for key in ref:
        assert torch.equal(resumed[key][order.argsort()], ref[key]), key


@pytest.mark.slow
def test_ray_executor_writes_the_same_rows(tmp_path, reference):
    out = tmp_path / "ray"
    interp(
        "cache",
        *BASE,
        "--max-tokens",
        "2048",
        "--seqs-per-shard",
        "8",
        "--out",
        str(out),
        "--executor",
        "ray",
        "--num-workers",
        "2",
    )
    _, a = all_rows(out)
    _, b = all_rows(reference)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_flipped_byte_is_named(tmp_path, reference):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    shard = copy / "shard_00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    proc = interp("inspect", str(copy), check=False)
    assert proc.returncode != 0 and "shard_00002.safetensors" in proc.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "pythia-15m"], "unknown model spec"),
        (["--hooks", "blocks.1.hook_resid_pots"], "blocks.1.hook_resid_post"),
        (["--data", "synthetic:nothing"], "valid"),
        (["--data", "file:/nonexistent/x.txt"], "/nonexistent/x.txt"),
        (["--data", "file:EMPTY"], "empty"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(tmp_path, args, message):
    from tests.reliability.refusals import assert_refused, invoke  # in-process: the same root app and guard

    empty = tmp_path / "empty.txt"
    empty.write_text("")
    args = [a.replace("EMPTY", str(empty)) for a in args]
    out = tmp_path / "store"
    full = ["cache", "--model", "pythia-14m-init", "--ctx-len", "32", "--max-tokens", "256", "--out", str(out)]
    assert_refused(invoke([*full, *args]), message)
    assert not out.exists()


def test_appending_from_another_model_changes_nothing(tmp_path, reference):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(reference, copy)
    before = snapshot(copy)
    proc = interp(
        "cache",
        *BASE,
        "--max-tokens",
        "2048",
        "--seqs-per-shard",
        "8",
        "--out",
        str(copy),
        "--model",
        "pythia-31m-init",
        check=False,
    )
    assert proc.returncode == 2 and "model" in proc.stderr and "another --out" in proc.stderr
    assert snapshot(copy) == before


def test_models_lists_specs_and_availability():
    out = interp("models").stdout
    assert "smollm2-135m" in out and "pythia-70m" in out and "gemma3-270m" in out
