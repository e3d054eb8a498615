"""Clean/corrupted prompt pairs with answer sets: the data every edge finder and faithfulness measure reads.

A row is a clean prompt, optionally a corrupted prompt (same template, the information the task needs
changed), the answer token(s) the clean prompt should get and the wrong one(s) (what the corrupted
prompt points to). Answers are *sets*: greater-than's right answers are every digit above the start
year's. The last prompt position of each row is scored.

Alignment: patching activations from the corrupted run into the clean one (EAP, EAP-IG, "corrupt"
ablation) needs each row's clean and corrupted prompts to have the same number of tokens, so that
position i of one is position i of the other. `encode_pairs(..., align=True)` refuses a row that breaks
this, naming the row and both token counts; with `align=False` (mean or zero ablation, node finders)
the two prompts of a row are padded independently. Rows of different lengths are always fine: the batch
is right-padded and each row's own last position is scored.

    >>> batch = encode_pairs(tok, [{"clean": "a b", "corrupt": "a c", "answer": " x", "wrong": " y"}])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from interp.data import tokenize_texts


class PairError(ValueError):
    """A prompt row that cannot be used as asked; the message names the row and the fix."""


@dataclass
class PairBatch:
    """Tokenised prompt pairs. Answer sets are padded with id 0 and weight 0."""

    clean: Tensor
    """LongTensor [n, pos] clean prompts, right-padded."""
    clean_mask: Tensor
    clean_pos: Tensor
    """LongTensor [n]: last clean prompt position."""
    corrupt: Tensor | None
    """LongTensor [n, pos'] corrupted prompts (None when the rows have none)."""
    corrupt_mask: Tensor | None
    corrupt_pos: Tensor | None
    answers: Tensor
    """LongTensor [n, A] answer token ids."""
    answer_w: Tensor
    """FloatTensor [n, A]: 1 for a real answer, 0 for padding."""
    wrongs: Tensor
    """LongTensor [n, W] wrong-answer token ids ([n, 0] when the rows give none)."""
    wrong_w: Tensor
    aligned: bool
    """Whether clean and corrupted prompts have the same token positions (row by row)."""

    def __len__(self) -> int:
        return self.clean.shape[0]

    @property
    def has_wrong(self) -> bool:
        return self.wrongs.shape[1] > 0 and bool(self.wrong_w.sum(1).gt(0).all())

    def _fields(self):
        return (
            "clean",
            "clean_mask",
            "clean_pos",
            "corrupt",
            "corrupt_mask",
            "corrupt_pos",
            "answers",
            "answer_w",
            "wrongs",
            "wrong_w",
        )

    def select(self, idx) -> PairBatch:
        vals = {f: (None if getattr(self, f) is None else getattr(self, f)[idx]) for f in self._fields()}
        return PairBatch(**vals, aligned=self.aligned)

    def split(self, size: int) -> list[PairBatch]:
        return [self.select(slice(i, i + size)) for i in range(0, len(self), size)]

    def to(self, device) -> PairBatch:
        vals = {f: (None if getattr(self, f) is None else getattr(self, f).to(device)) for f in self._fields()}
        return PairBatch(**vals, aligned=self.aligned)

    def trim(self) -> PairBatch:
        """The same rows with padding columns no row uses removed (after `select` of short rows)."""
        n = int(self.clean_mask.sum(1).max())
        out = self.select(slice(None))
        out.clean, out.clean_mask = self.clean[:, :n], self.clean_mask[:, :n]
        if self.corrupt is not None:
            m = int(self.corrupt_mask.sum(1).max())
            out.corrupt, out.corrupt_mask = self.corrupt[:, :m], self.corrupt_mask[:, :m]
        return out


def answer_id(tokenizer, prompt: str, answer: str) -> int:
    """Token id of `answer` continuing `prompt` (the first new token when prompt+answer is tokenised)."""
    full = tokenizer(prompt + answer)["input_ids"]
    head = tokenizer(prompt)["input_ids"]
    if len(full) > len(head) and full[: len(head)] == head:
        return full[len(head)]
    return tokenizer(answer)["input_ids"][0]


def _answer_ids(tokenizer, prompt: str, answers, row: int, field: str) -> list[int]:
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a for a in answers):
        raise PairError(
            f"row {row}: {field!r} must be a non-empty string or a list of non-empty strings, got {answers!r}"
        )
    return [answer_id(tokenizer, prompt, a) for a in answers]


def _check_distinct(tokenizer, row: int, r: dict, ans: list[int], wrong: list[int]) -> None:
    """Refuse a row whose answer and wrong answer share a first token: the metric compares first tokens,
    so its logit difference would be 0 by construction (SmolLM2 reads " 17" and " 18" as token 216 first)."""
    shared = sorted(set(ans) & set(wrong))
    if shared:
        t = shared[0]
        try:
            shown = repr(tokenizer.decode([t]))
        except Exception:  # noqa: BLE001 - only for the message
            shown = "?"
        raise PairError(
            f"row {row}: the answer {r['answer']!r} and the wrong answer {r['wrong']!r} share their "
            f"first token {t} ({shown}), so the metric would be 0 by construction; choose answers whose "
            "first tokens differ"
        )


def _pad(rows: list[list[int]]) -> tuple[Tensor, Tensor]:
    width = max((len(r) for r in rows), default=0)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    w = torch.zeros(len(rows), width)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        w[i, : len(r)] = 1.0
    return ids, w


ALIGNED_FOR = {
    "ablation": "use --ablation mean or zero, which do not patch from the corrupted prompts",
    "edges": "use a node method (--method prune, safeseek or activation-diff): eap and eap-ig patch from the "
    "corrupted prompts whatever the --ablation",
    "features": "",
}
"""What needs aligned pairs -> the other way the refusal offers (none: feature scores always patch from them).
`--ablation mean` is no way out for the edge methods, so it is offered only where the ablation asked for them."""


def encode_pairs(
    tokenizer, rows: list[dict], align: bool = True, max_len: int | None = None, aligned_for: str = "ablation"
) -> PairBatch:
    """Tokenise rows {"clean", "corrupt"?, "answer", "wrong"?} (or {"prompt", "answer"}) into a `PairBatch`.

    `align=True` requires each row's clean and corrupted prompts to have the same token count (see the
    module docstring); rows without a corrupted prompt are refused then, since there is nothing to align.
    `aligned_for` (a key of `ALIGNED_FOR`) says what needs them, so the refusal offers the way that works.
    """
    other = ALIGNED_FOR[aligned_for]
    other = f", or {other}" if other else ""
    if not rows:
        raise PairError("no prompt rows; give at least one row")
    clean_txt, corrupt_txt, ans, wrong = [], [], [], []
    n_corrupt = 0
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise PairError(f"row {i}: expected a JSON object, got {type(r).__name__}")
        clean = r.get("clean", r.get("prompt"))
        if not isinstance(clean, str) or not clean:
            raise PairError(f'row {i}: needs a non-empty "clean" (or "prompt") string')
        if "answer" not in r:
            raise PairError(f'row {i}: needs an "answer" (a string, or a list of strings)')
        corrupt = r.get("corrupt")
        if corrupt is not None:
            if not isinstance(corrupt, str) or not corrupt:
                raise PairError(f'row {i}: "corrupt" must be a non-empty string')
            n_corrupt += 1
        clean_txt.append(clean)
        corrupt_txt.append(corrupt)
        ans.append(_answer_ids(tokenizer, clean, r["answer"], i, "answer"))
        wrong.append(_answer_ids(tokenizer, clean, r["wrong"], i, "wrong") if r.get("wrong") is not None else [])
        _check_distinct(tokenizer, i, r, ans[-1], wrong[-1])
    if 0 < n_corrupt < len(rows):
        missing = next(i for i, c in enumerate(corrupt_txt) if c is None)
        raise PairError(f'row {missing} has no "corrupt" prompt but other rows do; give it to every row or to none')
    if any(wrong) and not all(wrong):
        missing = next(i for i, w in enumerate(wrong) if not w)
        raise PairError(f'row {missing} has no "wrong" answer but other rows do; give it to every row or to none')
    cids, cmask = tokenize_texts(tokenizer, clean_txt, max_len=max_len)
    cpos = cmask.sum(1) - 1
    kids = kmask = kpos = None
    if n_corrupt:
        kids, kmask = tokenize_texts(tokenizer, corrupt_txt, max_len=max_len)
        kpos = kmask.sum(1) - 1
        if align:
            bad = torch.nonzero(kpos != cpos)[:, 0].tolist()
            if bad:
                i = bad[0]
                raise PairError(
                    f"row {i}: the clean prompt has {int(cpos[i]) + 1} tokens and the corrupted one "
                    f"{int(kpos[i]) + 1}; "
                    "patching from the corrupted run needs them position by position (EAP, EAP-IG, --ablation "
                    "corrupt). "
                    f"Reword the pair to the same token count ({len(bad)} of {len(rows)} rows differ){other}"
                )
            width = max(cids.shape[1], kids.shape[1])
            cids, cmask = _widen(cids, width, tokenizer), _widen(cmask, width, None)
            kids, kmask = _widen(kids, width, tokenizer), _widen(kmask, width, None)
    elif align:
        raise PairError(
            f'the rows have no "corrupt" prompts; patching needs clean/corrupt pairs. Add "corrupt" to every row{other}'
        )
    a, aw = _pad(ans)
    w, ww = _pad(wrong)
    return PairBatch(cids, cmask, cpos, kids, kmask, kpos, a, aw, w, ww, aligned=bool(n_corrupt) and align)


def _widen(t: Tensor, width: int, tokenizer) -> Tensor:
    if t.shape[1] == width:
        return t
    pad = 0 if tokenizer is None else (tokenizer.pad_token_id or 0)
    return torch.cat([t, torch.full((t.shape[0], width - t.shape[1]), pad, dtype=t.dtype)], 1)


def read_prompt_file(path) -> list[dict]:
    """Rows of a JSONL prompts file; a ValueError names the line of the first malformed row."""
    import json
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no prompts file at {p}; give --task prompts:FILE.jsonl with one JSON object per line")
    rows = []
    data = p.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise PairError(f"{p}:{line} is not UTF-8 text (byte {e.start}); save the prompts file as UTF-8") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PairError(
                f"{p}:{lineno} is not valid JSON ({exc.msg}); one object per line, e.g. "
                '{"clean": "...", "corrupt": "...", "answer": " x", "wrong": " y"}'
            ) from None
        if not isinstance(row, dict):
            raise PairError(f"{p}:{lineno}: expected a JSON object, got {type(row).__name__}")
        unknown = set(row) - {"clean", "prompt", "corrupt", "answer", "wrong"}
        if unknown:
            raise PairError(
                f"{p}:{lineno}: unknown field(s) {sorted(unknown)}; use clean (or prompt), corrupt, answer, wrong"
            )
        rows.append(row)
    if not rows:
        raise PairError(f"{p} holds no rows")
    return rows
