"""What makes an artifact portable: the tokenizer by identity, paths relative to the artifact.

A store, SAE, circuit or attribution run copied to another folder or machine must still open, verify
and be recognised as the same run. So artifacts never record where a tokenizer happened to live
(`/root/.cache/.../converted/...`), only which tokenizer it is: its name and a hash of its files
(`tokenizer_identity`); and a path an artifact refers to (the store an SAE was trained on) is
written relative to the artifact's own folder (`relative_to`) and read back with `resolve_recorded`.

    >>> tokenizer_identity(byte_tokenizer())
    'interp/byte-level@sha256:5b0c...'
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "spiece.model",
)
"""Files that define a HF tokenizer; the identity hashes those present, by name and bytes."""


def _files_digest(folder: Path) -> str | None:
    h = hashlib.sha256()
    found = False
    for name in TOKENIZER_FILES:
        f = folder / name
        if f.is_file():
            found = True
            h.update(f"{name}\n".encode())
            h.update(f.read_bytes())
    return h.hexdigest() if found else None


def _content_digest(tokenizer) -> str:
    """Hash of the vocabulary and special tokens, for a tokenizer built in code (no files)."""
    vocab = sorted(tokenizer.get_vocab().items())
    special = getattr(tokenizer, "special_tokens_map", {})
    blob = json.dumps(
        {"class": type(tokenizer).__name__, "vocab": vocab, "special": special}, sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def tokenizer_identity(tokenizer) -> str:
    """ "NAME@sha256:HEX16": the folder's (or hub id's) last name and a hash of the tokenizer's files.

    Two copies of the same tokenizer in different folders or machines get the same identity; a
    tokenizer with a changed vocabulary gets another one. Tokenizers built in code (the byte-level
    one) are hashed by their vocabulary and special tokens instead of files.
    """
    where = str(getattr(tokenizer, "name_or_path", "") or "")
    folder = Path(where) if where and os.path.isdir(where) else None
    digest = _files_digest(folder) if folder is not None else None
    if digest is None:
        digest = _content_digest(tokenizer)
    name = folder.name if folder is not None else (where or type(tokenizer).__name__)
    return f"{name}@sha256:{digest[:16]}"


def relative_to(path: str | os.PathLike, artifact_dir: str | os.PathLike) -> str:
    """`path` written relative to the artifact's folder (POSIX separators), so the pair can move together."""
    return Path(os.path.relpath(Path(path).absolute(), Path(artifact_dir).absolute())).as_posix()


def resolve_recorded(recorded: str | os.PathLike, artifact_dir: str | os.PathLike) -> Path:
    """A path read back from an artifact: absolute ones as they are, relative ones from the artifact's folder."""
    p = Path(recorded)
    return p if p.is_absolute() else Path(artifact_dir) / p
