"""A byte-level tokenizer built offline, for models that were never trained on a vocabulary.

Randomly initialised models (a Pythia-shaped GPTNeoX built from a config, the tiny test models)
still need *some* text <-> ids mapping. Downloading a real tokenizer is not an option offline, and
any learned vocabulary would be arbitrary for an untrained model anyway. Bytes are the natural
choice: 256 ids cover every UTF-8 string exactly, the mapping is the same on every machine, and
the vocabulary is small enough for tiny models.

Layout of the vocabulary:

- ids ``0..255``: one token per byte value (id ``b`` is byte ``b``), written with GPT-2's
  byte-to-unicode alphabet so that the ``tokenizers`` ByteLevel pre-tokenizer and decoder
  round-trip any text;
- id ``256``: ``<|endoftext|>``, used as eos, bos and pad token.

Example::

    >>> tok = byte_tokenizer()
    >>> tok("hé")["input_ids"]
    [104, 195, 169]
    >>> tok.decode([104, 195, 169])
    'hé'
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

__all__ = ["EOT_TOKEN", "BYTE_TOKENIZER_NAME", "byte_tokenizer", "bytes_to_unicode"]

EOT_TOKEN = "<|endoftext|>"
"""The single special token; doubles as eos, bos and pad."""

BYTE_TOKENIZER_NAME = "interp/byte-level"
"""``name_or_path`` of the tokenizer, so saved models show where their vocabulary came from."""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from byte values to printable unicode characters.

    The ByteLevel pre-tokenizer of ``tokenizers`` rewrites every input byte as one of these
    characters before the model looks it up, so the vocabulary must be spelled in this alphabet.
    Printable Latin-1 bytes map to themselves; the others are shifted to ``chr(256 + k)``.
    """
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    mapping: dict[int, str] = {b: chr(b) for b in printable}
    shift = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shift)
            shift += 1
    return mapping


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """Build the byte-level tokenizer (257 tokens, no merges), fully offline and deterministic.

    The tokenizer adds no special tokens to encoded text (there is no post-processor), so
    ``tok(text).input_ids`` is exactly the UTF-8 bytes of ``text``; documents are separated by
    inserting ``tok.eos_token_id`` explicitly where that is wanted (see ``build_corpus``).
    """
    alphabet = bytes_to_unicode()
    vocab = {alphabet[b]: b for b in range(256)}
    # BPE with an empty merge list: every pre-token is split into its byte characters.
    model = models.BPE(vocab=vocab, merges=[], unk_token=None, fuse_unk=False)
    backend = Tokenizer(model)
    # use_regex=False: without merges the GPT-2 word split would change nothing but speed.
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([EOT_TOKEN])  # the next free id: 256
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=EOT_TOKEN,
        bos_token=EOT_TOKEN,
        pad_token=EOT_TOKEN,
        unk_token=None,
        model_max_length=int(1e30),
        padding_side="right",
        clean_up_tokenization_spaces=False,
        name_or_path=BYTE_TOKENIZER_NAME,
    )
    return tok
