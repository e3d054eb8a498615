"""A shard that is a symlink loop, or a folder (issue 29 cause 11): readers name the shard and the fix in
one line instead of an ELOOP traceback; the commands that read stores exit 2 and write nothing."""

from __future__ import annotations

import os

import pytest

from interp.store import ActivationStore, StoreCorruptError
from tests.reliability.refusals import assert_refused, invoke, snapshot, token_store

HOOK = "blocks.0.hook_resid_post"


def _damaged(tmp_path, kind):
    token_store(tmp_path / "store")
    shard = tmp_path / "store" / "shard_00000.safetensors"
    shard.unlink()
    if kind == "loop":
        os.symlink(shard.name, shard)
    else:
        shard.mkdir()
    return tmp_path / "store"


@pytest.mark.parametrize("kind", ["loop", "folder"])
def test_reading_rows_names_the_shard(tmp_path, kind):
    store = ActivationStore.open(_damaged(tmp_path, kind))
    with pytest.raises(StoreCorruptError, match="shard_00000.safetensors .* cannot be opened"):
        store.get_rows(slice(0, 4))
    with pytest.raises(StoreCorruptError, match="shard_00000.safetensors"):
        next(iter(store.iter_batches(8, hooks=HOOK)))


@pytest.mark.parametrize("command", ["dashboard", "sae train", "inspect"])
def test_commands_on_a_looping_shard_exit_2(tmp_path, command):
    store = _damaged(tmp_path, "loop")
    before = snapshot(tmp_path)
    if command == "dashboard":
        r = invoke(["dashboard", "--store", store, "--hook", HOOK, "--out", tmp_path / "d", "--top", "2"])
    elif command == "sae train":
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
                tmp_path / "run",
                "--max-tokens",
                "256",
                "--batch-size",
                "64",
                "--exclude",
                "none",
            ]
        )
    else:
        r = invoke(["inspect", store, "--verify"])
    assert_refused(r, "shard_00000.safetensors")
    assert snapshot(tmp_path) == before
