"""One very long document (issue 29 cause 8 and the memory check): tokenised a piece at a time and read
only as far as --max-tokens needs, for every file source; the peak memory scales with the pieces, not the text.

Each measurement runs in a fresh process (peak RSS only grows), on an 8 MB document; before the fix a
document of this size took ~1.5 GB above the interpreter, ~200 bytes per character.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHARS = 8_000_000
BOUND_BYTES_PER_CHAR = 12
"""Allowed peak growth per character of the document (the text and its copies), plus a fixed 100 MB."""

MEASURE = """
import resource, sys
from interp.data import byte_tokenizer, resolve_corpus
tok = byte_tokenizer()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
c = resolve_corpus(sys.argv[1], tok, ctx_len=64, max_tokens=256)
assert c.tokens.shape == (4, 64), c.tokens.shape
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024)
"""


def _text(n=CHARS):
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "token", "sink", "head", "résumé"]
    out, size = [], 0
    while size < n:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("long")
    text = _text()
    (root / "doc.txt").write_text(text, encoding="utf-8")
    (root / "doc.jsonl").write_text(json.dumps({"text": text}) + "\n", encoding="utf-8")
    (root / "doc.csv").write_text("text\n" + text + "\n", encoding="utf-8")
    return root


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize("spec", ["file:{r}/doc.txt", "jsonl:{r}/doc.jsonl", "csv:{r}/doc.csv:text"])
def test_peak_memory_of_a_long_document_is_bounded(files, spec):
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, spec.format(r=files)], env=_env(), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    grew = int(out.stdout.split()[-1])
    assert grew < 100e6 + BOUND_BYTES_PER_CHAR * CHARS, f"peak memory grew by {grew / 1e6:.0f} MB"


def test_pieces_give_the_tokens_of_the_whole_document():
    from interp.data import byte_tokenizer
    from interp.data.corpus import _corpus_from_texts

    text = _text(600_000)
    tok = byte_tokenizer()
    whole = list(tok(text, add_special_tokens=False)["input_ids"])
    c = _corpus_from_texts(tok, [text], "t", 100, None, 0)
    assert c.tokens.flatten().tolist() == whole[: c.tokens.numel()]


def _cache_peak(doc: Path, out: Path) -> int:
    """Peak RSS (bytes) of `interp cache --max-tokens 256` over one document, in a fresh process."""
    code = (
        "import resource, runpy, sys; sys.argv = ['interp'] + sys.argv[1:]\n"
        "try:\n    runpy.run_module('interp', run_name='__main__')\nexcept SystemExit as e:\n    code = e.code\n"
        "print('maxrss', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024); sys.exit(code)"
    )
    args = [
        "cache",
        "--model",
        "pythia-14m-init",
        "--data",
        f"jsonl:{doc}",
        "--hooks",
        "blocks.0.hook_resid_post",
        "--max-tokens",
        "256",
        "--ctx-len",
        "64",
        "--out",
        str(out),
    ]
    res = subprocess.run([sys.executable, "-c", code, *args], env=_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads((out / "manifest.json").read_text())
    return int(res.stdout.split("maxrss")[-1])


def test_interp_cache_on_a_long_document_stops_at_max_tokens(files, tmp_path):
    """The whole command, model included: its peak over the 8 MB document exceeds its peak over a 20 kB document
    by no more than the text's own copies (the bound scales with the document, not with what else the process
    loads: torch, the model and the CLI cost the same in both runs, whatever the machine's state)."""
    small = tmp_path / "small.jsonl"
    small.write_text(json.dumps({"text": _text(20_000)}) + "\n", encoding="utf-8")
    base = _cache_peak(small, tmp_path / "small_store")
    peak = _cache_peak(files / "doc.jsonl", tmp_path / "store")
    grew = peak - base
    assert grew < 100e6 + BOUND_BYTES_PER_CHAR * CHARS, (
        f"peak RSS {peak / 1e9:.2f} GB, {grew / 1e6:.0f} MB above the small document's {base / 1e9:.2f} GB"
    )
