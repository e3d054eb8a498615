"""Writing shards and reading them back: whole shards, random rows, headers checked on commit."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from interp.store import ActivationStore, StoreError, write_shard_file
from tests.interp.store.store_helpers import HOOKS, concat, make_meta, shard_tensors


def test_write_then_read_back_is_exact(make_store):
    store, parts = make_store()
    for i, part in enumerate(parts):
        got = store.read_shard(i)
        assert set(got) == set(part)
        for k, want in part.items():
            assert got[k].dtype == want.dtype and torch.equal(got[k], want), k
    reopened = ActivationStore.open(store.path)
    assert len(reopened) == len(store) == sum(p["seq"].shape[0] for p in parts)
    assert reopened.hooks == {h: tuple(s) for h, s in HOOKS.items()}
    assert torch.equal(reopened.read_shard(3)["blocks.1.attn.hook_z"], parts[3]["blocks.1.attn.hook_z"])


def test_manifest_lists_shards_and_totals(make_store):
    store, parts = make_store()
    raw = json.loads((store.path / "manifest.json").read_text())
    assert raw["n_rows"] == len(store) and raw["n_shards"] == len(parts) == raw["n_shards_planned"]
    first = raw["shards"][0]
    assert first["file"] == "shard_00000.safetensors" and first["n_rows"] == 37
    assert (first["seq_start"], first["seq_end"]) == (0, 10)  # rows 0..36 with 4 tokens per sequence
    assert set(first) == {"index", "file", "n_rows", "sha256", "seq_start", "seq_end"}
    assert not [p for p in store.path.iterdir() if p.name.startswith(".") and p.name != ".writer.lock"]  # no temp files
    assert store.complete and store.missing() == []


def test_read_shard_selects_hooks_by_name_or_glob(make_store):
    store, parts = make_store()
    got = store.read_shard(1, hooks="blocks.*.hook_resid_post")
    assert set(got) == {"blocks.0.hook_resid_post", "tokens", "seq", "pos"}
    with pytest.raises(KeyError, match="nearest: blocks.0.hook_resid_post"):
        store.read_shard(1, hooks=["blocks.0.hook_resid_pots"])
    with pytest.raises(IndexError, match="not committed"):
        store.read_shard(99)


def test_get_rows_equals_concatenation(make_store):
    store, parts = make_store()
    full = concat(parts)
    n = len(store)
    idx = torch.randint(0, n, (120,), generator=torch.Generator().manual_seed(1))
    idx[:3] = torch.tensor([0, n - 1, 0])  # edges and a duplicate
    for indices in (idx, torch.arange(n), [5, -1, 40]):
        got = store.get_rows(indices)
        want_idx = torch.as_tensor(indices) % n
        for k in full:
            assert torch.equal(got[k], full[k][want_idx]), k
    got = store.get_rows(slice(30, 160, 3), hooks="blocks.1.attn.hook_z")
    assert torch.equal(got["blocks.1.attn.hook_z"], full["blocks.1.attn.hook_z"][30:160:3])
    assert "blocks.0.hook_resid_post" not in got
    empty = store.get_rows(torch.tensor([], dtype=torch.long))
    assert empty["blocks.1.attn.hook_z"].shape == (0, 2, 3) and empty["seq"].dtype == torch.int64
    with pytest.raises(IndexError):
        store.get_rows([n])


def test_write_shard_file_rejects_ragged_rows(tmp_path):
    with pytest.raises(ValueError, match="same first"):
        write_shard_file(tmp_path, 0, {"a": torch.zeros(3, 2), "b": torch.zeros(4)})
    assert list(tmp_path.iterdir()) == []


def test_write_shard_file_accepts_views_that_share_memory(tmp_path):
    base = torch.arange(20, dtype=torch.int32)
    info = write_shard_file(tmp_path, 2, {"x": torch.ones(10, 2), "tokens": base[:10], "pos": base[10:]})
    assert info.file == "shard_00002.safetensors" and info.n_rows == 10 and info.seq_start is None


def test_commit_checks_the_file_against_the_meta(make_store, tmp_path):
    store, _ = make_store(sizes=(10,))
    bad = shard_tensors(10, 8)
    bad["blocks.1.attn.hook_z"] = torch.zeros(8, 3, 2)
    with pytest.raises(StoreError, match=r"blocks.1.attn.hook_z: expected F32 \[8, 2, 3\]"):
        store.commit_shard(write_shard_file(store.path, 1, bad))
    no_tokens = shard_tensors(10, 8)
    del no_tokens["tokens"]
    with pytest.raises(StoreError, match="tokens: expected I32 .* file has nothing"):
        store.commit_shard(write_shard_file(store.path, 1, no_tokens))
    good = write_shard_file(store.path, 1, shard_tensors(10, 8))
    with pytest.raises(StoreError, match="must be named shard_00001.safetensors"):
        store.commit_shard(dataclasses.replace(good, file="../elsewhere.safetensors"))
    assert not store.has_shard(1) and len(ActivationStore.open(store.path)) == 10
    store.commit_shard(good)
    assert store.has_shard(1) and len(ActivationStore.open(store.path)) == 18


def test_commit_same_index_twice(make_store):
    store, _ = make_store(sizes=(10, 10))
    info = store.manifest.shards[1]
    store.commit_shard(info)  # identical: a harmless retry
    other = write_shard_file(store.path, 1, shard_tensors(10, 10, seed=7))
    with pytest.raises(StoreError, match="already committed"):
        store.commit_shard(other)


def test_bfloat16_round_trip(tmp_path):
    store = ActivationStore.create(tmp_path / "bf16", make_meta(dtype="bfloat16"))
    part = shard_tensors(0, 12, dtype=torch.bfloat16)
    store.commit_shard(write_shard_file(store.path, 0, part))
    got = store.get_rows(slice(None))
    assert got["blocks.0.hook_resid_post"].dtype == torch.bfloat16
    assert torch.equal(got["blocks.0.hook_resid_post"], part["blocks.0.hook_resid_post"])


def test_summary(make_store):
    store, _ = make_store()
    s = store.summary()
    assert s["n_rows"] == len(store) == 201 and s["n_shards"] == 5 and s["dtype"] == "float32"
    assert s["hooks"] == HOOKS
    assert s["bytes_per_hook"]["blocks.1.attn.hook_z"] == 201 * 6 * 4
    assert s["bytes_on_disk"] == sum(p.stat().st_size for p in store.path.iterdir())
    json.dumps(s)  # printable as JSON by `interp inspect`


def test_streamed_writer_is_byte_identical_to_safetensors(tmp_path):
    import hashlib

    from safetensors.torch import save

    from interp.store.safetensors_io import write_safetensors_hashed

    g = torch.Generator().manual_seed(0)
    tensors = {
        "blocks.0.hook_resid_post": torch.randn(50, 7, generator=g),
        "tokens": torch.arange(50, dtype=torch.int32),
        "seq": torch.arange(50),
        "half": torch.randn(5, 3, generator=g).to(torch.bfloat16),
        "empty": torch.zeros(0, 4),
    }
    digest = write_safetensors_hashed(tmp_path / "x.safetensors", tensors, {"format": "pt"})
    ref = save(tensors, metadata={"format": "pt"})
    assert (tmp_path / "x.safetensors").read_bytes() == ref
    assert digest == hashlib.sha256(ref).hexdigest()
