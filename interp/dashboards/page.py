"""One feature's page, rendered from its record (`interp.dashboards.features`): HTML with inline SVG charts.

The page works as a file (`features/123.html`, links to neighbours and back to the index), inside
Jupyter (`FeaturePage._repr_html_`: the same fragment with scoped CSS, no script) and printed. It is at
most as wide as its window: two columns that shrink, context lines that wrap, charts that scale.

Escaping: every string from the model, the data or the user goes through `html.escape` (text and
attributes); nothing is inserted as markup, so a token `<img src=x onerror=alert(1)>` shows as text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

from interp.dashboards import svg

CSS = """
.idash { font-family: system-ui, -apple-system, sans-serif; color: #222; font-size: 14px; max-width: 100%; }
.idash h2 { margin: 0.2em 0; font-size: 1.35em; } .idash h3 { margin: 1em 0 0.3em; font-size: 1.05em; }
.idash h4 { margin: 0.6em 0 0.2em; font-size: 0.92em; color: #555; font-weight: 600; }
.idash .grid { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 1.5em; }
@media (max-width: 900px) { .idash .grid { grid-template-columns: minmax(0, 1fr); } }
.idash .ctx { font-family: ui-monospace, Menlo, monospace; font-size: 12.5px; margin: 2px 0; padding: 1px 0;
  white-space: pre-wrap; overflow-wrap: anywhere; border-bottom: 1px solid #f2f2f2; }
.idash .val { display: inline-block; min-width: 4.2em; color: #777; font-size: 11px; }
.idash .t { border-radius: 2px; } .idash .hit { outline: 1.5px solid #c0392b; font-weight: 600; }
.idash .esc { color: #8e44ad; background: #f3e8f8; border-radius: 2px; font-size: 0.9em; padding: 0 1px; }
.idash table { border-collapse: collapse; font-size: 12.5px; } .idash td, .idash th { padding: 1px 8px 1px 0; text-align: left; }
.idash th { color: #555; font-weight: 600; border-bottom: 1px solid #ddd; } .idash td.num { text-align: right; font-variant-numeric: tabular-nums; }
.idash .stats { color: #444; margin: 0.2em 0 0.6em; line-height: 1.5; } .idash .muted { color: #888; font-size: 12px; }
.idash .badge { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 12px; color: #fff; vertical-align: middle; }
.idash .b-dead { background: #7f8c8d; } .idash .b-rare { background: #16a085; } .idash .b-sparse { background: #27ae60; }
.idash .b-common { background: #2980b9; } .idash .b-dense { background: #c0392b; }
.idash svg.chart { width: 100%; height: auto; max-width: 560px; display: block; margin-top: 0.9em; }
.idash svg .ct { font-size: 12px; font-weight: 600; fill: #333; } .idash svg .ax { font-size: 10px; fill: #666; }
.idash .none { color: #999; font-style: italic; }
.idash .dup { color: #fff; background: #888; border-radius: 7px; font-size: 10.5px; padding: 0 5px; margin-left: 6px; }
"""

_ESC = re.compile(r"(\\n|\\t|\\r|\\x[0-9a-f]{2}|\\u[0-9a-f]{4}|<0x[0-9A-F]{2}>|·|∅)")


def esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def token_html(tid: int, tokens: dict[str, list[str]], extra_title: str = "", cls: str = "t", style: str = "") -> str:
    """One token as a span: unambiguous text (escapes highlighted when the token really is whitespace,
    a control character or a byte), the id and the tokenizer's piece on hover."""
    shown, text, title = tokens.get(str(tid), [f"[{tid}]", f"[{tid}]", f"id {tid}"])
    body = esc(shown)
    if shown != text:  # the display differs from the raw text: mark the escapes as such
        body = _ESC.sub(lambda m: f'<span class="esc">{m.group(0)}</span>', body)
    tip = title + (f" · {extra_title}" if extra_title else "")
    st = f' style="{style}"' if style else ""
    return f'<span class="{cls}"{st} title="{esc(tip)}">{body}</span>'


def context_html(ctx: dict[str, Any], tokens: dict[str, list[str]], scale: float) -> str:
    """A context line: its value, then the window with each token shaded by the feature's activation; the
    hover gives the activation and, where computed (`ctx["ablation"]`), the next-token loss change when the
    feature is removed at that token."""
    spans = []
    abl = ctx.get("ablation")
    for k, (tid, v) in enumerate(zip(ctx["tokens"], ctx["values"])):
        style = ""
        if v is not None and v != 0 and scale > 0:
            a = min(1.0, abs(v) / scale)
            style = f"background:rgba(255,120,0,{a:.3f})" if v > 0 else f"background:rgba(41,128,185,{a:.3f})"
        cls = "t hit" if k == ctx["target"] else "t"
        tip = f"activation {v:.4g}" if v is not None else ""
        dl = abl[k] if abl else None
        if dl is not None:
            tip += f" · removing it here changes the next token's loss by {dl:+.4g}"
        spans.append(token_html(tid, tokens, tip, cls, style))
    n = int(ctx.get("count", 1))
    dup = f'<span class="dup" title="{n} rows kept for this list show this same window">×{n}</span>' if n > 1 else ""
    return f'<div class="ctx"><span class="val">{ctx["value"]:.3g}</span>{"".join(spans)}{dup}</div>'


def _feature_link(g: int, link: Callable[[int], str | None] | None) -> str:
    href = link(g) if link else None
    return f'<a href="{esc(href)}">{g}</a>' if href else str(g)


def feature_fragment(
    rec: dict[str, Any],
    link: Callable[[int], str | None] | None = None,
    header: str = "",
    index_href: str | None = None,
) -> str:
    """The page body (a `<div class="idash">`), for a file or a notebook cell; `header` is plain text
    (which rows the statistics cover), `link(g)` the address of feature g's page or None."""
    toks = rec["tokens"]
    scale = max(abs(rec["max"]), abs(rec["min"])) if rec["signed"] else rec["max"]
    p = ['<div class="idash">']
    nav = f' · <a href="{esc(index_href)}">index</a>' if index_href else ""
    p.append(f'<h2>{esc(rec["name"])} <span class="badge b-{esc(rec["density"])}">{esc(rec["density"])}</span></h2>')
    stats = (
        f"fires on <b>{100 * rec['freq']:.4g}%</b> of {rec['n_rows']:,} tokens ({rec['count']:,}) · max "
        f"<b>{rec['max']:.4g}</b>"
        f" · mean when active {rec['mean_active']:.4g}"
    )
    if rec["signed"]:
        stats += f' · min {rec["min"]:.4g} (signed values: "fires" = value &gt; 0; nothing is clamped)'
    p.append(f'<p class="stats">{stats}{nav}</p>')
    if header:
        p.append(f'<p class="muted">{esc(header)}</p>')
    p.append('<div class="grid"><div>')
    p.append("<h3>Top activations</h3>")
    if rec["top"]:
        if rec.get("ablation_model"):
            hover = (
                "hover a token: its activation, and how the loss on the next token changes when this feature's "
                f"contribution is removed at that token alone ({rec['ablation_model']})"
            )
        else:
            hover = "hover a token: its activation only (built without a model; with --model SPEC, also its ablation effect)"
        p.append(f'<p class="muted">{esc(hover)}</p>')
    p += [context_html(c, toks, scale) for c in rec["top"]] or ['<p class="none">never fires</p>']
    if rec["buckets"]:
        p.append('<h3>Activation quantiles <span class="muted">(random examples in each bucket)</span></h3>')
        for b in rec["buckets"]:
            p.append(
                f'<h4>{b["lo"]:.3g} – {b["hi"]:.3g} <span class="muted">({100 * b["fraction"]:.0f}% of '
                "activations)</span></h4>"
            )
            p += [context_html(c, toks, scale) for c in b["examples"]]
    if rec["bottom"]:
        p.append("<h3>Most negative values</h3>")
        p += [context_html(c, toks, scale) for c in rec["bottom"]]
    p.append("</div><div>")
    h = rec["histogram"]
    p.append(
        svg.bars(
            h["edges"],
            h["counts"],
            title="activation histogram" + (" (non-zero values)" if rec["signed"] else " (active tokens)"),
            xlabel="activation",
            highlight_zero=rec["signed"],
        )
    )
    lg = rec.get("logits")
    if lg:
        p.append(
            '<h3>Logit effects <span class="muted">W_U (g ⊙ '
            "d)</span></h3><table><tr><th>promoted</th><th></th><th>suppressed</th><th></th></tr>"
        )
        for (tp, vp), (tb, vb) in zip(lg["top"], lg["bottom"]):
            p.append(
                f'<tr><td>{token_html(tp, toks)}</td><td class="num">{vp:+.3g}</td>'
                f'<td>{token_html(tb, toks)}</td><td class="num">{vb:+.3g}</td></tr>'
            )
        p.append("</table>")
        p.append(
            svg.bars(
                lg["edges"],
                lg["counts"],
                title="logit effect over the vocabulary",
                xlabel="effect on logit",
                color="#8e44ad",
                log_y=True,
                highlight_zero=True,
            )
        )
    if rec["neighbours"]:
        p.append("<h3>Nearest decoder directions</h3><table><tr><th>feature</th><th>cosine</th></tr>")
        p += [f'<tr><td>{_feature_link(g, link)}</td><td class="num">{c:.3f}</td></tr>' for g, c in rec["neighbours"]]
        p.append("</table>")
    if rec["coact"]:
        p.append(
            f'<h3>Co-activating features <span class="muted">(Jaccard over {rec["coact_rows"]:,} rows)</span></h3>'
            "<table><tr><th>feature</th><th>Jaccard</th><th>Pearson</th><th>cosine</th></tr>"
        )
        p += [
            f'<tr><td>{_feature_link(g, link)}</td><td class="num">{j:.3f}</td><td class="num">{r:.3f}</td><td '
            f'class="num">{c:.3f}</td></tr>'
            for g, j, r, c in rec["coact"]
        ]
        p.append("</table>")
    pos = rec["positions"]
    n_pos = max((i + 1 for i, r in enumerate(pos["rows"]) if r), default=0)  # positions the data has
    rate = [f / r if r else 0.0 for f, r in zip(pos["fires"][:n_pos], pos["rows"][:n_pos])]
    last = len(pos["rows"]) - 1
    labels = [
        f"position {i}{'+' if i == last else ''}: fires on {100 * x:.3g}% ({f} of {r})"
        for i, (x, f, r) in enumerate(zip(rate, pos["fires"], pos["rows"]))
    ]
    p.append(
        svg.columns(
            rate, title="firing rate by position in the sequence", xlabel="position", labels=labels, ylabel="rate"
        )
    )
    p.append("</div></div></div>")
    return "".join(p)


def page_html(fragment: str, title: str) -> str:
    """A standalone HTML document around a fragment (no script, no network)."""
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">'
        f"<title>{esc(title)}</title><style>body {{ margin: 1em; }}{CSS}</style></head><body>{fragment}</body></html>"
    )


class FeaturePage:
    """A feature's record with `_repr_html_`, so `feature_page(...)` shows inline in Jupyter."""

    def __init__(self, record: dict[str, Any], header: str = ""):
        self.record, self.header = record, header

    def _repr_html_(self) -> str:
        return f"<style>{CSS}</style>" + feature_fragment(self.record, header=self.header)

    def html(self) -> str:
        return page_html(feature_fragment(self.record, header=self.header), self.record["name"])

    def __repr__(self) -> str:
        r = self.record
        return f"FeaturePage({r['name']!r}, freq={r['freq']:.4g}, max={r['max']:.4g}, density={r['density']})"
