"""tokenize_texts: right padding, default special tokens kept, errors that say what to do."""

import pytest
import torch
from tokenizers.processors import TemplateProcessing

from interp.data import byte_tokenizer, tokenize_texts


def test_right_padding_with_pad_id(tok):
    input_ids, attention_mask = tokenize_texts(tok, ["hello", "hi"], max_len=None, truncate=False)
    assert input_ids.dtype == attention_mask.dtype == torch.long
    assert input_ids.tolist() == [[104, 101, 108, 108, 111], [104, 105, 256, 256, 256]]
    assert attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]


def test_pad_falls_back_to_eos():
    tok = byte_tokenizer()
    tok.pad_token = None
    assert tok.pad_token_id is None
    batch = tokenize_texts(tok, ["abc", "a"], max_len=8, truncate=False)
    assert batch.input_ids[1].tolist() == [97, tok.eos_token_id, tok.eos_token_id]


def test_default_special_tokens_are_kept():
    tok = byte_tokenizer()
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", 256)]
    )
    batch = tokenize_texts(tok, ["hi"], max_len=None, truncate=False)
    assert batch.input_ids.tolist() == [[256, 104, 105]]


def test_empty_inputs_are_rejected(tok):
    with pytest.raises(ValueError, match="empty list"):
        tokenize_texts(tok, [], max_len=None, truncate=False)
    with pytest.raises(ValueError, match="empty text at index 1"):
        tokenize_texts(tok, ["ok", "", "ok"], max_len=None, truncate=False)
    with pytest.raises(TypeError, match="list of strings"):
        tokenize_texts(tok, "not a list", max_len=None, truncate=False)


def test_too_long_text_names_index_length_and_fixes(tok):
    with pytest.raises(ValueError) as info:
        tokenize_texts(tok, ["short", "x" * 12], max_len=10, truncate=False)
    msg = str(info.value)
    assert "index 1" in msg and "12 tokens" in msg and "max_len=10" in msg
    assert "truncate=True" in msg and "build_corpus" in msg


def test_truncate_keeps_the_start(tok):
    batch = tokenize_texts(tok, ["abcdefghij", "ab"], max_len=4, truncate=True)
    assert batch.input_ids.tolist() == [[97, 98, 99, 100], [97, 98, 256, 256]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
