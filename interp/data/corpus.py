"""Token corpora from text on the machine, and validated batches of user texts.

A ``Corpus`` is a ``[n_seq, ctx_len]`` block of token ids plus enough provenance (source, seed,
digest) to say exactly which text a result was computed on. ``build_corpus`` makes one from a
text source (see ``interp.data.sources``); ``resolve_corpus`` is the entry point for the CLI and
also accepts synthetic specs:

- ``"synthetic:repeat"``: random tokens with a repeated span per row (``repeated_spans``);
- ``"synthetic:brackets"`` / ``"synthetic:quotes"``: generated bracket / quote texts as documents.

How a corpus is built: documents are shuffled with ``random.Random(seed)``, tokenised without
special tokens, joined with the tokenizer's eos id between documents, and cut into full rows of
``ctx_len`` (a final partial row is dropped). With ``max_tokens`` set, reading stops once enough
tokens are collected, so a small corpus of a big source is fast.

Example::

    >>> from interp.data import byte_tokenizer
    >>> tok = byte_tokenizer()
    >>> corpus = resolve_corpus("stdlib-docs", tok, ctx_len=128, max_tokens=4096, seed=0)
    >>> corpus.tokens.shape
    torch.Size([32, 128])
"""

from __future__ import annotations

import hashlib
import platform
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor
from transformers import PreTrainedTokenizerBase

from interp.data.sources import DEFAULT_SOURCE, VALID_TEXT_SPECS, get_source, is_text_spec
from interp.data.synthetic import iter_bracket_texts, iter_quote_texts, repeated_spans

__all__ = ["Corpus", "TokenizedTexts", "build_corpus", "resolve_corpus", "tokenize_texts", "VALID_SPECS"]

DEFAULT_SYNTHETIC_ROWS = 256
"""Rows of a synthetic corpus when ``max_tokens`` is not given (synthetic sources never run out)."""


@dataclass
class Corpus:
    """Token rows cut from one source, with their provenance."""

    tokens: Tensor
    """LongTensor ``[n_seq, ctx_len]``."""
    source: str
    """The spec the corpus was built from, e.g. ``"stdlib-docs"``."""
    ctx_len: int
    seed: int
    """Seed of the document shuffle (or of the synthetic generator)."""
    n_docs: int
    """Documents tokenised into the corpus (rows, for ``synthetic:repeat``)."""

    @property
    def n_seq(self) -> int:
        return self.tokens.shape[0]

    @property
    def n_tokens(self) -> int:
        return self.tokens.numel()

    def digest(self) -> str:
        """sha256 hex of the token ids (little-endian int64), to record which tokens a result used."""
        data = self.tokens.detach().cpu().numpy().astype("<i8", copy=False)
        return hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest()

    def describe(self) -> dict[str, Any]:
        """JSON-able provenance: what to save next to results computed on this corpus."""
        return {
            "source": self.source,
            "ctx_len": self.ctx_len,
            "n_seq": self.n_seq,
            "n_tokens": self.n_tokens,
            "n_docs": self.n_docs,
            "seed": self.seed,
            "digest": self.digest(),
            "python": platform.python_version(),  # the stdlib sources differ between versions
        }


def _check_sizes(ctx_len: int, max_tokens: int | None) -> None:
    if ctx_len < 2:
        raise ValueError(f"ctx_len={ctx_len} is too small: a row needs at least 2 tokens (ctx_len >= 2)")
    if max_tokens is not None and max_tokens < ctx_len:
        raise ValueError(
            f"max_tokens={max_tokens} is less than one row of ctx_len={ctx_len}; "
            "raise max_tokens or use a smaller ctx_len"
        )


def _encode(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    # split_special_tokens: a literal "<|endoftext|>" inside a document is text, not a separator.
    enc = tokenizer(text, add_special_tokens=False, split_special_tokens=True, verbose=False)
    return list(enc["input_ids"])


LONG_DOC_CHARS = 1 << 18
"""Documents longer than this are tokenised a piece at a time (cut before a space), so one huge document
costs the memory of one piece (a fast tokenizer takes ~70 bytes per character), not of the whole text,
and reading stops inside it once ``max_tokens`` are collected. Shorter documents are encoded whole."""


def _pieces(text: str, size: int = LONG_DOC_CHARS) -> Iterable[str]:
    """`text` in pieces of at most `size` characters, each cut before a space when there is one in its
    second half (BPE pre-tokenizers split there anyway, so the tokens rarely change at a cut)."""
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + size)
        if end < n:
            cut = text.rfind(" ", start + size // 2, end)
            end = cut if cut > start else end
        yield text[start:end]
        start = end


def _corpus_from_texts(
    tokenizer: PreTrainedTokenizerBase,
    texts: Iterable[str],
    source: str,
    ctx_len: int,
    max_tokens: int | None,
    seed: int,
) -> Corpus:
    """Join documents with eos, cut into full rows; stop reading once ``max_tokens`` are collected."""
    target = None if max_tokens is None else (max_tokens // ctx_len) * ctx_len
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    n_docs = 0
    for text in texts:
        if target is not None and len(ids) >= target:
            break
        started = False
        for part in _pieces(text) if text else ():
            if target is not None and len(ids) >= target:
                break  # inside one huge document: the rest is never tokenised
            piece = _encode(tokenizer, part)
            if not piece:
                continue
            if not started:
                if n_docs and eos is not None:
                    ids.append(eos)
                n_docs += 1
                started = True
            ids.extend(piece)
    if n_docs == 0:
        raise ValueError(f"source {source!r} yielded empty text (no non-empty documents); use another source")
    if len(ids) < ctx_len:
        raise ValueError(
            f"source {source!r} has only {len(ids)} tokens, fewer than one row of ctx_len={ctx_len}; "
            f"use a smaller ctx_len (at most {len(ids)}) or another source"
        )
    n_rows = len(ids) // ctx_len if target is None else min(len(ids), target) // ctx_len
    tokens = torch.tensor(ids[: n_rows * ctx_len], dtype=torch.long).view(n_rows, ctx_len)
    return Corpus(tokens=tokens, source=source, ctx_len=ctx_len, seed=seed, n_docs=n_docs)


def build_corpus(
    tokenizer: PreTrainedTokenizerBase,
    source: str = DEFAULT_SOURCE,
    ctx_len: int = 128,
    max_tokens: int | None = None,
    seed: int = 0,
) -> Corpus:
    """Tokenise a text source into rows of ``ctx_len`` tokens; same arguments give identical tokens.

    ``max_tokens`` is rounded down to whole rows; ``None`` takes the whole source. Raises
    ``ValueError`` for an unknown source, a missing path, a source with no text, too few tokens
    for one row, or ``ctx_len < 2``.
    """
    if source.startswith("synthetic:"):
        raise ValueError(f"{source!r} is synthetic, not a text source; build it with resolve_corpus")
    _check_sizes(ctx_len, max_tokens)
    src = get_source(source)
    doc_ids = list(src.doc_ids)
    # Shuffle ids, not texts: documents are then read lazily, only as far as max_tokens needs.
    random.Random(seed).shuffle(doc_ids)
    texts = (src.load(doc_id) for doc_id in doc_ids)
    return _corpus_from_texts(tokenizer, texts, source, ctx_len, max_tokens, seed)


def _synthetic_corpus(spec: str, tokenizer: PreTrainedTokenizerBase, ctx_len: int, n_rows: int, seed: int) -> Corpus:
    """``n_rows`` rows of a ``synthetic:*`` spec; the generators never run out, so rows are exact."""
    if spec == "synthetic:repeat":
        # vocab_size leaves out added special tokens, so eos/pad never appear as random tokens.
        data = repeated_spans(n_rows, ctx_len, tokenizer.vocab_size, seed)
        return Corpus(tokens=data.tokens, source=spec, ctx_len=ctx_len, seed=seed, n_docs=n_rows)
    if spec == "synthetic:brackets":
        texts: Iterable[str] = (text for text, _, _ in iter_bracket_texts(seed, ctx_len))
    else:
        texts = (text for text, _ in iter_quote_texts(seed))
    return _corpus_from_texts(tokenizer, texts, spec, ctx_len, n_rows * ctx_len, seed)


SYNTHETIC_SPECS = ("synthetic:repeat", "synthetic:brackets", "synthetic:quotes")
VALID_SPECS = (*VALID_TEXT_SPECS, *SYNTHETIC_SPECS)
"""Every spec ``resolve_corpus`` accepts (``PATH`` stands for a path)."""


def resolve_corpus(
    spec: str,
    tokenizer: PreTrainedTokenizerBase,
    ctx_len: int = 128,
    max_tokens: int | None = None,
    seed: int = 0,
) -> Corpus:
    """Build the corpus named by ``spec``: a text source or a ``synthetic:*`` spec.

    Synthetic corpora have ``max_tokens // ctx_len`` rows, or ``DEFAULT_SYNTHETIC_ROWS`` when
    ``max_tokens`` is ``None``. Errors are ``ValueError``s that say what to change.
    """
    if spec not in SYNTHETIC_SPECS and not is_text_spec(spec):
        raise ValueError(f"unknown corpus source {spec!r}; valid sources: {', '.join(VALID_SPECS)}")
    _check_sizes(ctx_len, max_tokens)
    if spec in SYNTHETIC_SPECS:
        n_rows = DEFAULT_SYNTHETIC_ROWS if max_tokens is None else max_tokens // ctx_len
        return _synthetic_corpus(spec, tokenizer, ctx_len, n_rows, seed)
    return build_corpus(tokenizer, spec, ctx_len, max_tokens, seed)


class TokenizedTexts(NamedTuple):
    """A right-padded batch; unpacks as ``input_ids, attention_mask``."""

    input_ids: Tensor
    """LongTensor ``[batch, max_len_in_batch]``."""
    attention_mask: Tensor
    """LongTensor ``[batch, max_len_in_batch]``: 1 for real tokens, 0 for padding."""


def _with_bos(tokenizer: PreTrainedTokenizerBase, text: str, ids: list[int], prepend_bos: bool | None) -> list[int]:
    """Apply the toolkit's BOS rule to one text's default tokenisation (see `tokenize_texts`)."""
    bos = tokenizer.bos_token_id
    if prepend_bos is None:
        return ids
    if prepend_bos:
        if bos is None:
            raise ValueError("prepend_bos=True but this tokenizer has no BOS token; pass prepend_bos=None")
        return ids if ids[:1] == [bos] else [bos, *ids]
    plain = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    return ids[1:] if ids[:1] == [bos] and len(ids) > len(plain) else ids


def tokenize_texts(
    tokenizer: PreTrainedTokenizerBase,
    texts: list[str],
    max_len: int | None = None,
    truncate: bool = False,
    prepend_bos: bool | None = None,
) -> TokenizedTexts:
    """Tokenise user texts (with the tokenizer's default special tokens) into a right-padded batch.

    BOS, the same rule everywhere in the toolkit: `prepend_bos=None` (the default) keeps the tokenizer's
    own convention (Gemma's adds BOS; SmolLM2's, Pythia's, GPT-2's and the byte tokenizer do not);
    True puts BOS first when it is not there already; False removes a BOS the tokenizer added.

    Checks up front what would otherwise fail deep in a forward pass: an empty list, an empty
    text, a text longer than ``max_len`` tokens (unless ``truncate=True``, which keeps the first
    ``max_len`` tokens). Padding is on the right, so position ``i`` of every row is the ``i``-th
    token; the pad id is ``pad_token_id``, falling back to ``eos_token_id``.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, not a single string; wrap it: [text]")
    if len(texts) == 0:
        raise ValueError("texts is an empty list; pass at least one text")
    rows: list[list[int]] = []
    for i, text in enumerate(texts):
        if not isinstance(text, str) or text == "":
            raise ValueError(f"empty text at index {i} (got {text!r}); every text must be a non-empty string")
        ids = list(tokenizer(text, add_special_tokens=True, verbose=False)["input_ids"])
        ids = _with_bos(tokenizer, text, ids, prepend_bos)
        if not ids:
            raise ValueError(f"empty text at index {i}: {text!r} encodes to no tokens")
        if max_len is not None and len(ids) > max_len:
            if not truncate:
                raise ValueError(
                    f"text at index {i} has {len(ids)} tokens, more than max_len={max_len}; pass "
                    "truncate=True to keep the first max_len tokens, or split the text with build_corpus"
                )
            ids = ids[:max_len]
        rows.append(ids)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(r) for r in rows)
    if pad is None and any(len(r) < width for r in rows):
        raise ValueError("texts have different lengths and the tokenizer has neither a pad nor an eos token")
    input_ids = torch.full((len(rows), width), pad if pad is not None else 0, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, ids in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention_mask[i, : len(ids)] = 1
    return TokenizedTexts(input_ids, attention_mask)
