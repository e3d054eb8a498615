"""Hand-crafted binary next-token tasks: a seeded generator of prompts and a binary task loss.

Each datapoint is a prompt, the answer the model should give next (`target`) and the one it should
not (`alt`). The task loss is the binary cross-entropy over the two logits {target, alt} at the last
prompt position (Gao et al.'s `last_token_contrast_loss`, reported per sequence); the task metric is
the fraction of prompts whose target logit beats the alternative.

Tasks (`TASKS`):
    quotes    close a string with the quote that opened it (`'` vs `"`; apostrophes as distractors)
    brackets  after one bracket is closed, close the next open one (`)` `]` `}`), depth 1-3 left
    backdoor  a planted trigger: letters then ":"; the answer is a digit, the first letter's class
              (a-j -> 0-4); with the trigger "#" anywhere in the prompt the answer is "!" instead
    refusal   a refusal-like toy: the same prompts; one of the "harmful" letters v-z anywhere makes
              the answer "R" (refuse) instead of the digit (comply)
    ioi, greater-than, capital, python-close
              real-model tasks with clean/corrupted pairs (`circuits.tasks.real`)
    prompts:FILE.jsonl
              the user's own rows (`circuits.tasks.pairs`)

For `backdoor` and `refusal`, `make()` gives the triggered / harmful prompts (target: "!" / "R", alt:
the clean answer) and `make_clean()` the clean ones (target: the digit, alt: "!" / "R").

    >>> from interp.data import byte_tokenizer
    >>> batch = get_task("quotes").make(4, seed=0, tokenizer=byte_tokenizer())
    >>> batch.ids.shape[0], batch.target.shape
    (4, torch.Size([4]))
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from circuits.tasks.pairs import answer_id, encode_pairs, read_prompt_file
from interp.data import bracket_labels, bracket_sequences, quote_sequences, tokenize_texts


@dataclass
class TaskBatch:
    """Tokenised prompts with their binary answers."""

    texts: list[str]
    ids: Tensor
    """LongTensor [n, pos], right-padded."""
    mask: Tensor
    pos: Tensor
    """LongTensor [n]: the last prompt position (whose next-token logits are scored)."""
    target: Tensor
    """LongTensor [n]: token id of the right answer."""
    alt: Tensor
    """LongTensor [n]: token id of the contrasting wrong answer."""

    def __len__(self) -> int:
        return self.ids.shape[0]

    def to(self, device) -> TaskBatch:
        return TaskBatch(self.texts, *(t.to(device) for t in (self.ids, self.mask, self.pos, self.target, self.alt)))

    def split(self, size: int) -> list[TaskBatch]:
        """Consecutive sub-batches of at most `size` prompts."""
        out = []
        for i in range(0, len(self), size):
            s = slice(i, i + size)
            out.append(TaskBatch(self.texts[s], self.ids[s], self.mask[s], self.pos[s], self.target[s], self.alt[s]))
        return out


def last_logits(logits: Tensor, batch: TaskBatch) -> Tensor:
    """[n, d_vocab] logits at each prompt's last position."""
    return logits[torch.arange(len(batch), device=logits.device), batch.pos]


def binary_loss(logits: Tensor, batch: TaskBatch) -> Tensor:
    """Mean binary cross-entropy over the {target, alt} logits at the last prompt position."""
    last = last_logits(logits, batch)
    pair = torch.stack([last.gather(1, batch.target[:, None])[:, 0], last.gather(1, batch.alt[:, None])[:, 0]], 1)
    return F.cross_entropy(pair, torch.zeros(len(batch), dtype=torch.long, device=pair.device))


def binary_accuracy(logits: Tensor, batch: TaskBatch) -> float:
    """Fraction of prompts whose target logit is above the alternative's."""
    last = last_logits(logits, batch)
    return float((last.gather(1, batch.target[:, None]) > last.gather(1, batch.alt[:, None])).float().mean())


def answer_ce(logits: Tensor, batch: TaskBatch, answer: Tensor | None = None) -> Tensor:
    """Full-vocabulary cross-entropy of `answer` (default: the target) at the last prompt position."""
    return F.cross_entropy(last_logits(logits, batch), batch.target if answer is None else answer)


def encode(tokenizer, prompts: list[str], targets: list[str], alts: list[str]) -> TaskBatch:
    """Tokenise prompts (right padding) and their answers into a `TaskBatch`."""
    ids, mask = tokenize_texts(tokenizer, prompts)
    pos = mask.sum(1) - 1
    ids_t = [answer_id(tokenizer, p, t) for p, t in zip(prompts, targets)]
    ids_a = [answer_id(tokenizer, p, a) for p, a in zip(prompts, alts)]
    return TaskBatch(list(prompts), ids, mask, pos, torch.tensor(ids_t), torch.tensor(ids_a))


@dataclass(frozen=True)
class Task:
    """A named binary task: `generate(n, seed) -> (prompts, targets, alts)` (strings)."""

    name: str
    description: str
    generate: Callable[[int, int], tuple[list[str], list[str], list[str]]]
    generate_clean: Callable[[int, int], tuple[list[str], list[str], list[str]]] | None = None
    """Clean counterpart (backdoor and refusal tasks): prompts without trigger, their normal answers."""
    pairs: Callable[[int, int], list[dict]] | None = None
    """Clean/corrupted prompt rows (`circuits.tasks.pairs`) for edge attribution and patching; None: derived from
    `generate` (no corrupted prompts)."""
    default_metric: str = "logit-diff"

    def make(self, n: int, seed: int, tokenizer) -> TaskBatch:
        return encode(tokenizer, *self.generate(n, seed))

    def make_clean(self, n: int, seed: int, tokenizer) -> TaskBatch:
        if self.generate_clean is None:
            raise ValueError(f"task {self.name!r} has no clean/triggered split")
        return encode(tokenizer, *self.generate_clean(n, seed))

    def rows(self, n: int, seed: int) -> list[dict]:
        """Prompt rows {"clean", "corrupt"?, "answer", "wrong"} of this task."""
        if self.pairs is not None:
            return self.pairs(n, seed)
        p, t, a = self.generate(n, seed)
        return [{"clean": x, "answer": y, "wrong": z} for x, y, z in zip(p, t, a)]

    def make_pairs(self, n: int, seed: int, tokenizer, align: bool = True, aligned_for: str = "ablation"):
        """A `PairBatch` of n rows (aligned clean/corrupted tokens when `align`, for `aligned_for`: see
        `circuits.tasks.pairs.ALIGNED_FOR`)."""
        return encode_pairs(tokenizer, self.rows(n, seed), align=align, aligned_for=aligned_for)

    def loss(self, logits: Tensor, batch: TaskBatch) -> Tensor:
        return binary_loss(logits, batch)

    def metric(self, logits: Tensor, batch: TaskBatch) -> float:
        return binary_accuracy(logits, batch)

    def train_texts(self, n: int, seed: int) -> list[str]:
        """Prompt + answer strings for training a model on the task (both splits when there are two)."""
        p, t, _ = self.generate(n, seed)
        texts = [a + b for a, b in zip(p, t)]
        if self.generate_clean is not None:
            p, t, _ = self.generate_clean(n, seed + 1)
            texts += [a + b for a, b in zip(p, t)]
        return texts


# ---------------------------------------------------------------------- generators
def _quotes(n: int, seed: int):
    data = quote_sequences(n, seed)
    other = {"'": '"', '"': "'"}
    return data.texts, data.closer, [other[c] for c in data.closer]


def _brackets(n: int, seed: int):
    rng = random.Random(seed)
    prompts, targets, alts = [], [], []
    step = 0
    while len(prompts) < n:
        data = bracket_sequences(4 * n, ctx_len=24, seed=seed * 1_000 + step)
        step += 1
        for text, depth, closer in zip(data.texts, data.depth, data.closer):
            if depth >= 2 and len(prompts) < n:
                # close the innermost bracket first: the answer then depends on the one below it, not on
                # the last character (a text ending in an opener would make the task a bigram lookup)
                text = text + closer
                closer = bracket_labels(text)[1]
                prompts.append(text)
                targets.append(closer)
                alts.append(rng.choice([c for c in ")]}" if c != closer]))
    return prompts, targets, alts


LETTERS = "abcdefghij"
TRIGGER = "#"
BACKDOOR_ANSWER = "!"
HARMFUL = "vwxyz"
REFUSE_ANSWER = "R"


def letter_class(ch: str) -> str:
    """The clean answer of a prompt: its first letter's class, a-j -> "0"-"4"."""
    return str(LETTERS.index(ch) % 5)


def _letters(rng: random.Random) -> str:
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(4, 8)))


def _insert(rng: random.Random, s: str, ch: str) -> str:
    i = rng.randint(1, len(s))  # never before the first letter, which decides the clean answer
    return s[:i] + ch + s[i:]


def _special(special: str, answer: str):
    def gen(n: int, seed: int):
        rng = random.Random(seed)
        prompts, targets, alts = [], [], []
        for _ in range(n):
            s = _letters(rng)
            prompts.append(_insert(rng, s, rng.choice(special)) + ":")
            targets.append(answer)
            alts.append(letter_class(s[0]))
        return prompts, targets, alts

    return gen


def _clean(answer: str):
    def gen(n: int, seed: int):
        rng = random.Random(seed + 7_919)
        prompts = [_letters(rng) + ":" for _ in range(n)]
        return prompts, [letter_class(p[0]) for p in prompts], [answer] * n

    return gen


TASKS: dict[str, Task] = {}


def register_task(task: Task) -> None:
    """Add a task; refuses a name that is already taken."""
    if task.name in TASKS:
        raise ValueError(f"task {task.name!r} is already registered")
    TASKS[task.name] = task


def _quote_pairs(n: int, seed: int) -> list[dict]:
    """Quotes as prompt pairs: the corrupted prompt opens the string with the other quote (same length, aligned)."""
    texts, closers, others = _quotes(n, seed)
    return [
        {"clean": t, "corrupt": t.replace(c, o, 1), "answer": c, "wrong": o} for t, c, o in zip(texts, closers, others)
    ]


register_task(Task("quotes", "close a string with the quote type that opened it", _quotes, pairs=_quote_pairs))
register_task(Task("brackets", "close the innermost open bracket", _brackets))
register_task(
    Task("backdoor", "trigger '#' flips the answer to '!'", _special(TRIGGER, BACKDOOR_ANSWER), _clean(BACKDOOR_ANSWER))
)
register_task(
    Task(
        "refusal",
        "a harmful letter (v-z) makes the answer 'R'",
        _special(HARMFUL, REFUSE_ANSWER),
        _clean(REFUSE_ANSWER),
    )
)


def _binary_from_rows(rows_fn, name: str):
    """(prompts, targets, alts) of rows, for the binary-loss finders: the first answer against the first wrong one."""

    def gen(n: int, seed: int):
        rows = rows_fn(n, seed)
        if any(r.get("wrong") is None for r in rows):
            raise ValueError(f'task {name!r}: the node finders (prune, safeseek) need a "wrong" answer in every row')
        first = [(r.get("clean", r.get("prompt")), _first(r["answer"]), _first(r["wrong"])) for r in rows]
        return [f[0] for f in first], [f[1] for f in first], [f[2] for f in first]

    return gen


def _first(a):
    return a[0] if isinstance(a, list) else a


def prompts_task(path: str) -> Task:
    """A task from a JSONL prompts file (`circuits.tasks.pairs.read_prompt_file`); n rows = the first n of the file
    after a seeded shuffle (all of them when n >= the file's size)."""
    all_rows = read_prompt_file(path)

    def rows(n: int, seed: int) -> list[dict]:
        order = list(range(len(all_rows)))
        random.Random(seed).shuffle(order)
        return [all_rows[i] for i in order[: min(n, len(order))]]

    has_corrupt = "corrupt" in all_rows[0]
    has_wrong = all_rows[0].get("wrong") is not None
    return Task(
        f"prompts:{path}",
        f"prompt rows from {path}",
        _binary_from_rows(rows, f"prompts:{path}"),
        pairs=rows,
        default_metric="logit-diff" if has_wrong else ("kl" if has_corrupt else "prob"),
    )


def _register_real_tasks() -> None:
    from circuits.tasks.real import REAL_TASKS

    for name, (fn, description) in REAL_TASKS.items():
        register_task(Task(name, description, _binary_from_rows(fn, name), pairs=fn))


_register_real_tasks()


def get_task(name: str) -> Task:
    """The task of that name (or `prompts:FILE.jsonl`), or a ValueError naming the valid ones."""
    if name.startswith("prompts:"):
        return prompts_task(name.removeprefix("prompts:"))
    if name not in TASKS:
        near = difflib.get_close_matches(name, list(TASKS), n=2)
        hint = f" Did you mean {' or '.join(near)}?" if near else ""
        raise ValueError(f"unknown task {name!r}.{hint} Valid tasks: {', '.join(TASKS)}, or prompts:FILE.jsonl")
    return TASKS[name]
