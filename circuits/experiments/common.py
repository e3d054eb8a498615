"""Shared pieces of the experiments: a "tiny Python" corpus, batch samplers, one-thread set-up."""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch

from interp.data import bracket_sequences, quote_sequences, tokenize_texts


def tiny_python(n: int, seed: int) -> list[str]:
    """Statements with closed strings (quotes task) and closed bracket nests (brackets task), one per line.

    ``x = 'the cat'``, ``print("we're home")``, ``y = [(){[]}]`` ... The quote texts come from
    `interp.data.quote_sequences`, so the quotes task's prompts are prefixes of this distribution.
    """
    rng = random.Random(seed)
    quotes = quote_sequences(n, seed)
    brackets = bracket_sequences(n, ctx_len=16, seed=seed)
    out = []
    for i in range(n):
        if rng.random() < 0.6:
            text, closer = quotes.texts[i], quotes.closer[i]
            out.append(text + closer + (")" if text.startswith("print(") else ""))
        else:
            text = brackets.texts[i]
            closing = "".join({"(": ")", "[": "]", "{": "}"}[c] for c in reversed(_open_stack(text)))
            out.append("y = " + text + closing)
    return out


def _open_stack(text: str) -> list[str]:
    stack: list[str] = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in ")]}":
            stack.pop()
    return stack


def packed_lines(lines: list[str], ctx_len: int) -> list[str]:
    """Join lines with newlines into texts of at most ctx_len bytes (whole lines only)."""
    out, cur = [], ""
    for line in lines:
        if len(cur) + len(line) + 1 > ctx_len:
            out.append(cur)
            cur = ""
        cur += line + "\n"
    if cur:
        out.append(cur)
    return out


def sampler(texts: list[str], tokenizer, batch_size: int, seed: int):
    """data(step) -> (ids, mask): random batches of the texts."""
    gen = torch.Generator().manual_seed(seed)

    def data(step: int):
        idx = torch.randint(0, len(texts), (batch_size,), generator=gen).tolist()
        return tokenize_texts(tokenizer, [texts[i] for i in idx])

    return data


def setup(threads: int = 1) -> None:
    """One thread: tiny models run far faster that way on a shared 2-core machine."""
    torch.set_num_threads(threads)


def write_json(path: str | Path, obj) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1, default=str))
    return path
