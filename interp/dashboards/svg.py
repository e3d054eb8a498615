"""Small inline SVG charts (bars with hover values, a sparkline), drawn on the server side.

Inline SVG instead of a plotting library: a page of 4,000 features stays a few kB each, needs no script
to show its charts (so it also renders inside Jupyter's output cells and when printed), and scales to
the width of its column (`viewBox` + `width: 100%`), so nothing is clipped at any window width.
Every label goes through `html.escape`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _fmt_count(x: float) -> str:
    """A y-axis count: whole numbers in full up to 99,999 (no `4.18e+03`), else 3 significant digits."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e5 else _fmt(x)


_CHAR_W = 6.2
"""Width of one character of the 10px axis font (digits are ~5.6px in the sans-serif fonts tried)."""


def bars(
    edges: Sequence[float],
    counts: Sequence[float],
    *,
    title: str = "",
    xlabel: str = "",
    color: str = "#e67e22",
    log_y: bool = False,
    height: int = 150,
    width: int = 480,
    highlight_zero: bool = False,
    ylabel: str = "",
) -> str:
    """A histogram: `counts[i]` over [edges[i], edges[i+1]]; hover shows the range and the count."""
    import math

    n = len(counts)
    if n == 0 or len(edges) != n + 1:
        return '<p class="none">no data</p>'
    ytick = _fmt_count(max(float(c) for c in counts))
    # left margin: the rotated y label (x 0-12) plus the right-aligned top tick, so neither is clipped
    ml, mb, mt = max(50, round(18 + _CHAR_W * len(ytick))), 30, 18 if title else 6
    pw, ph = width - ml - 6, height - mb - mt
    tr = (lambda c: math.log10(1 + c)) if log_y else (lambda c: c)
    top = max(tr(float(c)) for c in counts) or 1.0
    lo, hi = float(edges[0]), float(edges[-1])
    span = (hi - lo) or 1.0
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet" role="img">']
    if title:
        parts.append(f'<text x="{ml}" y="12" class="ct">{html.escape(title)}</text>')
    for i, c in enumerate(counts):
        x0 = ml + (float(edges[i]) - lo) / span * pw
        x1 = ml + (float(edges[i + 1]) - lo) / span * pw
        h = tr(float(c)) / top * ph
        count = int(c) if float(c).is_integer() else _fmt(float(c))
        tip = f"{_fmt(float(edges[i]))} to {_fmt(float(edges[i + 1]))}: {count}"
        parts.append(
            f'<rect x="{x0:.2f}" y="{mt + ph - h:.2f}" width="{max(x1 - x0 - 0.5, 0.5):.2f}" height="{h:.2f}" '
            f'fill="{color}"><title>{html.escape(tip)}</title></rect>'
        )
    if highlight_zero and lo < 0 < hi:
        xz = ml + (0 - lo) / span * pw
        parts.append(f'<line x1="{xz:.1f}" x2="{xz:.1f}" y1="{mt}" y2="{mt + ph}" stroke="#999" stroke-dasharray="2"/>')
    yl = ylabel or ("count (log scale)" if log_y else "count")
    parts += [
        f'<line x1="{ml}" x2="{ml + pw}" y1="{mt + ph}" y2="{mt + ph}" stroke="#888"/>',
        f'<text x="{ml}" y="{mt + ph + 12}" class="ax">{html.escape(_fmt(lo))}</text>',
        f'<text x="{ml + pw}" y="{mt + ph + 12}" class="ax" text-anchor="end">{html.escape(_fmt(hi))}</text>',
        f'<text x="{ml + pw / 2}" y="{mt + ph + 25}" class="ax" text-anchor="middle">{html.escape(xlabel)}</text>',
        f'<text x="{ml - 4}" y="{mt + 8}" class="ax" text-anchor="end">{html.escape(ytick)}</text>',
        f'<text x="10" y="{mt + ph / 2}" class="ax" text-anchor="middle" '
        f'transform="rotate(-90 10 {mt + ph / 2})">{html.escape(yl)}</text>',
        "</svg>",
    ]
    return "".join(parts)


def columns(
    values: Sequence[float],
    *,
    title: str = "",
    xlabel: str = "",
    color: str = "#2980b9",
    height: int = 130,
    width: int = 480,
    labels: Sequence[str] | None = None,
    ylabel: str = "",
) -> str:
    """One bar per category (e.g. per position), with hover labels."""
    n = len(values)
    if n == 0:
        return '<p class="none">no data</p>'
    edges = list(range(n + 1))
    svg = bars(edges, values, title=title, xlabel=xlabel, color=color, height=height, width=width, ylabel=ylabel)
    if labels is not None:  # replace the numeric tooltips with the given labels
        import re

        tips = iter(labels)
        svg = re.sub(r"<title>[^<]*</title>", lambda _m: f"<title>{html.escape(next(tips, ''))}</title>", svg)
    return svg
