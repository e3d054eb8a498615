"""Small helpers the contrib experiments share to print their result tables (Markdown) and seed summaries."""

from __future__ import annotations

import math
from collections.abc import Sequence


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """(mean, sample standard deviation; 0 for one value) of a list of numbers."""
    if len(values) == 0:
        raise ValueError("mean_sd needs at least one value")
    m = sum(values) / len(values)
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return m, sd


def fmt(values: Sequence[float] | float, digits: int = 3) -> str:
    """'0.812 ± 0.010' over seeds (or one number)."""
    if isinstance(values, (int, float)):
        return f"{values:.{digits}f}"
    m, sd = mean_sd(values)
    return f"{m:.{digits}f}" if len(values) == 1 else f"{m:.{digits}f} ± {sd:.{digits}f}"


def per_sample(values: Sequence[float] | float, digits: int = 3) -> str:
    """'0.520 / 0.470 / 0.480': each run's value in order (one number as itself)."""
    if isinstance(values, (int, float)):
        return f"{values:.{digits}f}"
    return " / ".join(f"{v:.{digits}f}" for v in values)


def stack_runs(runs: Sequence[dict]) -> dict:
    """One dict of lists from several runs' dicts of the same keys: numbers become the list of the runs' values
    (nested dicts recursively); any other value is kept when every run agrees on it, else listed too."""
    if not runs:
        raise ValueError("stack_runs needs at least one run")
    keys = list(runs[0])
    if any(list(r) != keys for r in runs):
        raise ValueError(f"runs have different keys: {[list(r) for r in runs]}")
    out: dict = {}
    for k in keys:
        vals = [r[k] for r in runs]
        if all(isinstance(v, dict) for v in vals):
            out[k] = stack_runs(vals)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            out[k] = list(vals)
        else:
            out[k] = vals[0] if all(v == vals[0] for v in vals) else list(vals)
    return out


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table; cells are printed with str()."""
    out = ["| " + " | ".join(map(str, headers)) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(out)
