"""Scoring rows and evaluation rows that never overlap: the split behind `interp circuits curve` and `features`.

A finder scores its circuit on some prompt rows and the circuit is evaluated on others. Drawing both as two
seeded shuffles of one prompts file put part of the evaluation rows among the scoring rows (20 rows, 10 of
each: 4 to 6 of the 10 evaluation rows were scoring rows), so the curve was partly in-sample. Here:

- a prompts file: one fixed shuffle (seed 10,000) of the file; its first `n_eval` rows are the evaluation rows
  and the rest is the scoring pool, from which each seed draws its `n_score` rows (its own shuffle). A file
  with fewer than `n_eval + n_score` rows is refused, with the counts and the fixes;
- `eval_file` (another prompts file): the evaluation rows are its first `n_eval` rows after the same shuffle
  (all of them when it has fewer), and the scoring pool is the task's rows;
- a generated task (ioi, quotes, ...): evaluation rows from seed 10,000, scoring rows from the seeds 0, 1, ...
  as before.

In every case a scoring row whose prompt is also an evaluation row's prompt is dropped from the scoring side
(a file that repeats a row, or a generator that draws the same prompt twice, cannot put it on both sides);
a generated seed then draws further rows in its place. `DisjointSplit.info` says which split was used and
the row counts; the curve and the feature circuit report it.

    split = disjoint_split(get_task("prompts:pairs.jsonl"), n_score=10, n_eval=10)
    held = split.eval_batch(tokenizer, align=True)
    scores = eap(model, split.task.make_pairs(10, seed, tokenizer), "logit-diff")   # scoring rows only
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from circuits.tasks.binary import Task, _binary_from_rows
from circuits.tasks.pairs import encode_pairs, read_prompt_file

EVAL_SEED = 10_000
"""The seed of the evaluation rows (a generated task's evaluation seed; a prompts file's one fixed shuffle)."""


@dataclass
class DisjointSplit:
    """`task` draws scoring rows only (its `rows`, `make_pairs`, `make`); `eval_rows` are the evaluation rows."""

    task: Task
    eval_rows: list[dict]
    info: dict

    def eval_batch(self, tokenizer, align: bool = True):
        return encode_pairs(tokenizer, self.eval_rows, align=align)


def _prompt(row: dict) -> str:
    return str(row.get("clean", row.get("prompt")))


def _shuffled(rows: list[dict], seed: int) -> list[dict]:
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    return [rows[i] for i in order]


def _file_of(task: Task) -> str | None:
    return task.name.removeprefix("prompts:") if task.name.startswith("prompts:") else None


def disjoint_split(task: Task, n_score: int, n_eval: int, eval_file: str | None = None) -> DisjointSplit:
    """The task's evaluation rows and a task drawing scoring rows disjoint from them (see the module doc)."""
    if n_score < 1 or n_eval < 1:
        raise ValueError(f"scoring and evaluation rows must be >= 1, got {n_score} and {n_eval}")
    path = _file_of(task)
    pool: list[dict] | None = None
    if eval_file is not None:
        file_rows = read_prompt_file(eval_file)
        eval_rows = _shuffled(file_rows, EVAL_SEED)[:n_eval]
        info = {
            "split": f"separate evaluation file {eval_file}",
            "eval_file": eval_file,
            "n_eval_file_rows": len(file_rows),
        }
        pool = None if path is None else read_prompt_file(path)
    elif path is not None:
        pool = _shuffled(read_prompt_file(path), EVAL_SEED)
        if len(pool) < n_eval + n_score:
            raise ValueError(
                f"{path} has {len(pool)} rows: too few for {n_eval} evaluation rows (--n-eval) and {n_score} "
                f"scoring rows (--max-rows) that do not overlap; lower them to sum to at most {len(pool)}, "
                "or give the evaluation rows in another file with --eval-file FILE.jsonl"
            )
        eval_rows, pool = pool[:n_eval], pool[n_eval:]
        info = {"split": f"disjoint split of {path}: evaluation rows first, then scoring rows from the rest"}
    else:
        eval_rows = task.rows(n_eval, EVAL_SEED)
        info = {"split": f"generated rows: evaluation seed {EVAL_SEED}, scoring seeds 0, 1, ..."}
    held = {_prompt(r) for r in eval_rows}
    info.update({"n_eval_rows": len(eval_rows), "n_scoring_rows_per_seed": n_score})
    if pool is not None:  # a prompts file: the scoring pool is fixed
        kept = [r for r in pool if _prompt(r) not in held]
        if not kept:
            raise ValueError(f"every row of {path} is also an evaluation row: no rows are left to score on")
        info.update({"file": path, "n_scoring_pool": len(kept), "dropped_from_scoring": len(pool) - len(kept)})
        info["n_scoring_rows_per_seed"] = min(n_score, len(kept))

        def rows(n: int, seed: int) -> list[dict]:
            return _shuffled(kept, seed)[: min(n, len(kept))]

        scoring = replace(task, pairs=rows, generate=_binary_from_rows(rows, task.name))
    else:
        scoring = replace(task, pairs=_avoiding(task.rows, held, _prompt), generate=_avoiding_prompts(task, held))
    return DisjointSplit(scoring, eval_rows, info)


def _avoiding(draw, held: set[str], key):
    """draw(n, seed) with every item whose key is in `held` replaced by further draws of the same seed."""

    def fn(n: int, seed: int):
        out = draw(n, seed)
        if not any(key(r) in held for r in out):
            return out  # the common case: the rows the seed always gave
        more = [r for r in draw(4 * n + len(held), seed) if key(r) not in held][:n]
        if len(more) < n:
            raise ValueError(f"the task's seed {seed} gives only {len(more)} rows that are not evaluation rows")
        return more

    return fn


def _avoiding_prompts(task: Task, held: set[str]):
    """task.generate(n, seed) -> (prompts, targets, alts), without the evaluation rows' prompts."""

    def as_rows(n: int, seed: int) -> list[tuple]:
        return list(zip(*task.generate(n, seed)))

    draw = _avoiding(as_rows, held, lambda r: r[0])

    def gen(n: int, seed: int):
        rows = draw(n, seed)
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]

    return gen


__all__ = ["EVAL_SEED", "DisjointSplit", "disjoint_split"]
