"""Token files and gradient stores at the door (issue 40 cases 4, 7, 8): `interp attribute build` / `query`
check the rows a user hands in (integer ids inside the model's vocabulary, at least one row of two tokens or
more, rows that fit the model's context, the model's tokenizer) and the gradients a store holds (finite),
and their --out before the model loads: each refusal is one `error:` line, exit 2, the disk as it was."""

from __future__ import annotations

import hashlib

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.reliability.refusals import assert_refused, invoke, snapshot

MODEL = "pythia-14m-init"  # byte tokenizer, vocabulary 50304, context 2048


def _tokens(path, tokens, tokenizer=""):
    from attribution.jobs import save_tokens

    save_tokens(path, tokens, tokenizer)
    return f"tokens:{path}"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Token files: good ones, and each kind of bad one the issue lists."""
    root = tmp_path_factory.mktemp("tokens")
    g = torch.Generator().manual_seed(0)
    specs = {
        "good": _tokens(root / "good.safetensors", torch.randint(0, 200, (4, 8), generator=g)),
        "negative": _tokens(root / "negative.safetensors", torch.tensor([[1, 2, -3, 4]])),
        "too_big": _tokens(root / "too_big.safetensors", torch.tensor([[1, 2, 3, 1_000_000]])),
        "no_rows": _tokens(root / "no_rows.safetensors", torch.zeros((0, 4), dtype=torch.long)),
        "empty_rows": _tokens(root / "empty_rows.safetensors", torch.zeros((3, 0), dtype=torch.long)),
        "long_rows": _tokens(root / "long_rows.safetensors", torch.randint(0, 200, (1, 5000), generator=g)),
        "other_tokenizer": _tokens(root / "other.safetensors", torch.randint(0, 200, (2, 8)), "gpt2@sha256:0123"),
    }
    save_file({"tokens": torch.tensor([[1.0, 2.0, 3.0]])}, str(root / "float.safetensors"))
    specs["float"] = f"tokens:{root / 'float.safetensors'}"
    return root, specs


NEEDLES = {
    "negative": ("token id -3 (row 0, position 2", "re-tokenize"),
    "too_big": ("token id 1000000", "vocabulary [0, 50304)"),
    "no_rows": ("holds 0 rows", "at least one row"),
    "empty_rows": ("3 rows of 0 tokens", "at least one row"),
    "long_rows": ("rows of 5000 tokens", "context of 2048", "cut them"),
    "float": ("float32, not integer token ids", "save_tokens"),
    "other_tokenizer": ("different tokenizers ('gpt2@sha256:0123'", "re-tokenize"),
}


def _build(out, train, *extra):
    return invoke(
        ["attribute", "build", "--model", MODEL, "--train", train, "--out", out, "--device", "cpu", "--dim", "8"]
        + list(extra)
    )


@pytest.mark.parametrize("kind", ["negative", "too_big", "no_rows", "empty_rows", "long_rows", "float"])
def test_build_refuses_a_bad_token_file_before_writing(files, tmp_path, kind):
    root, specs = files
    before = snapshot(tmp_path)
    assert_refused(_build(tmp_path / "store", specs[kind]), "--train", *NEEDLES[kind])
    assert snapshot(tmp_path) == before  # no manifest.json, no .writer.lock


def test_build_refuses_a_context_longer_than_the_models_before_tokenizing(tmp_path):
    before = snapshot(tmp_path)
    r = _build(tmp_path / "store", "synthetic:repeat", "--ctx-len", "100000")
    assert_refused(r, "--ctx-len 100000", "2048")
    assert snapshot(tmp_path) == before


@pytest.fixture(scope="module")
def store(files, tmp_path_factory):
    """A gradient store of the good file (two shards)."""
    root, specs = files
    out = tmp_path_factory.mktemp("grads") / "store"
    r = _build(out, specs["good"], "--shard-size", "2")
    assert r.exit_code == 0, r.output
    return out


def _query(store, queries, out):
    return invoke(["attribute", "query", "--store", store, "--queries", queries, "--device", "cpu", "--out", out])


@pytest.mark.parametrize("kind", ["other_tokenizer", "float", "long_rows", "negative", "no_rows"])
def test_query_refuses_a_bad_token_file(files, store, tmp_path, kind):
    root, specs = files
    before = snapshot(tmp_path), snapshot(store)
    assert_refused(_query(store, specs[kind], tmp_path / "q"), "--queries", *NEEDLES[kind])
    assert (snapshot(tmp_path), snapshot(store)) == before


def test_a_one_row_token_file_builds(files, tmp_path):
    """A one-row shard's token column is a [1] slice with a stride: written as its own contiguous tensor."""
    root, _ = files
    r = _build(tmp_path / "store", _tokens(root / "one.safetensors", torch.arange(1, 9)[None]))
    assert r.exit_code == 0, r.output


def test_nan_rows_in_a_gradient_store_are_refused_not_ranked_first(files, store, tmp_path):
    """Rows of NaN under a valid hash (a store written by a diverged build, or edited) would head every
    top-k, since `topk` ranks NaN above every number; the query names the shard instead."""
    import shutil

    from tests.reliability.store_damage import rehash

    root, specs = files
    bad = tmp_path / "store"
    shutil.copytree(store, bad)
    shard = bad / "shard_00001.safetensors"
    tensors = load_file(str(shard))
    tensors["grad"][0] = float("nan")
    save_file(tensors, str(shard))
    rehash(bad, 1)
    before = snapshot(tmp_path)
    assert_refused(_query(bad, specs["good"], tmp_path / "q"), "shard_00001.safetensors", "non-finite", "rows [2]")
    assert snapshot(tmp_path) == before


def test_an_unwritable_out_is_refused_before_the_model_loads(files, tmp_path, monkeypatch):
    """root writes anywhere, so the unwritable folder is os.access saying no (as tests/interp/cli/test_errors.py)."""
    import os

    import attribution.jobs
    from interp.cli import errors

    root, specs = files
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(errors.os, "access", lambda p, mode: False if str(p) == str(locked) else real(p, mode))

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before --out was checked")

    monkeypatch.setattr(attribution.jobs, "_load", no_model)
    before = snapshot(tmp_path)
    assert_refused(_build(locked / "store", specs["good"]), "permission denied", str(locked))
    assert_refused(_query(locked, specs["good"], locked / "q"), "permission denied", str(locked))
    assert snapshot(tmp_path) == before


def test_equal_runs_write_equal_bytes(files, tmp_path):
    """scores.safetensors carries two metadata keys; safetensors' own writer orders them at random, so two
    equal runs had different checksums. Eight runs of the same job: one file content."""
    root, specs = files
    digests = set()
    for i in range(8):
        r = invoke(
            ["attribute", "run", "--method", "dra", "--model", MODEL, "--train", specs["good"], "--queries"]
            + [specs["good"], "--out", tmp_path / f"run{i}", "--device", "cpu", "--select-dims", "all"]
        )
        assert r.exit_code == 0, r.output
        digests.add(hashlib.sha256((tmp_path / f"run{i}" / "scores.safetensors").read_bytes()).hexdigest())
    assert len(digests) == 1
