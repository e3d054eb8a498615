"""`iter_batches`: each row once per pass, shuffled across shards, with a bounded buffer."""

from __future__ import annotations

import pytest
import torch

import interp.store.reader as reader
from interp.store import ActivationStore
from tests.interp.store.store_helpers import concat, make_meta, row_ids


def _ids(batches) -> torch.Tensor:
    return torch.cat([row_ids(b) for b in batches])


def test_unshuffled_is_store_order(make_store):
    store, parts = make_store()
    full = concat(parts)
    batches = list(store.iter_batches(16, shuffle=False))
    assert [b["seq"].shape[0] for b in batches] == [16] * 12 + [9]
    got = concat(batches)
    for k in full:
        assert torch.equal(got[k], full[k]), k


def test_shuffled_yields_every_row_once_in_another_order(make_store):
    store, parts = make_store()
    full = concat(parts)
    it = store.iter_batches(16, shuffle=True, seed=3)
    batches = list(it)
    assert len(batches) == len(it) == 13
    ids = _ids(batches)
    assert sorted(ids.tolist()) == list(range(len(store)))
    assert not torch.equal(ids, torch.arange(len(store)))
    for b in batches:  # rows travel whole: every column of a row comes from the same stored row
        assert torch.equal(b["blocks.1.attn.hook_z"], full["blocks.1.attn.hook_z"][row_ids(b)])
        assert torch.equal(b["tokens"], full["tokens"][row_ids(b)])
    assert torch.equal(_ids(store.iter_batches(16, seed=3)), ids)  # seeded
    assert not torch.equal(_ids(store.iter_batches(16, seed=4)), ids)


def test_buffer_never_holds_more_than_two_shards(make_store, monkeypatch):
    store, _ = make_store(sizes=(50, 50, 45, 50, 30, 50, 50))
    # Independent instrumentation: rows read from disk minus rows handed out = rows held in memory.
    seen = {"read": 0, "yielded": 0, "peak": 0}
    real_read = reader.read_shard

    def counting_read(*args, **kwargs):
        out = real_read(*args, **kwargs)
        seen["read"] += out["seq"].shape[0]
        seen["peak"] = max(seen["peak"], seen["read"] - seen["yielded"])
        return out

    monkeypatch.setattr(reader, "read_shard", counting_read)
    it = store.iter_batches(16, hooks="blocks.0.hook_resid_post", buffer_shards=2)
    ids = []
    for b in it:
        seen["yielded"] += b["seq"].shape[0]
        ids += row_ids(b).tolist()
    assert sorted(ids) == list(range(len(store)))
    assert seen["peak"] <= 2 * 50 and it.peak_buffer_rows <= it.buffer_limit_rows == 2 * 50
    assert it.shards_read == 7 and it.rows_yielded == len(store)


@pytest.mark.parametrize("batch_size", [1, 7, 50, 120, 1000])
def test_any_batch_size_covers_all_rows(make_store, batch_size):
    store, _ = make_store()
    it = store.iter_batches(batch_size, buffer_shards=1, seed=1)
    batches = list(it)
    assert all(b["seq"].shape[0] == batch_size for b in batches[:-1])
    assert sorted(_ids(batches).tolist()) == list(range(len(store)))
    assert it.peak_buffer_rows <= it.buffer_limit_rows


def test_drop_last(make_store):
    store, _ = make_store()
    batches = list(store.iter_batches(16, drop_last=True))
    assert len(batches) == len(store) // 16 and all(b["seq"].shape[0] == 16 for b in batches)
    assert len(set(_ids(batches).tolist())) == 16 * len(batches)


def test_empty_store_yields_nothing(tmp_path):
    store = ActivationStore.create(tmp_path / "empty", make_meta())
    assert list(store.iter_batches(8)) == []
