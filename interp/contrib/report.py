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


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table; cells are printed with str()."""
    out = ["| " + " | ".join(map(str, headers)) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(out)
