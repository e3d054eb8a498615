"""Portable artifacts: tokenizer by identity (not path), a store moved to another folder opens, verifies, resumes."""

import json
import shutil

import pytest

from interp.cache.caching import CacheConfig, cache_activations
from interp.data import byte_tokenizer
from interp.infra.portable import relative_to, resolve_recorded, tokenizer_identity
from interp.store import ActivationStore


def test_tokenizer_identity_ignores_the_folder_but_not_the_vocabulary(tmp_path):
    from transformers import AutoTokenizer

    tok = byte_tokenizer()
    for name in ("a", "b"):
        tok.save_pretrained(tmp_path / name / "tok")
    a = AutoTokenizer.from_pretrained(tmp_path / "a" / "tok")
    b = AutoTokenizer.from_pretrained(tmp_path / "b" / "tok")
    assert tokenizer_identity(a) == tokenizer_identity(b)
    assert tokenizer_identity(a).startswith("tok@sha256:") and str(tmp_path) not in tokenizer_identity(a)
    b.add_tokens(["<extra>"])
    b.save_pretrained(tmp_path / "b" / "tok")
    assert tokenizer_identity(AutoTokenizer.from_pretrained(tmp_path / "b" / "tok")) != tokenizer_identity(a)
    assert tokenizer_identity(tok) == tokenizer_identity(byte_tokenizer())  # built in code: hashed by content


def test_relative_paths_round_trip(tmp_path):
    art, store = tmp_path / "runs" / "sae", tmp_path / "runs" / "store"
    rec = relative_to(store, art)
    assert rec == "../store" and resolve_recorded(rec, art).resolve() == store.resolve()
    assert resolve_recorded("/abs/x", art).as_posix() == "/abs/x"


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    out = tmp_path_factory.mktemp("here") / "store"
    cfg = CacheConfig(
        out=str(out),
        model="pythia-14m-init",
        hooks=["blocks.0.hook_resid_post"],
        ctx_len=16,
        max_tokens=256,
        seqs_per_shard=4,
        batch_size=4,
    )
    cache_activations(cfg, progress=False)
    return out, cfg


def test_a_moved_store_opens_verifies_and_resumes(small_store, tmp_path):
    out, cfg = small_store
    manifest = (out / "manifest.json").read_text()
    assert str(out) not in manifest and str(out.parent) not in manifest  # nothing points back to where it was made
    meta = json.loads(manifest)["meta"]
    assert meta["tokenizer"].startswith("interp/byte-level@sha256:")
    moved = tmp_path / "elsewhere" / "moved"
    shutil.copytree(out, moved)
    st = ActivationStore.open(moved)
    assert st.verify().ok and len(st) == 256 and st.summary()["path"] == str(moved)
    cfg2 = CacheConfig(**{**cfg.__dict__, "out": str(moved)})
    _, report = cache_activations(cfg2, progress=False)
    assert report["shards_computed_now"] == 0 and report["tokens"] == 256
