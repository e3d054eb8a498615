"""Reproducible synthetic data with known answers, the raw material of circuit tasks.

Three generators, each seeded and returning a small dataclass with the data and its labels:

- ``repeated_spans``: random token sequences in which one span is copied to a later position.
  The span's start, copy position and length are random per sequence. A fixed period would let a
  model predict the copy from position alone (a positional shortcut that looks like an induction
  head without being one); random offsets force it to use content.
- ``bracket_sequences``: strings of ``()[]{}`` with the nesting depth at the end and the bracket
  that would close the innermost open one.
- ``quote_sequences``: short texts that open a ``'`` or ``"`` quote, labelled with the matching
  closing quote (double-quoted texts sometimes contain an apostrophe as a distractor).

Text generators return ``str`` so any tokenizer can be used.

Example::

    >>> data = repeated_spans(n=8, ctx_len=64, vocab_size=256, seed=0)
    >>> i = 0; s, d, k = data.src_start[i], data.dst_start[i], data.span_len[i]
    >>> bool((data.tokens[i, d:d + k] == data.tokens[i, s:s + k]).all())
    True
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

import torch
from torch import Tensor

__all__ = [
    "BRACKET_PAIRS",
    "BracketSequences",
    "QuoteSequences",
    "RepeatedSpans",
    "bracket_labels",
    "bracket_sequences",
    "iter_bracket_texts",
    "iter_quote_texts",
    "quote_sequences",
    "repeated_spans",
]

BRACKET_PAIRS = {"(": ")", "[": "]", "{": "}"}
"""Opening bracket -> its closing bracket."""


@dataclass
class RepeatedSpans:
    """Random tokens with one span per sequence copied to a later offset."""

    tokens: Tensor
    """LongTensor ``[n, ctx_len]`` of token ids in ``[0, vocab_size)``."""
    src_start: Tensor
    """LongTensor ``[n]``: where the original span starts."""
    dst_start: Tensor
    """LongTensor ``[n]``: where the copy starts (``>= src_start + span_len``, no overlap)."""
    span_len: Tensor
    """LongTensor ``[n]``: length of the span."""
    seed: int

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def induction_targets(self) -> Tensor:
        """LongTensor ``[n, ctx_len]``: for each position inside the copy, the earlier position an
        induction head should attend to (the token after the matching original token); -1 elsewhere.

        Position ``dst + i`` (``0 <= i < span_len - 1``) predicts ``tokens[dst + i + 1]``, which
        equals ``tokens[src + i + 1]``. The last copied token's successor is random, so it is left out.
        """
        n, ctx_len = self.tokens.shape
        targets = torch.full((n, ctx_len), -1, dtype=torch.long)
        for row in range(n):
            s, d, k = int(self.src_start[row]), int(self.dst_start[row]), int(self.span_len[row])
            targets[row, d : d + k - 1] = torch.arange(s + 1, s + k)
        return targets

    def predictable_mask(self) -> Tensor:
        """Bool ``[n, ctx_len]``: positions whose next token is a copy, i.e. predictable by induction."""
        return self.induction_targets() >= 0


def repeated_spans(
    n: int, ctx_len: int, vocab_size: int, seed: int, min_span: int = 4, max_span: int | None = None
) -> RepeatedSpans:
    """``n`` sequences of uniform random tokens, each with a span copied to a later random offset.

    Span length is uniform in ``[min_span, max_span]`` (default ``max_span = ctx_len // 2``, the
    longest that fits twice); the source start is uniform over the positions that leave room for
    the copy, and the copy start uniform over the positions after the source.
    """
    max_span = ctx_len // 2 if max_span is None else max_span
    if vocab_size < 2:
        raise ValueError(f"vocab_size={vocab_size} must be at least 2")
    if not 1 <= min_span <= max_span <= ctx_len // 2:
        raise ValueError(
            f"need 1 <= min_span ({min_span}) <= max_span ({max_span}) <= ctx_len // 2 ({ctx_len // 2}); "
            "use a larger ctx_len or shorter spans"
        )
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab_size, (n, ctx_len), generator=gen)

    def uniform(lo: int, hi: int) -> int:  # inclusive bounds
        return int(torch.randint(lo, hi + 1, (1,), generator=gen))

    src, dst, lens = [], [], []
    for row in range(n):
        k = uniform(min_span, max_span)
        s = uniform(0, ctx_len - 2 * k)
        d = uniform(s + k, ctx_len - k)
        tokens[row, d : d + k] = tokens[row, s : s + k]
        src.append(s), dst.append(d), lens.append(k)
    as_long = lambda xs: torch.tensor(xs, dtype=torch.long)  # noqa: E731
    return RepeatedSpans(tokens, as_long(src), as_long(dst), as_long(lens), seed)


@dataclass
class BracketSequences:
    """Bracket strings with their labels."""

    texts: list[str]
    depth: list[int]
    """Number of brackets still open at the end of each text (0 = balanced)."""
    closer: list[str]
    """The bracket that closes the innermost open one, ``""`` when the text is balanced."""
    seed: int

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def balanced(self) -> list[bool]:
        return [d == 0 for d in self.depth]


def bracket_labels(text: str) -> tuple[int, str]:
    """``(depth, closer)`` of a bracket string: open brackets left, and the one to close next.

    Characters other than brackets are ignored. Raises ``ValueError`` for a closing bracket that
    does not match (or has nothing to close), since such a string has no well-defined depth.

    >>> bracket_labels("([]{")
    (2, '}')
    >>> bracket_labels("([])")
    (0, '')
    """
    closers = set(BRACKET_PAIRS.values())
    stack: list[str] = []
    for i, ch in enumerate(text):
        if ch in BRACKET_PAIRS:
            stack.append(ch)
        elif ch in closers:
            if not stack or BRACKET_PAIRS[stack[-1]] != ch:
                raise ValueError(f"unmatched closing bracket {ch!r} at index {i} in {text!r}")
            stack.pop()
    return len(stack), (BRACKET_PAIRS[stack[-1]] if stack else "")


def iter_bracket_texts(seed: int, max_len: int, max_depth: int = 4) -> Iterator[tuple[str, int, str]]:
    """Endless stream of ``(text, depth, closer)``; ``bracket_sequences`` takes the first ``n``.

    Each text is a random walk that opens (a random bracket type) or closes (the matching
    bracket), never deeper than ``max_depth``, of random length up to ``max_len``. Half the
    texts are then closed completely (balanced); the others end on an open bracket (depth >= 1),
    so balanced and unbalanced texts occur about equally often.
    """
    if max_len < 2 or max_depth < 1:
        raise ValueError(f"need max_len >= 2 (got {max_len}) and max_depth >= 1 (got {max_depth})")
    rng = random.Random(seed)
    openers = list(BRACKET_PAIRS)
    while True:
        balanced = rng.random() < 0.5
        length = rng.randint(2, max_len)
        stack: list[str] = []
        chars: list[str] = []
        while True:
            # Keep room for the ending: a balanced text closes all it opened, an unbalanced
            # one ends with one more opener.
            room = length - len(chars) - (len(stack) if balanced else 1)
            can_open = room > 0 and len(stack) < max_depth and (not balanced or room >= 2)
            if room <= 0 or not (stack or can_open):
                break
            if stack and (not can_open or rng.random() < 0.5):
                chars.append(BRACKET_PAIRS[stack.pop()])
            else:
                stack.append(rng.choice(openers))
                chars.append(stack[-1])
        if balanced:
            chars += [BRACKET_PAIRS[b] for b in reversed(stack)]
            stack = []
        elif len(stack) < max_depth:  # the last character opens, so the text ends unbalanced
            stack.append(rng.choice(openers))
            chars.append(stack[-1])
        yield "".join(chars), len(stack), (BRACKET_PAIRS[stack[-1]] if stack else "")


def bracket_sequences(n: int, ctx_len: int, seed: int, max_depth: int = 4) -> BracketSequences:
    """``n`` bracket strings of at most ``ctx_len`` characters, about half balanced.

    Example: ``"([]{"`` has depth 2 and closer ``"}"``; ``"([])"`` has depth 0 and closer ``""``.
    """
    rows = list(islice(iter_bracket_texts(seed, ctx_len, max_depth), n))
    return BracketSequences([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], seed)


@dataclass
class QuoteSequences:
    """Texts with an open quote, labelled with the quote character that closes it."""

    texts: list[str]
    closer: list[str]
    """``"'"`` or ``'"'``: the same character that opened the quote."""
    seed: int

    def __len__(self) -> int:
        return len(self.texts)


_QUOTE_PREFIXES = ("", "x = ", "print(", "name = ", "She said ", "The sign read ")
_QUOTE_WORDS = (
    "hello",
    "there",
    "world",
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "we",
    "went",
    "home",
    "today",
)
_APOSTROPHE_WORDS = ("it's", "don't", "we're", "that's")


def iter_quote_texts(seed: int) -> Iterator[tuple[str, str]]:
    """Endless stream of ``(text, closer)``; ``quote_sequences`` takes the first ``n``.

    A text is a prefix, an opening quote and 1-6 words. Inside double quotes an apostrophe word
    appears half the time, so the answer cannot be "the last quote-like character seen".
    """
    rng = random.Random(seed)
    while True:
        quote = rng.choice(("'", '"'))
        words = [rng.choice(_QUOTE_WORDS) for _ in range(rng.randint(1, 6))]
        if quote == '"' and rng.random() < 0.5:
            words.insert(rng.randint(0, len(words)), rng.choice(_APOSTROPHE_WORDS))
        yield rng.choice(_QUOTE_PREFIXES) + quote + " ".join(words), quote


def quote_sequences(n: int, seed: int) -> QuoteSequences:
    """``n`` short texts opening with ``'`` or ``"``; the label is the matching closing quote.

    Example: ``'She said "we're home'`` -> ``'"'``.
    """
    rows = list(islice(iter_quote_texts(seed), n))
    return QuoteSequences([r[0] for r in rows], [r[1] for r in rows], seed)
