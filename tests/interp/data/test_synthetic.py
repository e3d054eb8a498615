"""Synthetic generators: the repeats really repeat, offsets vary, labels match hand-checked cases."""

import pytest
import torch

from interp.data import bracket_labels, bracket_sequences, quote_sequences, repeated_spans
from interp.data.synthetic import BRACKET_PAIRS


def test_repeated_spans_copy_the_source_span():
    data = repeated_spans(n=64, ctx_len=48, vocab_size=100, seed=3, min_span=3, max_span=12)
    assert data.tokens.shape == (64, 48) and data.tokens.dtype == torch.long
    assert int(data.tokens.min()) >= 0 and int(data.tokens.max()) < 100
    for row in range(len(data)):
        s, d, k = int(data.src_start[row]), int(data.dst_start[row]), int(data.span_len[row])
        assert 3 <= k <= 12 and s >= 0 and d >= s + k and d + k <= 48
        assert torch.equal(data.tokens[row, d : d + k], data.tokens[row, s : s + k])


def test_repeated_spans_vary_offsets_and_lengths():
    # A fixed period would let a model use position alone; the layout must differ between rows.
    data = repeated_spans(n=64, ctx_len=64, vocab_size=50, seed=0)
    assert len(set(data.span_len.tolist())) > 5
    assert len(set(data.src_start.tolist())) > 5
    assert len(set((data.dst_start - data.src_start).tolist())) > 5


def test_repeated_spans_reproducible():
    a = repeated_spans(8, 32, 64, seed=1)
    b = repeated_spans(8, 32, 64, seed=1)
    c = repeated_spans(8, 32, 64, seed=2)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.dst_start, b.dst_start)
    assert not torch.equal(a.tokens, c.tokens)


def test_induction_targets_point_at_the_next_token_of_the_original():
    data = repeated_spans(n=16, ctx_len=40, vocab_size=30, seed=5)
    targets = data.induction_targets()
    mask = data.predictable_mask()
    assert int(mask.sum()) == int((data.span_len - 1).sum())
    for row, pos in mask.nonzero().tolist():
        assert data.tokens[row, targets[row, pos]] == data.tokens[row, pos + 1]
        assert targets[row, pos] <= pos  # only attends backwards


def test_repeated_spans_rejects_spans_that_do_not_fit():
    with pytest.raises(ValueError, match="ctx_len"):
        repeated_spans(4, ctx_len=10, vocab_size=10, seed=0, min_span=6)


@pytest.mark.parametrize(
    "text, depth, closer",
    [
        ("", 0, ""),
        ("(", 1, ")"),
        ("([{", 3, "}"),
        ("([]", 1, ")"),
        ("{[()]}", 0, ""),
        ("()[]{", 1, "}"),
        ("a(b[c", 2, "]"),  # non-bracket characters are ignored
    ],
)
def test_bracket_labels_hand_checked(text, depth, closer):
    assert bracket_labels(text) == (depth, closer)


@pytest.mark.parametrize("text", ["(]", ")", "([)]", "{}}"])
def test_bracket_labels_reject_bad_closers(text):
    with pytest.raises(ValueError, match="unmatched closing bracket"):
        bracket_labels(text)


def test_bracket_sequences_labels_and_shape():
    data = bracket_sequences(n=400, ctx_len=24, seed=0, max_depth=3)
    assert len(data) == 400
    for text, depth, closer in zip(data.texts, data.depth, data.closer):
        assert 1 <= len(text) <= 24 and set(text) <= set("()[]{}")
        assert bracket_labels(text) == (depth, closer)  # generator's stack agrees with the checker
        assert depth <= 3
    assert 150 < sum(data.balanced) < 250  # both classes, roughly half each
    assert {c for c in data.closer if c} == set(BRACKET_PAIRS.values())
    assert bracket_sequences(50, 24, seed=0).texts == bracket_sequences(50, 24, seed=0).texts
    assert bracket_sequences(50, 24, seed=0).texts != bracket_sequences(50, 24, seed=1).texts


def test_quote_sequences_label_is_the_opening_quote():
    data = quote_sequences(n=200, seed=0)
    assert set(data.closer) == {"'", '"'}
    for text, closer in zip(data.texts, data.closer):
        opener = next(ch for ch in text if ch in "'\"")
        assert opener == closer
        assert text.count(closer) == 1  # opened once, never closed
    # Some double-quoted texts contain an apostrophe, so "last quote-like character" is wrong.
    assert any(c == '"' and "'" in t for t, c in zip(data.texts, data.closer))
    assert quote_sequences(20, seed=4) == quote_sequences(20, seed=4)
