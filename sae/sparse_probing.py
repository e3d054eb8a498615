"""SAEBench's sparse-probing protocol on token-level tasks made from a store's own rows (ours, labelled so).

SAEBench's sparse probing (Karvonen et al., 2025; `evals/sparse_probing`) downloads eight text-classification
sets. This machine has none, so the tasks here are built from what an activation store holds: each row's own
token, classified by its text (`TASKS`: digits / lowercase / capitalised words / punctuation, Python keyword
or not, leading space or not). The protocol is SAEBench's, step for step (its `probe_training`): per class a
balanced one-vs-rest set (all positives; as many negatives, drawn evenly from the other classes with
`torch.randperm`), the k latents (or model channels) with the largest |mean_pos - mean_neg| on the train
set, an L2 logistic regression on them (C = 1), test accuracy; k in (1, 2, 5), and a probe on every model
channel as the ceiling. `sae.experiments.saebench_sparse_probing` runs SAEBench's own functions on the same
rows and sets beside this module.

A row is one token, so SAEBench's mean over a text's tokens is the row itself.
"""

from __future__ import annotations

import keyword
import string
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from sae import metrics as M

_PUNCT = set(string.punctuation)


def _word(t: str) -> str:
    return t[1:] if t.startswith(" ") else t


TASKS: dict[str, dict[str, Callable[[str], bool]]] = {
    "token_kind": {
        "digits": lambda t: _word(t).isdigit(),
        "lowercase_word": lambda t: _word(t).isalpha() and _word(t).islower(),
        "capitalized_word": lambda t: _word(t).isalpha() and _word(t).istitle(),
        "punctuation": lambda t: bool(_word(t)) and set(_word(t)) <= _PUNCT,
    },
    "python_keyword": {
        "keyword": lambda t: _word(t) in keyword.kwlist,
        "other_word": lambda t: _word(t).isalpha() and _word(t) not in keyword.kwlist,
    },
    "leading_space": {
        "space_word": lambda t: t.startswith(" ") and t[1:].isalpha(),
        "bare_word": lambda t: t.isalpha(),
    },
}
"""Task -> class -> predicate on a token's text (a token in no class of a task is left out of it)."""

K_VALUES = (1, 2, 5)
"""SAEBench's default `k_values`."""


def token_classes(tokens: Tensor, decode: Callable[[int], str]) -> dict[str, dict[str, Tensor]]:
    """Row indices of each class of each task (a row's class comes from its own token's text)."""
    ids = torch.unique(tokens)
    text = {int(t): decode(int(t)) for t in ids}
    out: dict[str, dict[str, Tensor]] = {}
    for task, classes in TASKS.items():
        out[task] = {}
        for name, pred in classes.items():
            hit = torch.tensor([pred(text[int(t)]) for t in ids], dtype=torch.bool)
            out[task][name] = torch.nonzero(torch.isin(tokens, ids[hit])).flatten()
    return out


def split_sizes(n: int, n_train: int, n_test: int) -> tuple[int, int]:
    """(train, test) sizes `split_rows` gives a class of `n` rows."""
    n_te = min(n_test, n // 5)
    return min(n_train, n - n_te), n_te


def split_rows(rows: Tensor, n_train: int, n_test: int, g: torch.Generator) -> tuple[Tensor, Tensor]:
    """A seeded split of `rows` into at most `n_train` and `n_test` (the test set first gets its share of a
    short class: 20%, as SAEBench's 4,000 / 1,000)."""
    perm = rows[torch.randperm(len(rows), generator=g)]
    n_tr, n_te = split_sizes(len(perm), n_train, n_test)
    return perm[n_te : n_te + n_tr], perm[:n_te]


def unbalanced(sizes: dict[str, int]) -> tuple[str, int, int] | None:
    """(class, its rows, the other classes' rows `one_vs_rest` can draw) for the first class whose one-vs-rest set
    cannot be balanced, or None: a class takes at most its share, ceil(n / (classes - 1)), from each other one."""
    for cls, n in sizes.items():
        others = [k for k in sizes if k != cls]
        per = -(-n // len(others))
        have = sum(min(sizes[k], per) for k in others)
        if have < n:
            return cls, n, have
    return None


def one_vs_rest(acts: dict[str, Tensor], cls: str) -> tuple[Tensor, Tensor]:
    """SAEBench's `prepare_probe_data`: every row of `cls` (label 1) and as many of the others (label 0),
    drawn evenly from each other class, shuffled; the same `torch.randperm` calls on the global generator,
    so with the same seed the same sets as SAEBench's."""
    pos = acts[cls]
    others = [k for k in acts if k != cls]
    per = -(-len(pos) // len(others))
    neg = torch.cat([acts[k][torch.randperm(len(acts[k]))[:per]] for k in others])
    neg = neg[torch.randperm(len(neg))[: len(pos)]]
    if len(neg) != len(pos):
        raise ValueError(f"class {cls!r}: {len(pos)} rows but only {len(neg)} rows of the other classes")
    x = torch.cat([pos, neg])
    y = torch.zeros(len(x), dtype=torch.int)
    y[: len(pos)] = 1
    order = torch.randperm(len(x))
    return x[order], y[order]


def top_k_mean_diff(x: Tensor, y: Tensor, k: int) -> Tensor:
    """The k columns with the largest |mean over label 1 - mean over label 0| (SAEBench's selection)."""
    diff = (x[y == 1].mean(0) - x[y == 0].mean(0)).abs()
    return torch.argsort(diff, descending=True)[:k]


def probe_accuracy(
    train: dict[str, Tensor], test: dict[str, Tensor], k: int | None, chosen: dict[str, Tensor] | None = None
) -> dict[str, float]:
    """Test accuracy per class of a logistic probe on the top-k columns (all columns when k is None);
    `chosen` (a dict) receives each class's columns."""
    out = {}
    for cls in train:
        xtr, ytr = one_vs_rest(train, cls)
        xte, yte = one_vs_rest(test, cls)
        cols = top_k_mean_diff(xtr.float(), ytr, k) if k is not None else torch.arange(xtr.shape[1])
        if chosen is not None:
            chosen[cls] = cols
        w, b = M.logistic_regression(xtr[:, cols].float(), ytr)
        pred = (xte[:, cols].double() @ w + b) > 0
        out[cls] = float((pred == yte.bool()).float().mean())
    return out


def sparse_probing(
    x_train: dict[str, Tensor],
    x_test: dict[str, Tensor],
    encode: Callable[[Tensor], Tensor],
    ks: tuple[int, ...] = K_VALUES,
    seed: int = 42,
) -> dict[str, Any]:
    """One task: model-channel probes (every channel, and top-k) and SAE-latent top-k probes, per class and
    averaged, SAEBench's keys (`llm_test_accuracy`, `llm_top_k_test_accuracy`, `sae_top_k_test_accuracy`).
    The global torch generator is seeded before each probe family, as the referee does for SAEBench's."""
    with torch.no_grad():
        z_train = {c: encode(v).float() for c, v in x_train.items()}
        z_test = {c: encode(v).float() for c, v in x_test.items()}
    per: dict[str, dict[str, float]] = {}
    picks: dict[int, dict[str, Tensor]] = {}
    runs = [("llm_test_accuracy", x_train, x_test, None)]
    runs += [(f"llm_top_{k}_test_accuracy", x_train, x_test, k) for k in ks]
    runs += [(f"sae_top_{k}_test_accuracy", z_train, z_test, k) for k in ks]
    for key, tr, te, k in runs:
        torch.manual_seed(seed)
        per[key] = probe_accuracy(tr, te, k, picks.setdefault(k, {}) if key.startswith("sae_") else None)
    return {
        "mean": {key: sum(v.values()) / len(v) for key, v in per.items()},
        "per_class": per,
        "rows": {c: [len(x_train[c]), len(x_test[c])] for c in x_train},
        "selection": selection_firing(z_train, {k: v for k, v in picks.items() if k is not None}),
    }


def selection_firing(z_train: dict[str, Tensor], picks: dict[int, dict[str, Tensor]]) -> dict[str, float]:
    """How much the mean-difference selection favours frequent latents: the firing fraction (over the task's
    training rows) of the latents it chose, per k, beside that of the average latent that fires at all.
    A latent firing on a third of the tokens has a large |mean difference| on any balanced set by its
    frequency alone, whatever it encodes; a ratio far above 1 says the probe reads such latents."""
    freq = (torch.cat(list(z_train.values())) > 0).float().mean(0)
    live = freq[freq > 0]
    base = float(live.mean()) if len(live) else 0.0
    out: dict[str, float] = {"firing_live_latent_mean": base}
    for k, by_class in sorted(picks.items()):
        chosen = torch.cat([c for c in by_class.values()]) if by_class else torch.zeros(0, dtype=torch.long)
        f = float(freq[chosen].mean()) if len(chosen) else 0.0
        out[f"firing_chosen_top_{k}"] = f
        out[f"firing_ratio_top_{k}"] = f / base if base else float("nan")
    return out


def _kept(classes: dict[str, Any], size: Callable[[Any], int], min_rows: int) -> dict[str, Any]:
    """The classes of a task that are scored: those with `min_rows` rows, when at least two have them."""
    keep = {c: r for c, r in classes.items() if size(r) >= min_rows}
    return keep if len(keep) >= 2 else {}


def task_problem(counts: dict[str, dict[str, int]], n_train: int, n_test: int, min_rows: int) -> str | None:
    """Why the tasks with these class sizes (task -> class -> rows) cannot be probed, or None."""
    for task, classes in counts.items():
        keep = _kept(classes, int, min_rows)
        for side, i in (("training", 0), ("test", 1)):
            bad = unbalanced({c: split_sizes(n, n_train, n_test)[i] for c, n in keep.items()}) if keep else None
            if bad:
                cls, n, have = bad
                return f"task {task}: class {cls!r} has {n} {side} rows but the other classes only {have}"
    return None


def rows_needed(counts: dict[str, dict[str, int]], n_rows: int, n_train: int, n_test: int, min_rows: int) -> int | None:
    """About how many rows of the same text make the tasks probeable (every class grown in proportion), or None
    beyond a million times `n_rows`. Once the largest class reaches `n_train`, the others catch up with it."""
    for step in range(1, 81):
        scale = 2 ** (step / 4)
        grown = {t: {c: int(n * scale) for c, n in cl.items()} for t, cl in counts.items()}
        if task_problem(grown, n_train, n_test, min_rows) is None:
            need = n_rows * scale
            unit = 10 ** max(0, len(str(int(need))) - 2)
            return int(-(-need // unit) * unit)  # rounded up to two significant digits
    return None


def store_tasks_problem(
    store: Any,
    decode: Callable[[int], str],
    n_train: int = 4000,
    n_test: int = 1000,
    min_rows: int = 50,
    rows: Tensor | None = None,
) -> str | None:
    """Why `store_tasks` would fail on this store, read from its token ids alone (no activation is read), with
    about how many tokens it needs; None when it would not. It fails when a class has more rows than the
    other classes can match in SAEBench's balanced one-vs-rest sets."""
    idx = torch.arange(len(store)) if rows is None else rows
    tokens = store.get_rows(idx, hooks=[])["tokens"].long()
    counts = {t: {c: len(r) for c, r in cl.items()} for t, cl in token_classes(tokens, decode).items()}
    problem = task_problem(counts, n_train, n_test, min_rows)
    if problem is None:
        return None
    need = rows_needed(counts, len(idx), n_train, n_test, min_rows)
    needs = f"it needs a store of about {need:,} tokens of such text" if need else "a larger store may not help"
    return (
        f"the store {store.path} has {len(idx):,} tokens, too few for the sparse-probing tasks ({problem}, "
        f"and SAEBench's one-vs-rest sets are balanced): {needs}"
    )


def store_tasks(
    store: Any,
    hook: str,
    decode: Callable[[int], str],
    n_train: int = 4000,
    n_test: int = 1000,
    min_rows: int = 50,
    seed: int = 0,
    rows: Tensor | None = None,
) -> dict[str, tuple[dict[str, Tensor], dict[str, Tensor]]]:
    """Each task's (train, test) activations per class from the store's rows (`rows`: global indices to use,
    default all); classes with fewer than `min_rows` rows are left out, tasks with fewer than two classes too.
    `store_tasks_problem` says up front whether the sets can be balanced."""
    idx = torch.arange(len(store)) if rows is None else rows
    tokens = store.get_rows(idx, hooks=[])["tokens"].long()
    g = torch.Generator().manual_seed(seed)
    out = {}
    for task, classes in token_classes(tokens, decode).items():
        keep = _kept(classes, len, min_rows)
        if not keep:
            continue
        tr, te = {}, {}
        for c, r in keep.items():
            a, b = split_rows(idx[r], n_train, n_test, g)
            tr[c] = store.get_rows(a, hooks=[hook])[hook].float()
            te[c] = store.get_rows(b, hooks=[hook])[hook].float()
        out[task] = (tr, te)
    return out
