"""Render feature dashboards as one self-contained HTML file (plotly.js embedded; opens offline).

The page has an index (a sortable table of features with firing rate, activation statistics and top
tokens) and one section per feature: top-activating contexts with per-token highlighting, examples
from activation quantiles, an activation histogram, top/bottom logit effects (when given) and the most
co-activating features. Sections are shown with the URL fragment (`#f12`), so links work without a
server. Every piece of model or user text is HTML-escaped before it enters the page, and JSON inside
`<script>` has `<`, `>` and `&` escaped, so a token such as `</script>` is shown as text.

    >>> rows = TokenRows(token_text=["The", " cat", ...], seq=seq, pos=pos)
    >>> write_dashboard("out/dash.html", acts, rows, features=[3, 17], title="SAE latents")
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.store.atomic import atomic_write_bytes


@dataclass
class TokenRows:
    """What each activation row is: its token's text and its place (sequence id, position)."""

    token_text: Sequence[str]
    """Text of the token of each row (any string; it is escaped)."""
    seq: Tensor
    """[n] sequence id of each row."""
    pos: Tensor
    """[n] position of each row in its sequence."""

    def __post_init__(self) -> None:
        n = len(self.token_text)
        if self.seq.shape != (n,) or self.pos.shape != (n,):
            raise ValueError(f"token_text, seq and pos must have one entry per row; got {n}, {tuple(self.seq.shape)}, {tuple(self.pos.shape)}")


def _esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _show_token(t: str) -> str:
    return _esc(t.replace("\n", "↵").replace("\t", "⇥")) or "&#8203;"


def _json_for_script(obj: Any) -> str:
    return json.dumps(obj).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class _Index:
    """(seq, pos) -> row, to read a context window around a row."""

    def __init__(self, rows: TokenRows):
        self.rows = rows
        self.map = {(int(s), int(p)): i for i, (s, p) in enumerate(zip(rows.seq.tolist(), rows.pos.tolist()))}

    def window(self, r: int, before: int, after: int) -> list[int]:
        s, p = int(self.rows.seq[r]), int(self.rows.pos[r])
        return [self.map[(s, q)] for q in range(p - before, p + after + 1) if (s, q) in self.map]


def feature_summaries(acts: Tensor) -> dict[str, Tensor]:
    """Per-feature firing rate, max and mean non-zero activation ([F] each)."""
    fires = acts > 0
    n_fire = fires.sum(0)
    return {
        "freq": n_fire.float() / acts.shape[0],
        "max": acts.max(0).values.float(),
        "mean_nonzero": torch.where(n_fire > 0, (acts * fires).sum(0) / n_fire.clamp_min(1), torch.zeros(())).float(),
    }


def _context_html(acts_f: Tensor, r: int, idx: _Index, before: int, after: int, scale: float) -> str:
    spans = []
    for j in idx.window(r, before, after):
        a = float(acts_f[j])
        alpha = 0.0 if a <= 0 or scale <= 0 else min(1.0, a / scale)
        cls = "tok hit" if j == r else "tok"
        spans.append(
            f'<span class="{cls}" style="background:rgba(255,120,0,{alpha:.3f})" title="{_esc(f"{a:.4g}")}">'
            f"{_show_token(idx.rows.token_text[j])}</span>"
        )
    return f'<div class="ctx"><span class="val">{float(acts_f[r]):.3g}</span>{"".join(spans)}</div>'


def _feature_section(
    f: int, name: str, acts: Tensor, idx: _Index, stats: dict[str, Tensor], coact: list[tuple[int, float]],
    logits: dict[str, list[tuple[str, float]]] | None, n_top: int, n_groups: int, per_group: int,
    before: int, after: int, bins: int, gen: torch.Generator,
) -> tuple[str, dict[str, Any]]:
    a = acts[:, f].float()
    mx = float(stats["max"][f])
    nz = a[a > 0]
    top = a.topk(min(n_top, int((a > 0).sum()))).indices.tolist() if len(nz) else []
    parts = [f'<section class="latent" id="f{f}"><h2>{_esc(name)}</h2>',
             f'<p class="stats">fires on {100 * float(stats["freq"][f]):.3f}% of tokens · max {mx:.4g} · '
             f'mean when active {float(stats["mean_nonzero"][f]):.4g} · <a href="#index">back to index</a></p>',
             '<div class="cols"><div class="col">', "<h3>Top activations</h3>"]
    parts += [_context_html(a, r, idx, before, after, mx) for r in top] or ["<p>never fires</p>"]
    if len(nz) > n_top:
        parts.append("<h3>Examples by activation quantile</h3>")
        qs = torch.quantile(nz, torch.linspace(0, 1, n_groups + 1))
        for gi in range(n_groups - 1, -1, -1):
            lo, hi = float(qs[gi]), float(qs[gi + 1])
            cand = ((a > 0) & (a >= lo) & (a <= hi)).nonzero().flatten()
            if not len(cand):
                continue
            pick = cand[torch.randperm(len(cand), generator=gen)[:per_group]].tolist()
            parts.append(f'<h4>{_esc(f"{lo:.3g} – {hi:.3g}")}</h4>')
            parts += [_context_html(a, r, idx, before, after, mx) for r in pick]
    parts.append('</div><div class="col">')
    parts.append(f'<div class="hist" id="hist{f}"></div>')
    if logits:
        parts.append('<h3>Logit effects</h3><table class="logits"><tr><th>top (promoted)</th><th></th><th>bottom (suppressed)</th><th></th></tr>')
        for (tp, vp), (tb, vb) in zip(logits.get("top", []), logits.get("bottom", [])):
            parts.append(f"<tr><td>{_show_token(tp)}</td><td>{vp:+.3g}</td><td>{_show_token(tb)}</td><td>{vb:+.3g}</td></tr>")
        parts.append("</table>")
    if coact:
        parts.append("<h3>Co-activating features</h3><table><tr><th>feature</th><th>Jaccard</th></tr>")
        parts += [f'<tr><td><a href="#f{g}">{g}</a></td><td>{j:.3f}</td></tr>' for g, j in coact]
        parts.append("</table>")
    parts.append("</div></div></section>")
    counts, edges = (torch.histogram(nz, bins=bins) if len(nz) else (torch.zeros(0), torch.zeros(1)))
    centres = ((edges[1:] + edges[:-1]) / 2).tolist() if len(nz) else []
    return "".join(parts), {"x": centres, "y": counts.tolist()}


def write_dashboard(
    out: str | Path,
    acts: Tensor,
    rows: TokenRows,
    features: Sequence[int] | None = None,
    names: dict[int, str] | None = None,
    logit_effects: dict[int, dict[str, list[tuple[str, float]]]] | None = None,
    title: str = "Feature dashboard",
    n_top: int = 12,
    n_groups: int = 4,
    per_group: int = 3,
    window: tuple[int, int] = (12, 4),
    n_coact: int = 6,
    bins: int = 40,
    seed: int = 0,
    max_features: int = 50,
) -> Path:
    """Write one HTML file for `acts` [n_rows, n_features] (non-negative activations) over `rows`.

    `features`: which features get a section (default: the `max_features` most frequent live ones); `names`: labels;
    `logit_effects`: {feature: {"top": [(token, value)], "bottom": [...]}}. Returns the path."""
    import plotly.offline

    if acts.dim() != 2 or acts.shape[0] != len(rows.token_text):
        raise ValueError(f"acts must be [n_rows, n_features] with one row per token; got {tuple(acts.shape)} for {len(rows.token_text)} tokens")
    acts = acts.detach().float().cpu()
    stats = feature_summaries(acts)
    if features is None:
        live = (stats["freq"] > 0).nonzero().flatten()
        features = live[stats["freq"][live].argsort(descending=True)][:max_features].tolist()
    features = [int(f) for f in features]
    bad = [f for f in features if not 0 <= f < acts.shape[1]]
    if bad:
        raise ValueError(f"features {bad[:5]} out of range for {acts.shape[1]} features")
    idx = _Index(rows)
    fires = (acts > 0).float()
    sel = fires[:, features]
    inter = sel.T @ fires  # [len(features), F]
    union = sel.sum(0)[:, None] + fires.sum(0)[None] - inter
    jac = inter / union.clamp_min(1)
    gen = torch.Generator().manual_seed(seed)
    sections, hists, index_rows = [], {}, []
    for k, f in enumerate(features):
        jac[k, f] = -1
        co = [(int(g), float(jac[k, g])) for g in jac[k].topk(min(n_coact, acts.shape[1])).indices if jac[k, g] > 0]
        name = (names or {}).get(f, f"feature {f}")
        sec, hist = _feature_section(f, name, acts, idx, stats, co, (logit_effects or {}).get(f), n_top, n_groups,
                                     per_group, window[0], window[1], bins, gen)
        sections.append(sec)
        hists[f] = hist
        top_rows = acts[:, f].topk(min(5, acts.shape[0])).indices.tolist()
        toks = ", ".join(_show_token(rows.token_text[r]) for r in top_rows if acts[r, f] > 0)
        index_rows.append(
            f'<tr><td><a href="#f{f}">{_esc(name)}</a></td><td>{100 * float(stats["freq"][f]):.3f}</td>'
            f'<td>{float(stats["max"][f]):.4g}</td><td>{float(stats["mean_nonzero"][f]):.4g}</td><td class="toks">{toks}</td></tr>'
        )
    page = _PAGE.format(
        title=_esc(title), plotly=plotly.offline.get_plotlyjs(), n_rows=acts.shape[0], n_feat=acts.shape[1],
        n_shown=len(features), index_rows="".join(index_rows), sections="".join(sections), hists=_json_for_script(hists),
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, page.encode())
    return out


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }} td, th {{ padding: 2px 8px; border-bottom: 1px solid #eee; text-align: left; }}
.latent {{ display: none; }} .latent:target {{ display: block; }}
body:has(.latent:target) #index, body:has(.latent:target) .intro {{ display: none; }}
.cols {{ display: flex; gap: 2em; }} .col {{ flex: 1; min-width: 0; }}
.ctx {{ font-family: ui-monospace, monospace; font-size: 13px; margin: 3px 0; white-space: pre-wrap; word-break: break-all; }}
.tok {{ border-radius: 2px; }} .hit {{ outline: 1px solid #c60; font-weight: bold; }}
.val {{ display: inline-block; width: 4.5em; color: #777; }} .toks {{ font-family: ui-monospace, monospace; }}
.stats {{ color: #555; }}
</style>
<script>{plotly}</script></head>
<body>
<h1>{title}</h1>
<p class="intro">{n_rows} tokens · {n_feat} features · {n_shown} with a page. Click a feature to open it.</p>
<div id="index"><table><tr><th>feature</th><th>fires %</th><th>max</th><th>mean active</th><th>top tokens</th></tr>{index_rows}</table></div>
{sections}
<script type="application/json" id="hists">{hists}</script>
<script>
const HISTS = JSON.parse(document.getElementById("hists").textContent);
function draw() {{
  const id = location.hash.slice(2);
  const el = document.getElementById("hist" + id);
  if (!el || el.dataset.drawn) return;
  const h = HISTS[id];
  Plotly.newPlot(el, [{{type: "bar", x: h.x, y: h.y, marker: {{color: "#e67e22"}}}}],
    {{title: {{text: "activation histogram (active tokens)"}}, height: 280, margin: {{t: 40, l: 50, r: 10, b: 40}},
      xaxis: {{title: {{text: "activation"}}}}, yaxis: {{title: {{text: "tokens"}}}}}}, {{displayModeBar: false}});
  el.dataset.drawn = "1";
}}
window.addEventListener("hashchange", draw);
draw();
</script>
</body></html>
"""
