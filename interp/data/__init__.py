"""Text and token data that needs no downloads: a byte-level tokenizer, corpora built from text
already on the machine (the Python stdlib, /usr/share/doc, your own files), and seeded synthetic
sequences with known answers for circuit tasks.

Example::

    >>> from interp.data import byte_tokenizer, resolve_corpus
    >>> corpus = resolve_corpus("stdlib-docs", byte_tokenizer(), ctx_len=64, max_tokens=2048, seed=0)
    >>> corpus.describe()["n_seq"]
    32
"""

from interp.data.corpus import (
    VALID_SPECS,
    Corpus,
    TokenizedTexts,
    build_corpus,
    resolve_corpus,
    tokenize_texts,
)
from interp.data.sources import DEFAULT_SOURCE, TextSource, get_source, iter_documents
from interp.data.synthetic import (
    BracketSequences,
    QuoteSequences,
    RepeatedSpans,
    bracket_labels,
    bracket_sequences,
    quote_sequences,
    repeated_spans,
)
from interp.data.tokenizer import BYTE_TOKENIZER_NAME, EOT_TOKEN, byte_tokenizer

__all__ = [
    "BYTE_TOKENIZER_NAME",
    "DEFAULT_SOURCE",
    "EOT_TOKEN",
    "VALID_SPECS",
    "BracketSequences",
    "Corpus",
    "QuoteSequences",
    "RepeatedSpans",
    "TextSource",
    "TokenizedTexts",
    "bracket_labels",
    "bracket_sequences",
    "build_corpus",
    "byte_tokenizer",
    "get_source",
    "iter_documents",
    "quote_sequences",
    "repeated_spans",
    "resolve_corpus",
    "tokenize_texts",
]
