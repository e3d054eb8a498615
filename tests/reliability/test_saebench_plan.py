"""`interp sae eval --suite saebench` checks its whole plan before it runs (issue 40 cases 3 and 6): where it
writes (`<sae>/saebench/`: not a link out of the SAE folder, writable, held by one run at a time) and what every
eval needs (words in the tokenizer's vocabulary, token classes in the store that balanced probing sets can be
drawn from). Each refusal is one `error:` line naming an option the command has, exit 2, disk as it was, and
comes before the model runs; it used to come after the suite (minutes), or not at all.

The model is a tiny GPT-NeoX with a word vocabulary built here (a byte tokenizer has no words): a run takes seconds.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil

import pytest
import torch

from tests.reliability.refusals import assert_refused, invoke, lock_holder, snapshot, token_store

HOOK = "blocks.0.hook_resid_post"
WORDS = ["".join(w) for L in "abcd" for w in itertools.islice(itertools.product(L, "aeiou", "lmnrst", "aeiou"), 40)]
"""160 four-letter words, 40 per first letter: one token each (with the leading space) in `word_tokenizer`."""


def word_tokenizer(words):
    """The byte tokenizer plus a BPE merge chain per word, so ' word' is one token (as in GPT-2's vocabulary)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from interp.data.tokenizer import bytes_to_unicode

    alphabet = bytes_to_unicode()
    vocab = {alphabet[b]: b for b in range(256)}
    merges = []
    for w in words:
        chars = [alphabet[b] for b in f" {w}".encode()]
        cur = chars[0]
        for c in chars[1:]:
            if cur + c not in vocab:
                vocab[cur + c] = len(vocab)
                merges.append((cur, c))
            cur += c
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(["<|endoftext|>"])
    eot = "<|endoftext|>"
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=eot, bos_token=eot, pad_token=eot)


def _train_sae(store, out):
    args = ["sae", "train", "--store", store, "--arch", "topk", "--d-sae", "16", "--k", "2", "--out", out]
    r = invoke([*args, "--max-tokens", "256", "--batch-tokens", "64", "--exclude", "none"])
    assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A word-vocabulary model, a store of its activations' shape (random ids below 50: bytes), an SAE on it."""
    from tests.tiny import tiny_hf

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("saebench")
    tok = word_tokenizer(WORDS)
    tiny_hf("gpt_neox", vocab_size=len(tok)).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    token_store(root / "store", d=64, model=str(root / "model"))
    _train_sae(root / "store", root / "sae")
    return root


def _eval(root, sae, *extra, store=None):
    args = ["sae", "eval", "--sae", sae, "--store", store or root / "store", "--exclude", "none", "--model"]
    return invoke([*args, root / "model", "--suite", "saebench", "--words", "200", *extra])


@pytest.fixture
def sae(root, tmp_path):
    """A copy of the SAE folder per test (its `saebench/` is what the tests write or refuse to)."""
    return shutil.copytree(root / "sae", tmp_path / "sae")


def nothing_runs(monkeypatch):
    """Make the suite's first step fail loudly: a refusal that passes with this came before the model ran."""

    def ran(*a, **k):
        raise AssertionError("the evaluation ran before the plan was checked")

    import sae.evaluate
    import sae.metrics

    monkeypatch.setattr(sae.evaluate, "evaluate_store", ran)
    monkeypatch.setattr(sae.metrics, "word_activations", ran)


def test_the_suite_writes_its_files_under_the_sae_folder(root, sae, tmp_path):
    r = _eval(root, sae, "--out", tmp_path / "m")
    assert r.exit_code == 0, r.output
    listed = json.loads((tmp_path / "m" / "metrics.json").read_text())["saebench_files"]
    assert sorted(listed) == sorted(str(p) for p in (sae / "saebench").glob("*.json")) and len(listed) == 3


def test_a_second_run_into_the_saebench_folder_is_refused_by_name(root, sae, tmp_path, monkeypatch):
    """Two runs with their own --out used to write `<sae>/saebench/` at once: one's files, the other's list."""
    (sae / "saebench").mkdir()
    (sae / "saebench" / "sae_core.json").write_text('{"the first run": "its file"}')
    with lock_holder(sae / "saebench") as pid:
        nothing_runs(monkeypatch)
        before = snapshot(tmp_path)
        line = assert_refused(_eval(root, sae, "--out", tmp_path / "m2"), f"is being written by pid {pid}")
        assert "--suite core" in line and "--sae" in line and "--out" not in line.split(f"pid {pid}")[1]
        assert snapshot(tmp_path) == before


def test_a_saebench_link_out_of_the_sae_folder_is_refused(root, sae, tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", sae / "saebench")
    nothing_runs(monkeypatch)
    before = snapshot(tmp_path)
    assert_refused(_eval(root, sae, "--out", tmp_path / "m"), f"{sae / 'saebench'} is a symbolic link", "--sae")
    assert snapshot(tmp_path) == before and not any((tmp_path / "elsewhere").iterdir())


def test_a_read_only_sae_folder_is_refused_before_the_suite_runs(root, sae, tmp_path, monkeypatch):
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **k: False if str(p) == str(sae) else real(p, mode, **k))
    nothing_runs(monkeypatch)
    before = snapshot(tmp_path)
    line = assert_refused(_eval(root, sae), "permission denied", str(sae), "pass the copy as --sae")
    assert "(--out)" not in line  # --out does not move `<sae>/saebench/`: it cannot be the fix
    assert snapshot(tmp_path) == before


def test_a_byte_tokenizer_is_refused_up_front_saying_why(tmp_path, monkeypatch):
    token_store(tmp_path / "store", d=128, model="pythia-14m-init")
    _train_sae(tmp_path / "store", tmp_path / "sae")
    nothing_runs(monkeypatch)
    before = snapshot(tmp_path)
    args = ["sae", "eval", "--sae", tmp_path / "sae", "--store", tmp_path / "store", "--exclude", "none"]
    r = invoke([*args, "--model", "pythia-14m-init", "--suite", "saebench"])
    assert_refused(r, "byte-level tokenizer", "--suite core")
    assert snapshot(tmp_path) == before


def test_too_few_words_is_refused_naming_words(root, sae, tmp_path, monkeypatch):
    nothing_runs(monkeypatch)
    before = snapshot(tmp_path)
    assert_refused(_eval(root, sae, "--words", "30"), "--words 30 gives 30 vocabulary words", "raise --words")
    assert snapshot(tmp_path) == before


def _skewed_tokens(root, n_words, n_digits, n_punct):
    """Token ids: `n_words` one-token words, `n_digits` digits, `n_punct` punctuation marks (shuffled)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(root / "model")
    word_ids = [tok(f" {w}")["input_ids"][0] for w in WORDS]
    ids = [word_ids[i % len(word_ids)] for i in range(n_words)]
    ids += [ord("0") + i % 10 for i in range(n_digits)] + [ord(".,;:!?"[i % 6]) for i in range(n_punct)]
    return torch.tensor(ids)[torch.randperm(len(ids), generator=torch.Generator().manual_seed(0))]


def test_a_store_too_small_for_sparse_probing_is_refused_up_front_with_the_tokens_it_needs(
    root, sae, tmp_path, monkeypatch
):
    """Mostly words, a few digits and marks: the word class has more rows than the others can balance (the
    issue's 8k-token store: 'lowercase_word': 2911 rows but only 1689). It used to fail after the first evals."""
    token_store(tmp_path / "small", d=64, model=str(root / "model"), n_seq=64, tokens=_skewed_tokens(root, 384, 64, 64))
    nothing_runs(monkeypatch)
    before = snapshot(tmp_path)
    r = _eval(root, sae, store=tmp_path / "small")
    assert_refused(r, "has 512 tokens", "'lowercase_word'", "needs a store of about", "--suite core")
    assert snapshot(tmp_path) == before


class _Tokens:
    """Just enough of a store for `store_tasks_problem`: its token ids."""

    path = "mem"

    def __init__(self, tokens):
        self.tokens = tokens

    def __len__(self):
        return len(self.tokens)

    def get_rows(self, idx, hooks):
        return {"tokens": self.tokens[idx]}


def test_the_tokens_it_names_are_enough_and_half_of_them_are_not(root):
    from transformers import AutoTokenizer

    from sae import sparse_probing as SP

    tok = AutoTokenizer.from_pretrained(root / "model")
    decode = lambda t: tok.decode([t])  # noqa: E731
    small = SP.store_tasks_problem(_Tokens(_skewed_tokens(root, 384, 64, 64)), decode)
    need = int(small.split("about ")[1].split(" tokens")[0].replace(",", ""))
    n = [384 * need // 512, 64 * need // 512, 64 * need // 512]
    assert SP.store_tasks_problem(_Tokens(_skewed_tokens(root, *n)), decode) is None
    assert SP.store_tasks_problem(_Tokens(_skewed_tokens(root, *(k // 2 for k in n))), decode) is not None
