"""Fixtures for the store tests: small stores of random tensors, built shard by shard (no model)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from interp.store import ActivationStore, write_shard_file
from tests.interp.store.store_helpers import make_meta, shard_tensors


@pytest.fixture
def make_store(tmp_path: Path) -> Callable[..., tuple[ActivationStore, list[dict[str, torch.Tensor]]]]:
    """`make_store(sizes)` -> (store with one committed shard per size, the tensors of each shard)."""

    def make(sizes=(37, 50, 23, 41, 50), name: str = "store", **meta_changes):
        store = ActivationStore.create(tmp_path / name, make_meta(**meta_changes), n_shards_planned=len(sizes))
        parts, start = [], 0
        for i, n in enumerate(sizes):
            parts.append(shard_tensors(start, n))
            store.commit_shard(write_shard_file(store.path, i, parts[-1]))
            start += n
        return store, parts

    return make
