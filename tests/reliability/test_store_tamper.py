"""Every reader verifies: damaged, foreign, swapped or mis-declared shards and malformed manifests are
named in a `StoreError`, never read (issue 17 causes 1, 7, 8, 9 and the missing shard entry)."""

from __future__ import annotations

import shutil

import pytest
import torch

import interp.store.verified as verified
from interp.store import ActivationStore, StoreCorruptError, StoreError, write_shard_file
from tests.interp.store.store_helpers import shard_tensors
from tests.reliability.store_damage import build, manifest, rehash, write_manifest


def _read_all_ways(store):
    """What the readers do: random rows (sae eval, dashboards), whole shards, shuffled batches (training)."""
    store.get_rows(torch.arange(len(store)))
    for i in store.shard_indices:
        store.read_shard(i)
    for _ in store.iter_batches(16):
        pass


def _flip(path, offset_from_end=3):
    data = bytearray(path.read_bytes())
    data[-offset_from_end] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["get_rows", "read_shard", "iter_batches"])
def test_a_flipped_byte_is_caught_by_every_read_path_by_default(tmp_path, how):
    build(tmp_path / "s")
    _flip(tmp_path / "s" / "shard_00001.safetensors")
    store = ActivationStore.open(tmp_path / "s")
    with pytest.raises(StoreCorruptError, match="shard_00001"):
        if how == "get_rows":
            store.get_rows(torch.arange(len(store)))  # the default: what `sae eval` and dashboards call
        elif how == "read_shard":
            store.read_shard(1)
        else:
            list(store.iter_batches(16))


def test_a_foreign_shard_is_caught(tmp_path):
    build(tmp_path / "s")
    build(tmp_path / "other", seed=7)
    shutil.copy(tmp_path / "other" / "shard_00001.safetensors", tmp_path / "s" / "shard_00001.safetensors")
    with pytest.raises(StoreCorruptError, match="shard_00001"):
        ActivationStore.open(tmp_path / "s").get_rows([25])


def test_swapped_shards_are_caught(tmp_path):
    build(tmp_path / "s", sizes=(20, 20, 20))
    a, b = tmp_path / "s" / "shard_00000.safetensors", tmp_path / "s" / "shard_00002.safetensors"
    tmp = tmp_path / "x"
    a.rename(tmp), b.rename(a), tmp.rename(b)
    with pytest.raises(StoreCorruptError, match="shard_0000[02]"):
        ActivationStore.open(tmp_path / "s").get_rows([0, 45])


def test_a_shard_whose_header_disagrees_with_the_manifest_is_refused_even_with_a_matching_hash(tmp_path):
    build(tmp_path / "s")
    # rewrite shard 1 with other rows and an updated hash: the manifest still says 30 rows
    write_shard_file(tmp_path / "s", 1, shard_tensors(20, 12))
    rehash(tmp_path / "s", 1)
    store = ActivationStore.open(tmp_path / "s")
    with pytest.raises(StoreCorruptError, match=r"(?s)shard_00001.*rows"):
        _read_all_ways(store)
    with pytest.raises(StoreCorruptError, match="shard_00001"):
        store.get_rows([25], verify=False)  # the header is checked even when the hash is skipped


def test_a_shard_with_other_hook_shapes_and_a_matching_hash_is_refused(tmp_path):
    build(tmp_path / "s")
    bad = shard_tensors(20, 30)
    bad["blocks.0.hook_resid_post"] = torch.randn(30, 5)
    write_shard_file(tmp_path / "s", 1, bad)
    rehash(tmp_path / "s", 1)
    with pytest.raises(StoreCorruptError, match="(?s)shard_00001.*blocks.0.hook_resid_post"):
        _read_all_ways(ActivationStore.open(tmp_path / "s"))


def test_a_file_that_is_not_safetensors_is_named(tmp_path):
    build(tmp_path / "s")
    (tmp_path / "s" / "shard_00002.safetensors").write_bytes(b"\x00" * 64)
    rehash(tmp_path / "s", 2)
    with pytest.raises(StoreCorruptError, match="shard_00002"):
        _read_all_ways(ActivationStore.open(tmp_path / "s"))


@pytest.mark.parametrize(
    "target", ["../outside.safetensors", "/etc/hostname", "shard_00000.safetensors", "sub/shard_00001.safetensors"]
)
def test_manifest_file_names_are_fixed_by_index_never_outside_the_store(tmp_path, target):
    build(tmp_path / "s")
    shutil.copy(tmp_path / "s" / "shard_00001.safetensors", tmp_path / "outside.safetensors")
    raw = manifest(tmp_path / "s")
    raw["shards"][1]["file"] = target
    write_manifest(tmp_path / "s", raw)
    with pytest.raises(StoreError, match="shard 1"):
        ActivationStore.open(tmp_path / "s").get_rows([25])


def _mutations():
    def drop(key):
        return lambda raw: raw.pop(key)

    def shard(key, value):
        def f(raw):
            raw["shards"][0][key] = value

        return f

    def meta(key, value):
        def f(raw):
            raw["meta"][key] = value

        return f

    return {
        "array": lambda raw: [raw],
        "null": lambda raw: None,
        "number": lambda raw: 3,
        "no meta": drop("meta"),
        "meta is a list": lambda raw: raw.update(meta=[1]),
        "no shards": drop("shards"),
        "shards is a dict": lambda raw: raw.update(shards={"0": raw["shards"][0]}),
        "extra top-level key": lambda raw: raw.update(surprise=1),
        "no sha256": lambda raw: raw["shards"][0].pop("sha256"),
        "sha256 not hex": shard("sha256", "zz" * 32),
        "sha256 a number": shard("sha256", 12),
        "n_rows a string": shard("n_rows", "20"),
        "n_rows negative": shard("n_rows", -1),
        "index a float": shard("index", 0.5),
        "index negative": shard("index", -1),
        "extra shard key": shard("evil", 1),
        "shard is a list": lambda raw: raw["shards"].__setitem__(0, [1, 2]),
        "hooks a list": meta("hooks", ["a"]),
        "hook shape a string": meta("hooks", {"blocks.0.hook_resid_post": "8"}),
        "ctx_len a string": meta("ctx_len", "4"),
        "unknown dtype": meta("dtype", "float8"),
        "model a number": meta("model", 3),
        "no model": lambda raw: raw["meta"].pop("model"),
        "extra meta key": meta("evil", 1),
        "format_version a string": lambda raw: raw.update(format_version="1"),
        "n_shards_planned a string": lambda raw: raw.update(n_shards_planned="3"),
        "missing shard entry": lambda raw: raw["shards"].pop(1),
        "n_rows total disagrees": lambda raw: raw.update(n_rows=7),
        "duplicate index": lambda raw: raw["shards"].append(dict(raw["shards"][0])),
    }


@pytest.mark.parametrize("name", list(_mutations()))
def test_a_malformed_manifest_is_a_store_error_naming_the_problem(tmp_path, name):
    build(tmp_path / "s")
    raw = manifest(tmp_path / "s")
    out = _mutations()[name](raw)
    write_manifest(tmp_path / "s", raw if out is None and name != "null" else out)
    with pytest.raises(StoreError) as err:
        ActivationStore.open(tmp_path / "s")
    msg = str(err.value)
    assert "manifest" in msg and str(tmp_path / "s") in msg, msg


def test_an_incomplete_store_warns_readers(tmp_path):
    build(tmp_path / "s")
    raw = manifest(tmp_path / "s")
    raw["shards"].pop(1)
    raw["n_shards"], raw["n_rows"] = 2, 45  # a consistent edit: the store looks like an interrupted run
    write_manifest(tmp_path / "s", raw)
    with pytest.warns(UserWarning, match=r"incomplete.*1"):
        store = ActivationStore.open(tmp_path / "s")
    assert len(store) == 45


def test_each_shard_is_hashed_once_per_process(tmp_path, monkeypatch):
    build(tmp_path / "s")
    import os
    import time

    old = time.time() - 60  # files older than the timestamp granularity window
    for p in (tmp_path / "s").iterdir():
        os.utime(p, (old, old))
    calls = []
    real = verified.sha256_of_file
    real_bytes = verified.sha256_bytes
    monkeypatch.setattr(verified, "sha256_of_file", lambda p: calls.append(p) or real(p))
    monkeypatch.setattr(verified, "sha256_bytes", lambda b: calls.append(len(b)) or real_bytes(b))
    for _ in range(3):
        store = ActivationStore.open(tmp_path / "s")  # a new object each time, as each command makes
        _read_all_ways(store)
    assert len(calls) == 3  # one per shard, not one per object or read
