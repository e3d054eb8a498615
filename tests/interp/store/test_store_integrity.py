"""Damage, mismatches and killed runs: the store detects, refuses or cleans up, and says why."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import torch

import interp.store.atomic as atomic
from interp.store import (
    ActivationStore,
    NotAStoreError,
    StoreCorruptError,
    StoreMismatchError,
    write_shard_file,
)
from tests.interp.store.store_helpers import concat, make_meta, shard_tensors


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _flip_byte(path: Path, offset_from_end: int = 5) -> None:
    data = bytearray(path.read_bytes())
    data[-offset_from_end] ^= 0xFF
    path.write_bytes(bytes(data))


def test_flipped_byte_names_the_shard(make_store):
    store, parts = make_store()
    _flip_byte(store.path / "shard_00002.safetensors")
    store = ActivationStore.open(store.path)  # a fresh object has verified nothing yet
    with pytest.raises(StoreCorruptError, match="shard_00002.safetensors") as err:
        store.read_shard(2)
    assert store.manifest.shards[2].sha256 in str(err.value)
    assert isinstance(err.value, ValueError)
    for i in (0, 1, 3, 4):
        assert torch.equal(store.read_shard(i)["blocks.0.hook_resid_post"], parts[i]["blocks.0.hook_resid_post"])
    report = store.verify()
    assert not report.ok and list(report.corrupt) == ["shard_00002.safetensors"] and len(report.good) == 4
    with pytest.raises(StoreCorruptError, match="shard_00002"):
        list(store.iter_batches(16))
    with pytest.raises(StoreCorruptError, match="shard_00002"):
        store.get_rows([100], verify=True)


def test_missing_shard_file(make_store):
    store, _ = make_store()
    (store.path / "shard_00001.safetensors").unlink()
    with pytest.raises(StoreCorruptError, match="shard_00001.safetensors is missing"):
        store.read_shard(1)
    assert store.verify().missing == ["shard_00001.safetensors"]


def test_open_or_create_with_other_model_changes_nothing(make_store):
    store, _ = make_store()
    before = _snapshot(store.path)
    with pytest.raises(StoreMismatchError) as err:
        ActivationStore.open_or_create(store.path, make_meta(model="other-model"), n_shards_planned=9)
    msg = str(err.value)
    assert err.value.fields == ["model"] and isinstance(err.value, ValueError)
    assert "model" in msg and "tiny-gpt2" in msg and "other-model" in msg
    assert "--out" in msg and f"delete {store.path}" in msg
    assert _snapshot(store.path) == before


def test_mismatch_lists_every_differing_field(make_store):
    store, _ = make_store()
    hooks = {"blocks.0.hook_resid_post": [8], "blocks.2.hook_resid_post": [8]}
    with pytest.raises(StoreMismatchError) as err:
        ActivationStore.open_or_create(store.path, make_meta(hooks=hooks, ctx_len=8))
    assert err.value.fields == ["hooks", "ctx_len"]
    assert "blocks.2.hook_resid_post" in str(err.value) and "blocks.1.attn.hook_z" in str(err.value)


def test_open_or_create_reopens_a_compatible_store(make_store):
    store, _ = make_store()
    again = ActivationStore.open_or_create(store.path, make_meta(code_version="9.9", extra={"note": 1}))
    assert len(again) == len(store) and again.meta.code_version == store.meta.code_version


def test_not_a_store(tmp_path):
    with pytest.raises(NotAStoreError, match="not an activation store.*no manifest.json"):
        ActivationStore.open(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ActivationStore.open(tmp_path / "nowhere")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        ActivationStore.create(tmp_path, make_meta())
    with pytest.raises(FileExistsError, match="not empty"):
        ActivationStore.open_or_create(tmp_path, make_meta())
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_create_refuses_an_existing_store(make_store):
    store, _ = make_store(sizes=(4,))
    with pytest.raises(FileExistsError, match="already holds a store"):
        ActivationStore.create(store.path, make_meta())


def test_clean_partial_removes_leftovers_of_a_killed_run(make_store):
    store, parts = make_store(sizes=(12, 12, 12))
    committed = _snapshot(store.path)
    write_shard_file(store.path, 3, shard_tensors(36, 12))  # written, never committed
    (store.path / ".shard_00004.safetensors.tmp-123-abcdef01").write_bytes(b"half a shard")
    (store.path / ".manifest.json.tmp-123-abcdef02").write_text("{")
    (store.path / "README.txt").write_text("not ours to delete")
    removed = ActivationStore.open(store.path).clean_partial()
    assert sorted(removed) == [
        ".manifest.json.tmp-123-abcdef02",
        ".shard_00004.safetensors.tmp-123-abcdef01",
        "shard_00003.safetensors",
    ]
    after = _snapshot(store.path)
    assert after.pop("README.txt") and after == committed


def test_resume_loses_and_duplicates_no_row(tmp_path):
    sizes = [10, 11, 12, 13]
    parts = [shard_tensors(sum(sizes[:i]), n) for i, n in enumerate(sizes)]
    first = ActivationStore.open_or_create(tmp_path / "s", make_meta(), n_shards_planned=4)
    for i in (0, 2):
        first.commit_shard(write_shard_file(first.path, i, parts[i]))
    write_shard_file(first.path, 1, parts[1])  # killed before its commit
    # ... the run is killed; a second run resumes:
    second = ActivationStore.open_or_create(tmp_path / "s", make_meta(), n_shards_planned=4)
    assert second.clean_partial() == ["shard_00001.safetensors"]
    assert second.missing() == [1, 3] and not second.complete
    for i in second.missing():
        second.commit_shard(write_shard_file(second.path, i, parts[i]))
    final = ActivationStore.open(tmp_path / "s")
    assert final.complete and len(final) == sum(sizes)
    got, want = final.get_rows(slice(None)), concat(parts)
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    def broken_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        atomic.atomic_write_bytes(tmp_path / "manifest.json", b"{}")
    assert list(tmp_path.iterdir()) == []
