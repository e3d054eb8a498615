"""A planted `.writer.lock` (issue 40 case 1): a symlink to a file outside the output folder, a fifo or a hard
link where a writer's lock file goes is refused by name, in one line, before anything is written; the file it
points to stays as it was. It used to be opened following the link, truncated and given the writer's pid record.
The refusal lives in `interp.store.lock.acquire`, so every writer below gets it from the same place."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.reliability.refusals import assert_refused, invoke, snapshot, token_store
from tests.reliability.test_output_locks import COMMANDS

HOOK = "blocks.0.hook_resid_post"
CACHE = ["cache", "--model", "pythia-14m-init", "--hooks", HOOK, "--ctx-len", "16", "--max-tokens", "64"]
SAE_TRAIN = ["--arch", "topk", "--d-sae", "16", "--k", "2", "--max-tokens", "256", "--batch-size", "64"]


def _build_args(root, out):
    train = f"tokens:{root / 'train.safetensors'}"
    model = f"looped-gpt:{root / 'run'}@2"
    return ["attribute", "build", "--model", model, "--train", train, "--out", out, "--dim", "16", "--device", "cpu"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Finished outputs of each kind: an activation store (`interp cache`), a gradient store, a trained SAE."""
    import torch

    from attribution.jobs import save_tokens
    from attribution.looped import random_looped_gpt
    from attribution.train import train_lm

    root = tmp_path_factory.mktemp("links")
    torch.set_num_threads(1)
    model = random_looped_gpt(
        hidden_size=16, num_attention_heads=2, num_hidden_layers=1, intermediate_size=32, max_position_embeddings=8
    )
    pool = torch.randint(0, 257, (12, 8), generator=torch.Generator().manual_seed(0))
    train_lm(model, pool, steps=2, batch_size=4, save_steps=(2,), out=root / "run")
    save_tokens(root / "train.safetensors", pool[:8], "interp/byte-level")
    save_tokens(root / "queries.safetensors", pool[8:], "interp/byte-level")
    for args in (
        [*CACHE, "--out", root / "acts"],
        _build_args(root, root / "grads"),
        ["sae", "train", "--store", token_store(root / "store").path, *SAE_TRAIN, "--out", root / "sae"],
    ):
        r = invoke(args)
        assert r.exit_code == 0, r.output
    return root


def _copy(src, dst):
    shutil.copytree(src, dst)
    (dst / ".writer.lock").unlink(missing_ok=True)  # the planted one takes its place
    return dst


def _writer(command, r, t):
    """(command line, the folder whose lock path is planted) of a writer, `r` the fixture's outputs, `t` a folder."""
    if command == "cache (resume)":
        out = _copy(r / "acts", t / "acts")
        return [*CACHE, "--out", out], out
    if command == "attribute build (finished store)":
        out = _copy(r / "grads", t / "grads")
        return _build_args(r, out), out
    if command == "attribute build (new store)":
        return _build_args(r, t / "new"), t / "new"
    if command == "attribute query --out":
        queries = f"tokens:{r / 'queries.safetensors'}"
        args = ["attribute", "query", "--store", r / "grads", "--queries", queries, "--device", "cpu"]
        return [*args, "--out", t / "q"], t / "q"
    if command == "sae eval --out":
        return ["sae", "eval", "--sae", r / "sae", "--store", r / "store", "--out", t / "m"], t / "m"
    if command == "sae dashboard":
        return ["sae", "dashboard", "--sae", r / "sae", "--store", r / "store", "--out", t / "d", "--top", "2"], t / "d"
    if command == "sae train":
        return ["sae", "train", "--store", r / "store", *SAE_TRAIN, "--out", t / "s"], t / "s"
    if command == "dashboard":
        return ["dashboard", "--store", r / "store", "--hook", HOOK, "--out", t / "d"], t / "d"
    return COMMANDS[command](t, t / "out"), t / "out"  # those of the second-writer test


WRITERS = [
    "cache (resume)",
    "attribute build (finished store)",
    "attribute build (new store)",
    "attribute query --out",
    "sae eval --out",
    "sae dashboard",
    "sae train",
    "dashboard",
    "probe",
    "circuits export",
    "attribute show --out",
]


def _plant(folder, kind, victim):
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / ".writer.lock"
    if kind == "symlink":
        os.symlink(victim, lock)
    elif kind == "fifo":
        os.mkfifo(lock)
    else:
        os.link(victim, lock)
    return lock


@pytest.mark.parametrize("command", WRITERS)
def test_a_lock_symlink_is_refused_and_its_target_outside_the_folder_is_untouched(root, tmp_path, command):
    victim = tmp_path / "bashrc"
    victim.write_text("export PATH=$HOME/bin:$PATH  # the user's own file, outside --out\n")
    (tmp_path / "work").mkdir()
    args, folder = _writer(command, root, tmp_path / "work")
    lock = _plant(folder, "symlink", victim)
    before, outside = snapshot(tmp_path), snapshot(root)
    assert_refused(invoke(args), str(lock), "symbolic link", "remove")
    assert snapshot(tmp_path) == before and snapshot(root) == outside
    lock.unlink()  # what the message says to do: the run then goes through
    r = invoke(args)
    assert r.exit_code == 0 or "--overwrite" in r.output, r.output
    assert victim.read_text().startswith("export PATH")


@pytest.mark.parametrize("kind", ["fifo", "hardlink"])
@pytest.mark.parametrize("command", ["attribute build (finished store)", "sae eval --out", "cache (resume)"])
def test_a_lock_path_that_is_a_fifo_or_a_hard_link_is_refused(root, tmp_path, command, kind):
    victim = tmp_path / "bashrc"
    victim.write_text("the user's own file\n")
    (tmp_path / "work").mkdir()
    args, folder = _writer(command, root, tmp_path / "work")
    _plant(folder, kind, victim)
    before = snapshot(tmp_path)
    assert_refused(invoke(args), str(folder / ".writer.lock"), "fifo" if kind == "fifo" else "hard links")
    assert snapshot(tmp_path) == before


def test_the_lock_is_opened_without_following_a_link_made_after_the_check(tmp_path, monkeypatch):
    """The path swapped for a link between the check and the open: the open itself refuses (O_NOFOLLOW)."""
    from interp.store import UnsafeLockError
    from interp.store import lock as L

    victim = tmp_path / "victim"
    victim.write_text("keep")
    folder = tmp_path / "out"
    folder.mkdir()
    real = L.check_lock_path
    calls = []

    def late(f):
        real(f)
        if not calls:  # the first check passes; then the link appears
            os.symlink(victim, folder / L.LOCK_NAME)
        calls.append(f)

    monkeypatch.setattr(L, "check_lock_path", late)
    with pytest.raises(UnsafeLockError, match="symbolic link"):
        L.acquire(folder)
    assert victim.read_text() == "keep" and not L.held(folder)
