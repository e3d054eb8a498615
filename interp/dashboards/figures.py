"""Plotly figures that show everywhere: JupyterLab, VS Code, nbconvert HTML, GitHub, nbviewer, no extension.

Plotly's default renderer in a kernel emits only its own mime type (`application/vnd.plotly.v1+json`), which
only a frontend with the plotly extension draws: nbconvert's HTML, GitHub and nbviewer show nothing. Here a
figure is shown as one ``text/html`` bundle that holds

- a static SVG of the figure, drawn by this module (no kaleido, no browser): what GitHub, nbviewer and an
  untrusted JupyterLab show, since they strip scripts;
- the interactive figure (plotly.js inline, offline), which hides the static SVG once plotly.js runs.

The bundle also carries ``image/svg+xml`` (the same SVG) and ``text/plain``. plotly.js (4.6 MB) goes into
the first figure a kernel shows and later figures reuse it (``include_plotlyjs=True`` forces a copy); a
figure whose page lacks it keeps its static SVG.

    from interp.dashboards.figures import setup, show
    setup()        # notebooks: plotly's default renderer -> this bundle; progress bars and their warnings off
    show(fig)      # or just `fig` / `fig.show()` once setup() ran

The static SVG draws scatter (lines, markers; linear or log axes), bar and heatmap traces with their title,
axis titles, legend and colour bar; other trace types are named in a note instead of drawn.
"""

from __future__ import annotations

import base64
import html
import itertools
import math
import os
import sys
import warnings
from typing import Any

_COLORWAY = ["#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692", "#B6E880"]
_PLASMA = [(0.0, "#0d0887"), (0.25, "#7e03a8"), (0.5, "#cc4778"), (0.75, "#f89540"), (1.0, "#f0f921")]
_counter = itertools.count()
_plotlyjs_sent = False
RENDERER = "interp"


# ----------------------------------------------------------------------------------------------- helpers
def _arr(v: Any) -> list:
    """A plain (nested) list from a list, a numpy array or plotly's typed-array dict."""
    if v is None:
        return []
    if isinstance(v, dict) and "bdata" in v:
        import numpy as np

        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        if "shape" in v:
            shape = [int(s) for s in str(v["shape"]).split(",")]
            a = a.reshape(shape)
        return a.tolist()
    if hasattr(v, "tolist"):
        return v.tolist()
    return [(_arr(x) if isinstance(x, (list, tuple)) or hasattr(x, "tolist") else x) for x in v]


def _num(x: Any) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _text(v: Any) -> str:
    if isinstance(v, dict):
        v = v.get("text")
    return "" if v is None else str(v)


def _esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _rgb(c: str) -> tuple[float, float, float]:
    c = c.strip()
    if c.startswith("#"):
        c = c[1:]
        if len(c) == 3:
            c = "".join(ch * 2 for ch in c)
        return tuple(int(c[i : i + 2], 16) for i in (0, 2, 4))  # type: ignore[return-value]
    if c.startswith("rgb"):
        parts = c[c.index("(") + 1 : c.index(")")].split(",")
        return tuple(float(p) for p in parts[:3])  # type: ignore[return-value]
    return (128, 128, 128)


def _scale(cs: Any) -> list[tuple[float, tuple[float, float, float]]]:
    if isinstance(cs, str):
        try:
            import plotly.colors

            cs = plotly.colors.get_colorscale(cs)
        except Exception:
            cs = None
    if not cs:
        cs = _PLASMA
    return [(float(p), _rgb(c)) for p, c in cs]


def _color_at(scale: list, t: float) -> str:
    t = min(max(t, 0.0), 1.0)
    for (p0, c0), (p1, c1) in zip(scale, scale[1:]):
        if t <= p1:
            f = 0.0 if p1 == p0 else (t - p0) / (p1 - p0)
            r, g, b = (c0[i] + f * (c1[i] - c0[i]) for i in range(3))
            return f"rgb({r:.0f},{g:.0f},{b:.0f})"
    r, g, b = scale[-1][1]
    return f"rgb({r:.0f},{g:.0f},{b:.0f})"


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    out, v = [], first
    while v <= hi + 1e-9 * step:
        out.append(round(v, 12))
        v += step
    return out


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.0e}"
    return f"{v:.4g}"


class _Axis:
    """Maps data to pixels for one axis: numeric (linear or log) or categorical."""

    def __init__(self, spec: dict, values: list, p0: float, p1: float, reverse: bool = False):
        self.log = spec.get("type") == "log"
        self.cats: list[str] | None = None
        nums = [_num(v) for v in values]
        if spec.get("type") == "category" or any(n is None for n in nums):
            self.cats = list(dict.fromkeys(str(v) for v in values))
        if self.cats is None:
            good = [n for n in nums if n is not None and (n > 0 or not self.log)]
            if self.log:
                good = [math.log10(n) for n in good]
            lo, hi = (min(good), max(good)) if good else (0.0, 1.0)
            rng = spec.get("range")
            if rng and all(_num(r) is not None for r in rng):
                lo, hi = float(rng[0]), float(rng[1])  # plotly gives log ranges in log10 units
            elif hi == lo:
                lo, hi = lo - 1, hi + 1
            elif not self.log:
                pad = 0.05 * (hi - lo)
                lo, hi = lo - pad, hi + pad
            self.lo, self.hi = lo, hi
        else:
            self.lo, self.hi = -0.5, len(self.cats) - 0.5
        self.p0, self.p1 = (p1, p0) if reverse else (p0, p1)

    def __call__(self, v: Any) -> float | None:
        if self.cats is not None:
            s = str(v)
            if s not in self.cats:
                return None
            t = self.cats.index(s)
        else:
            t = _num(v)
            if t is None or (self.log and t <= 0):
                return None
            if self.log:
                t = math.log10(t)
        return self.p0 + (t - self.lo) / ((self.hi - self.lo) or 1.0) * (self.p1 - self.p0)

    def ticks(self) -> list[tuple[float, str]]:
        if self.cats is not None:
            every = max(1, math.ceil(len(self.cats) / 12))
            return [(self(c), c) for c in self.cats[::every]]  # type: ignore[misc]
        if self.log:
            out = [(10.0**e, _fmt(10.0**e)) for e in range(math.ceil(self.lo), math.floor(self.hi) + 1)]
        else:
            out = [(t, _fmt(t)) for t in _ticks(self.lo, self.hi)]
        return [(self(v), s) for v, s in out if self(v) is not None]  # type: ignore[misc]


# ------------------------------------------------------------------------------------------- static SVG
def figure_svg(fig: Any) -> str:
    """A static SVG of a plotly figure (a `go.Figure` or its dict), drawn here: no kaleido, no browser."""
    d = fig if isinstance(fig, dict) else fig.to_dict()
    layout = d.get("layout", {}) or {}
    traces = [t for t in d.get("data", []) if t.get("visible", True) not in (False, "legendonly")]
    width = int(layout.get("width") or 760)
    height = int(layout.get("height") or 450)
    title = _text(layout.get("title"))
    xa, ya = layout.get("xaxis", {}) or {}, layout.get("yaxis", {}) or {}
    heat = [t for t in traces if t.get("type") == "heatmap"]
    lines = [t for t in traces if t.get("type", "scatter") in ("scatter", "scattergl", "bar")]
    other = sorted({t.get("type", "?") for t in traces} - {"heatmap", "scatter", "scattergl", "bar"})
    named = [t for t in lines if t.get("name") and t.get("showlegend", True) is not False]
    legend_w = 190 if named else 0
    cbar_w = 70 if heat else 0
    ml, mr, mt, mb = 64, 16 + legend_w + cbar_w, 40 if title else 14, 48
    pw, ph = max(width - ml - mr, 60), max(height - mt - mb, 60)
    xs: list = []
    ys: list = []
    for t in heat:
        z = _arr(t.get("z"))
        xs += _arr(t.get("x")) or list(range(len(z[0]) if z else 0))
        ys += _arr(t.get("y")) or list(range(len(z)))
    for t in lines:
        yv = _arr(t.get("y"))
        xs += _arr(t.get("x")) or list(range(len(yv)))
        ys += yv
        if t.get("type") == "bar" and ya.get("type") != "log":
            ys.append(0)
    if heat:  # cells fill the plot: categorical-like axes over the cell indices
        xa = {**xa, "type": xa.get("type") or "category"}
        ya = {**ya, "type": ya.get("type") or "category"}
    reverse_y = ya.get("autorange") == "reversed"
    X = _Axis(xa, xs, ml, ml + pw)
    Y = _Axis(ya, ys, mt + ph, mt, reverse=reverse_y)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'style="max-width:100%;height:auto;background:#fff;font-family:sans-serif" role="img">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
    ]
    if title:
        out.append(f'<text x="{ml}" y="24" font-size="16" fill="#222">{_esc(title)}</text>')
    for px_, label in X.ticks():
        out.append(f'<line x1="{px_:.1f}" x2="{px_:.1f}" y1="{mt}" y2="{mt + ph}" stroke="#eee"/>')
        out.append(
            f'<text x="{px_:.1f}" y="{mt + ph + 16}" font-size="11" fill="#444" text-anchor="middle">'
            f"{_esc(label[:14])}</text>"
        )
    for py_, label in Y.ticks():
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{py_:.1f}" y2="{py_:.1f}" stroke="#eee"/>')
        out.append(
            f'<text x="{ml - 6}" y="{py_ + 4:.1f}" font-size="11" fill="#444" text-anchor="end">'
            f"{_esc(label[:10])}</text>"
        )
    for t in heat:
        out += _heatmap(t, layout, X, Y, ml + pw + legend_w + 14, mt, ph)
    for i, t in enumerate(lines):
        out += _trace(t, i, X, Y, mt + ph)
    out.append(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#bbb"/>')
    xt, yt = _text(xa.get("title")), _text(ya.get("title"))
    if xt:
        out.append(
            f'<text x="{ml + pw / 2:.0f}" y="{height - 10}" font-size="13" text-anchor="middle" fill="#222">'
            f"{_esc(xt)}</text>"
        )
    if yt:
        out.append(
            f'<text transform="translate(16,{mt + ph / 2:.0f}) rotate(-90)" font-size="13" text-anchor="middle" '
            f'fill="#222">{_esc(yt)}</text>'
        )
    for j, t in enumerate(named):
        c = _trace_color(t, lines.index(t))
        y0 = mt + 10 + 18 * j
        x0 = ml + pw + 12
        out.append(f'<rect x="{x0}" y="{y0 - 8}" width="14" height="10" fill="{c}"/>')
        out.append(f'<text x="{x0 + 20}" y="{y0 + 1}" font-size="11" fill="#222">{_esc(str(t["name"])[:28])}</text>')
    if other:
        out.append(
            f'<text x="{ml + 6}" y="{mt + 16}" font-size="12" fill="#a00">static preview: {_esc(", ".join(other))} '
            "not drawn</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _trace_color(t: dict, i: int) -> str:
    m = t.get("marker") or {}
    c = m.get("color") if isinstance(m.get("color"), str) else None
    return c or (t.get("line") or {}).get("color") or _COLORWAY[i % len(_COLORWAY)]


def _trace(t: dict, i: int, X: _Axis, Y: _Axis, base_y: float) -> list[str]:
    yv = _arr(t.get("y"))
    xv = _arr(t.get("x")) or list(range(len(yv)))
    color = _esc(_trace_color(t, i))
    pts = [(X(x), Y(y)) for x, y in zip(xv, yv)]
    out = []
    if t.get("type") == "bar":
        bw = max(2.0, 0.7 * abs((X.p1 - X.p0) / max(len(xv), 1)))
        y0 = Y(0) if Y(0) is not None else base_y
        for px_, py_ in pts:
            if px_ is not None and py_ is not None:
                out.append(
                    f'<rect x="{px_ - bw / 2:.1f}" y="{min(py_, y0):.1f}" width="{bw:.1f}" '
                    f'height="{abs(y0 - py_):.1f}" fill="{color}"/>'
                )
        return out
    mode = t.get("mode") or ("lines+markers" if len(yv) < 20 else "lines")
    if "lines" in mode:
        seg: list[str] = []
        for px_, py_ in pts + [(None, None)]:
            if px_ is None or py_ is None:
                if len(seg) > 1:
                    out.append(f'<polyline points="{" ".join(seg)}" fill="none" stroke="{color}" stroke-width="2"/>')
                seg = []
            else:
                seg.append(f"{px_:.1f},{py_:.1f}")
    if "markers" in mode:
        out += [
            f'<circle cx="{px_:.1f}" cy="{py_:.1f}" r="3.5" fill="{color}"/>'
            for px_, py_ in pts
            if px_ is not None and py_ is not None
        ]
    return out


def _heatmap(t: dict, layout: dict, X: _Axis, Y: _Axis, cb_x: float, mt: float, ph: float) -> list[str]:
    z = _arr(t.get("z"))
    if not z or not isinstance(z[0], list):
        return []
    xv = _arr(t.get("x")) or list(range(len(z[0])))
    yv = _arr(t.get("y")) or list(range(len(z)))
    ca = (layout.get(t.get("coloraxis") or "", {}) or {}) if t.get("coloraxis") else {}
    cs = t.get("colorscale") or ca.get("colorscale")
    if not cs:
        cs = ((layout.get("colorscale") or {}).get("sequential")) or (
            ((layout.get("template") or {}).get("layout") or {}).get("colorscale") or {}
        ).get("sequential")
    scale = _scale(cs)
    vals = [v for row in z for v in (_num(x) for x in row) if v is not None]
    lo = _num(t.get("zmin", ca.get("cmin"))) or (min(vals) if vals else 0.0)
    hi = _num(t.get("zmax", ca.get("cmax"))) or (max(vals) if vals else 1.0)
    mid = _num(t.get("zmid", ca.get("cmid")))
    if mid is not None:
        half = max(abs(hi - mid), abs(mid - lo)) or 1.0
        lo, hi = mid - half, mid + half
    span = (hi - lo) or 1.0
    cw = abs(X.p1 - X.p0) / max(len(xv), 1)
    chh = abs(Y.p1 - Y.p0) / max(len(yv), 1)
    out = []
    for r, row in enumerate(z):
        for c, v in enumerate(row):
            f = _num(v)
            px_, py_ = X(xv[c] if c < len(xv) else c), Y(yv[r] if r < len(yv) else r)
            if f is None or px_ is None or py_ is None:
                continue
            out.append(
                f'<rect x="{px_ - cw / 2:.2f}" y="{py_ - chh / 2:.2f}" width="{cw + 0.3:.2f}" height="{chh + 0.3:.2f}" '
                f'fill="{_color_at(scale, (f - lo) / span)}"><title>{_esc(xv[c] if c < len(xv) else c)}, '
                f"{_esc(yv[r] if r < len(yv) else r)}: {f:.4g}</title></rect>"
            )
    n = 40
    for k in range(n):
        y0 = mt + ph - (k + 1) * ph / n
        out.append(
            f'<rect x="{cb_x:.0f}" y="{y0:.2f}" width="14" height="{ph / n + 0.3:.2f}" '
            f'fill="{_color_at(scale, (k + 0.5) / n)}"/>'
        )
    for v in _ticks(lo, hi, 4):
        y = mt + ph - (v - lo) / span * ph
        out.append(f'<text x="{cb_x + 18:.0f}" y="{y + 4:.1f}" font-size="10" fill="#444">{_fmt(v)}</text>')
    cbt = _text((ca.get("colorbar") or t.get("colorbar") or {}).get("title"))
    if cbt:
        out.append(f'<text x="{cb_x:.0f}" y="{mt - 4}" font-size="11" fill="#222">{_esc(cbt[:12])}</text>')
    return out


# ------------------------------------------------------------------------------------------ the bundle
def figure_html(fig: Any, *, include_plotlyjs: bool = True, static: bool = True) -> str:
    """The HTML fragment: static SVG first, then the live figure, which hides the SVG once plotly.js runs."""
    import plotly.io as pio

    n = next(_counter)
    div = f"interp-fig-{os.getpid()}-{n}"
    d = fig if isinstance(fig, dict) else fig.to_dict()
    height = (d.get("layout") or {}).get("height") or 450
    live = pio.to_html(
        d,
        include_plotlyjs=False,
        full_html=False,
        div_id=div,
        validate=False,
        default_height=height,
        default_width="100%",
    )
    js = ""
    if include_plotlyjs:
        from plotly.offline import get_plotlyjs

        # With require.js on the page (classic notebook), plotly.js would register as an AMD module only.
        js = (
            "<script>window.__interp_define=window.define;window.define=undefined;</script>"
            f"<script>{get_plotlyjs()}</script>"
            "<script>window.define=window.__interp_define;</script>"
        )
    svg = f'<div id="{div}-static" class="interp-fig-static">{figure_svg(d)}</div>' if static else ""
    hide = (
        f'<script>if(window.Plotly){{var s=document.getElementById("{div}-static");if(s)s.style.display="none";}}'
        "</script>"
    )
    return f'<div class="interp-fig">{svg}{js}{live}{hide}</div>'


def mimebundle(fig: Any, *, include_plotlyjs: bool | None = None) -> dict[str, str]:
    """``text/html`` (static SVG + live figure), ``image/svg+xml`` and ``text/plain`` for one figure."""
    global _plotlyjs_sent
    if include_plotlyjs is None:
        include_plotlyjs = not _plotlyjs_sent
    d = fig if isinstance(fig, dict) else fig.to_dict()
    bundle = {"text/html": figure_html(d, include_plotlyjs=include_plotlyjs), "image/svg+xml": figure_svg(d)}
    _plotlyjs_sent = _plotlyjs_sent or include_plotlyjs
    title = _text((d.get("layout") or {}).get("title"))
    bundle["text/plain"] = f"<plotly figure{': ' + title if title else ''}>"
    return bundle


def show(fig: Any, *, include_plotlyjs: bool | None = None) -> None:
    """Display a plotly figure so that every notebook frontend and exporter draws it (see the module doc)."""
    from IPython.display import display

    display(mimebundle(fig, include_plotlyjs=include_plotlyjs), raw=True)


def _register_renderer() -> None:
    import plotly.io as pio
    from plotly.io._base_renderers import MimetypeRenderer

    class InterpRenderer(MimetypeRenderer):
        """plotly renderer: the bundle of `mimebundle` (static SVG + inline plotly.js)."""

        def to_mimebundle(self, fig_dict):
            return mimebundle(fig_dict)

    pio.renderers[RENDERER] = InterpRenderer()
    pio.renderers.default = RENDERER


def quiet_progress() -> None:
    """No red stderr box in a notebook: tqdm's "IProgress not found" warning and the HF progress bars off.

    Call before the first model load: huggingface_hub reads ``HF_HUB_DISABLE_PROGRESS_BARS`` at import;
    if transformers is already imported its bars are switched off directly.
    """
    warnings.filterwarnings("ignore", message="IProgress not found")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        try:
            from transformers.utils import logging as tlog

            tlog.disable_progress_bar()
        except Exception:  # an old or partial transformers: nothing to switch off
            pass
    if "huggingface_hub" in sys.modules:
        try:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        except Exception:
            pass


def setup(renderer: bool = True, quiet: bool = True) -> None:
    """For notebooks: plotly figures shown through `mimebundle` (`fig`, `fig.show()`), progress quiet."""
    if quiet:
        quiet_progress()
    if renderer:
        _register_renderer()
