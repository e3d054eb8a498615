"""Corpus building: reproducible, shaped as asked, eos between documents, clear errors."""

import json
import re

import pytest
import torch

from interp.data import Corpus, build_corpus, get_source, resolve_corpus
from interp.data.sources import module_docstrings


@pytest.fixture
def letters_dir(tmp_path):
    """Three documents of known text: 'aaaa', 'bbbb', 'cccc'."""
    for name in "abc":
        (tmp_path / f"{name}.txt").write_text(name * 4)
    (tmp_path / "ignored.bin").write_bytes(b"zzzz")  # not a *.txt/*.md/*.py/*.xml file
    return tmp_path


def test_same_seed_same_tokens_other_seed_other_tokens(tok):
    a = build_corpus(tok, "stdlib-docs", ctx_len=64, max_tokens=2048, seed=0)
    b = build_corpus(tok, "stdlib-docs", ctx_len=64, max_tokens=2048, seed=0)
    c = build_corpus(tok, "stdlib-docs", ctx_len=64, max_tokens=2048, seed=1)
    assert torch.equal(a.tokens, b.tokens) and a.digest() == b.digest()
    assert c.digest() != a.digest()
    assert re.fullmatch(r"[0-9a-f]{64}", a.digest())


def test_shape_and_max_tokens_rounded_down_to_rows(tok):
    corpus = build_corpus(tok, "stdlib", ctx_len=64, max_tokens=1000, seed=0)
    assert corpus.tokens.shape == (1000 // 64, 64) and corpus.tokens.dtype == torch.long
    assert (corpus.n_seq, corpus.n_tokens, corpus.ctx_len) == (15, 960, 64)


def test_describe_is_json_able_provenance(tok):
    corpus = resolve_corpus("stdlib-docs", tok, ctx_len=32, max_tokens=320, seed=7)
    info = json.loads(json.dumps(corpus.describe()))
    assert info["source"] == "stdlib-docs" and info["seed"] == 7 and info["ctx_len"] == 32
    assert (info["n_seq"], info["n_tokens"]) == (10, 320)
    assert info["digest"] == corpus.digest() and info["python"].count(".") == 2


def test_eos_between_documents_not_around_them(tok, letters_dir):
    corpus = build_corpus(tok, f"dir:{letters_dir}", ctx_len=7, seed=0)  # 3*4 + 2 eos = 14 = 2 rows
    flat = corpus.tokens.flatten().tolist()
    assert corpus.tokens.shape == (2, 7) and corpus.n_docs == 3
    assert flat[0] != 256 and flat[-1] != 256 and flat.count(256) == 2
    docs = tok.decode(flat).split("<|endoftext|>")
    assert sorted(docs) == ["aaaa", "bbbb", "cccc"]


def test_documents_are_shuffled_by_seed(tok, letters_dir):
    def order(seed):
        tokens = build_corpus(tok, f"dir:{letters_dir}", ctx_len=7, seed=seed).tokens
        return tuple(tok.decode(tokens.flatten()).split("<|endoftext|>"))

    assert len({order(seed) for seed in range(10)}) > 1


def test_stops_reading_once_max_tokens_collected(tok, tmp_path):
    for i in range(50):
        (tmp_path / f"{i:02d}.md").write_text("x" * 100)
    corpus = build_corpus(tok, f"dir:{tmp_path}", ctx_len=64, max_tokens=256, seed=0)
    # 100 + 1 + 100 = 201 < 256 tokens after two documents; the third reaches 302 and reading stops.
    assert corpus.n_docs == 3 and corpus.tokens.shape == (4, 64)


def test_file_source_is_the_files_bytes_and_special_text_stays_text(tok, tmp_path):
    text = "a literal <|endoftext|> inside a document is text, ünïcode too. " * 3
    path = tmp_path / "doc.txt"
    path.write_text(text)
    corpus = build_corpus(tok, f"file:{path}", ctx_len=16, seed=0)
    n = len(text.encode()) // 16 * 16
    assert corpus.tokens.flatten().tolist() == list(text.encode())[:n]


def test_stdlib_source_skips_tests_and_site_packages():
    ids = get_source("stdlib").doc_ids
    assert len(ids) > 100 and list(ids) == sorted(ids)
    assert all(p.endswith(".py") for p in ids)
    for skipped in ("site-packages", "test", "tests", "idlelib", "lib2to3"):
        assert not any(f"/{skipped}/" in p for p in ids), skipped


def test_module_docstrings_keeps_only_docstrings():
    source = (
        '"""Module doc."""\nx = "not a doc"\n'
        'class A:\n    """Class doc."""\n    def f(self):\n        """Method doc."""\n        return 1\n'
    )
    assert module_docstrings(source) == "Module doc.\n\nClass doc.\n\nMethod doc."
    assert module_docstrings("def broken(:") == ""


def test_usr_share_doc_skips_compressed_files(tok):
    src = get_source("usr-share-doc")
    if len(src) == 0:
        pytest.skip("no /usr/share/doc on this machine")
    assert not any(p.endswith(".gz") for p in src.doc_ids)
    assert build_corpus(tok, "usr-share-doc", ctx_len=32, max_tokens=320).tokens.shape == (10, 32)


def test_pydoc_topics_is_fixed_prose_apart_from_the_docstrings(tok):
    src = get_source("pydoc-topics")
    assert len(src) > 50 and list(src.doc_ids) == sorted(src.doc_ids) and "if" in src.doc_ids
    text = dict(src)
    assert "conditional execution" in text["if"]  # prose of the reference manual, not code
    # the topics table is not one of the stdlib-docs modules (it is over STDLIB_MAX_BYTES)
    assert not any(p.endswith("pydoc_data/topics.py") for p in get_source("stdlib-docs").doc_ids)
    a = build_corpus(tok, "pydoc-topics", ctx_len=32, max_tokens=640, seed=0)
    b = build_corpus(tok, "pydoc-topics", ctx_len=32, max_tokens=640, seed=0)
    assert a.tokens.shape == (20, 32) and a.digest() == b.digest()
    assert a.digest() != build_corpus(tok, "stdlib-docs", ctx_len=32, max_tokens=640, seed=0).digest()


def test_pydoc_topics_missing_module_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pydoc_data", None)  # as on a Python without pydoc_data
    with pytest.raises(ValueError, match="pydoc_data.*stdlib-docs"):
        get_source("pydoc-topics")


@pytest.mark.parametrize("spec", ["synthetic:repeat", "synthetic:brackets", "synthetic:quotes"])
def test_synthetic_specs(tok, spec):
    corpus = resolve_corpus(spec, tok, ctx_len=32, max_tokens=640, seed=0)
    assert isinstance(corpus, Corpus) and corpus.tokens.shape == (20, 32) and corpus.source == spec
    assert corpus.digest() == resolve_corpus(spec, tok, ctx_len=32, max_tokens=640, seed=0).digest()
    assert corpus.digest() != resolve_corpus(spec, tok, ctx_len=32, max_tokens=640, seed=1).digest()
    if spec == "synthetic:repeat":
        assert int(corpus.tokens.max()) < tok.vocab_size  # never the eos/pad id
    if spec == "synthetic:brackets":
        assert set(tok.decode(corpus.tokens.flatten()).replace("<|endoftext|>", "")) <= set("()[]{}")


def test_synthetic_default_rows(tok):
    assert resolve_corpus("synthetic:repeat", tok, ctx_len=16).tokens.shape == (256, 16)


def _error(spec, tok, **kw):
    args = {"ctx_len": 16, "max_tokens": 160, "seed": 0} | kw
    with pytest.raises(ValueError) as info:
        resolve_corpus(spec, tok, **args)
    return str(info.value)


def test_error_unknown_source_lists_valid_ones(tok):
    msg = _error("wikipedia", tok)
    assert "unknown" in msg and "wikipedia" in msg
    for valid in (
        "stdlib",
        "stdlib-docs",
        "pydoc-topics",
        "usr-share-doc",
        "file:PATH",
        "dir:PATH",
        "synthetic:repeat",
    ):
        assert valid in msg
    assert "unknown" in _error("synthetic:nope", tok)
    with pytest.raises(ValueError, match="valid sources"):
        build_corpus(tok, "wikipedia")
    with pytest.raises(ValueError, match="resolve_corpus"):
        build_corpus(tok, "synthetic:repeat")


def test_error_missing_file_and_dir(tok, tmp_path):
    msg = _error(f"file:{tmp_path / 'missing.txt'}", tok)
    assert "not found" in msg and "missing.txt" in msg
    msg = _error(f"dir:{tmp_path / 'missing'}", tok)
    assert "not found" in msg and "dir:PATH" in msg


def test_error_empty_text(tok, tmp_path):
    (tmp_path / "empty.txt").write_text("")
    assert "empty text" in _error(f"file:{tmp_path / 'empty.txt'}", tok)
    (tmp_path / "sub").mkdir()
    assert "empty text" in _error(f"dir:{tmp_path / 'sub'}", tok)  # no matching files at all


def test_error_fewer_tokens_than_one_row(tok, tmp_path):
    (tmp_path / "short.txt").write_text("hello")
    msg = _error(f"file:{tmp_path / 'short.txt'}", tok, ctx_len=64, max_tokens=None)
    for words in ("only 5 tokens", "ctx_len=64", "smaller ctx_len", "another source"):
        assert words in msg


def test_error_ctx_len_too_small_and_max_tokens_below_one_row(tok):
    assert "ctx_len >= 2" in _error("stdlib-docs", tok, ctx_len=1)
    msg = _error("stdlib-docs", tok, ctx_len=64, max_tokens=10)
    assert "max_tokens=10" in msg and "ctx_len=64" in msg
