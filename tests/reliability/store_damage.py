"""Helpers for the tamper tests: small stores and the kinds of damage a red team applies to them."""

from __future__ import annotations

import json
from pathlib import Path

from interp.store import ActivationStore, write_shard_file
from interp.store.atomic import sha256_file
from tests.interp.store.store_helpers import make_meta, shard_tensors


def build(folder: Path, sizes=(20, 30, 25), seed: int = 0, **meta) -> ActivationStore:
    store = ActivationStore.create(folder, make_meta(**meta), n_shards_planned=len(sizes))
    start = 0
    for i, n in enumerate(sizes):
        store.commit_shard(write_shard_file(store.path, i, shard_tensors(start, n, seed=seed)))
        start += n
    store.close()
    return store


def manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def write_manifest(folder: Path, raw) -> None:
    (folder / "manifest.json").write_text(json.dumps(raw))


def rehash(folder: Path, index: int) -> None:
    """Make the manifest agree with whatever bytes shard `index` now holds (a tamper that updates the hash)."""
    raw = manifest(folder)
    for s in raw["shards"]:
        if s["index"] == index:
            s["sha256"] = sha256_file(folder / s["file"])
    write_manifest(folder, raw)
