"""The byte tokenizer maps text to its UTF-8 bytes exactly and survives save/load."""

import json

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from interp.data import BYTE_TOKENIZER_NAME, EOT_TOKEN, byte_tokenizer

TEXTS = [
    "hello world",
    "  leading and trailing spaces  ",
    "héllo wörld — naïve café",
    "日本語のテキスト and 한국어",
    "emoji 🤖🧠 and a combining accent: e\u0301",
    "tabs\tnew\nlines\r\nand control \x00\x01\x7f bytes",
]


@pytest.mark.parametrize("text", TEXTS)
def test_ids_are_utf8_bytes_and_decode_round_trips(tok, text):
    ids = tok(text)["input_ids"]
    assert ids == list(text.encode("utf-8"))
    assert tok.decode(ids) == text


def test_special_token_layout(tok):
    assert isinstance(tok, PreTrainedTokenizerFast)
    assert len(tok) == 257 and tok.vocab_size == 256
    assert tok.convert_ids_to_tokens(256) == EOT_TOKEN
    assert tok.eos_token_id == tok.bos_token_id == tok.pad_token_id == 256
    assert tok.name_or_path == BYTE_TOKENIZER_NAME
    # No merges: every byte is its own token, and nothing is added around the text.
    assert tok("ab")["input_ids"] == [97, 98]
    assert tok.decode([104, 105, 256], skip_special_tokens=True) == "hi"


def test_build_is_deterministic():
    assert byte_tokenizer().backend_tokenizer.to_str() == byte_tokenizer().backend_tokenizer.to_str()


def test_save_and_load_round_trip(tok, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["eos_token"] == EOT_TOKEN
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "round trip ✓ " + TEXTS[3]
    assert loaded(text)["input_ids"] == tok(text)["input_ids"]
    assert loaded.decode(loaded(text)["input_ids"]) == text
    assert (loaded.eos_token_id, loaded.pad_token_id, len(loaded)) == (256, 256, 257)
