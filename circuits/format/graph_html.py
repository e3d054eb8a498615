"""A circuit as an interactive graph in one self-contained HTML page (plotly.js embedded, works offline).

Position-resolved graphs (nodes carry a token position) are drawn with a column per token (the token as the
column's label, escaped) and a row per layer. Otherwise the layout is by layer: x is the layer (the embedding at the left, each layer's heads at x = layer and its MLP
at layer + 0.5, the logits at the right); y is the head index (key/value heads of grouped-query models
above the heads, MLPs below). Unit circuits (neurons, channels) go by sub-layer and rank. Node labels
are drawn (L5H3, MLP7, embed, logits). Edges are coloured by their signed weight on a diverging scale
with a colour bar, and drawn wider the larger |weight|. In the page, a slider keeps the top-k edges by
|weight| (or a box sets a |weight| threshold), client-side; clicking a node highlights its neighbours
and edges (click it again to clear; `graph.html#node=L5H3` opens with that node selected). Every label from the model or
the user is HTML-escaped and
the data are embedded as JSON with `<` escaped, so no text can close the script.

    write_html(Circuit.load("circuit.json"), "graph.html")
    circuit                      # in a notebook: shown inline (Circuit._repr_html_)
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any, Protocol


class Node(Protocol):
    """What the page reads of a node (`circuits.format.circuit.Node` is one)."""

    layer: int
    kind: str
    index: int

    @property
    def key(self) -> str: ...

    @property
    def short_label(self) -> str: ...


class Circuit(Protocol):
    """What the page reads of a circuit (`circuits.format.circuit.Circuit` is one): the page module does not
    import the format, so the format can show itself in a notebook through this module."""

    nodes: list[Any]
    edges: list[Any]
    extra: dict[str, Any]
    metrics: dict[str, Any]
    provenance: dict[str, Any]


STAGE = {
    "resid_pre": 0.0,
    "q": 0.15,
    "k": 0.2,
    "v": 0.25,
    "head": 0.0,
    "head_compat": 0.4,
    "attn_out": 0.45,
    "resid_mid": 0.5,
    "neuron": 0.6,
    "mlp_out": 0.8,
    "resid_post": 0.95,
}
KIND_COLOUR = {
    "head": "#1f77b4",
    "kv": "#17becf",
    "mlp": "#ff7f0e",
    "embed": "#2ca02c",
    "logits": "#d62728",
    "neuron": "#ff7f0e",
    "q": "#9467bd",
    "k": "#8c564b",
    "v": "#e377c2",
    "attn_out": "#1f77b4",
    "mlp_out": "#ff7f0e",
    "head_compat": "#17becf",
    "latent": "#6a3d9a",
    "sae_error": "#7f7f7f",
}
FEATURE_KINDS = ("latent", "sae_error")


def _label(n: Node) -> str:
    return n.short_label


def _positional(circuit: Circuit) -> bool:
    return isinstance(circuit.extra.get("positions"), dict)


def _position_layout(circuit: Circuit) -> list[tuple[float, float]]:
    """Position-resolved graphs: x is the token position (a column per token), y the layer (embedding at the
    bottom, logits at the top); within a cell heads spread left to right, key/value heads below them, the MLP above."""
    g = circuit.extra.get("graph") or {}
    n_heads, n_kv = int(g.get("n_heads", 1)), int(g.get("n_kv", 1))
    n_layers = int(g.get("n_layers", max([n.layer + 1 for n in circuit.nodes] + [1])))
    cells: dict[tuple, list[int]] = {}  # latents and error nodes of one (layer, position) spread across the cell
    for i, n in enumerate(circuit.nodes):
        if n.kind in FEATURE_KINDS:
            cells.setdefault((n.layer, n.pos), []).append(i)
    spread = {i: (r, len(m)) for m in cells.values() for r, i in enumerate(sorted(m, key=lambda i: circuit.nodes[i]))}
    out = []
    for i, n in enumerate(circuit.nodes):
        p = float(n.pos or 0)
        if n.kind in FEATURE_KINDS:
            r, count = spread[i]
            out.append((p - 0.35 + 0.7 * r / max(count - 1, 1) if count > 1 else p, n.layer + 0.5))
        elif n.kind == "embed":
            out.append((p, -1.0))
        elif n.kind == "logits":
            out.append((p, float(n_layers)))
        elif n.kind == "head":
            out.append((p - 0.35 + 0.7 * n.index / max(n_heads - 1, 1), float(n.layer)))
        elif n.kind == "kv":
            out.append((p - 0.3 + 0.6 * n.index / max(n_kv - 1, 1), n.layer - 0.3))
        elif n.kind == "mlp":
            out.append((p, n.layer + 0.45))
        else:
            out.append((p, n.layer + STAGE.get(n.kind, 0.5)))
    return out


def layout(circuit: Circuit) -> list[tuple[float, float]]:
    """(x, y) of every node."""
    if _positional(circuit):
        return _position_layout(circuit)
    g = circuit.extra.get("graph") or {}
    n_heads = int(g.get("n_heads", max([n.index + 1 for n in circuit.nodes if n.kind == "head"] + [1])))
    n_layers = int(g.get("n_layers", max([n.layer + 1 for n in circuit.nodes] + [1])))
    groups: dict[tuple, list[int]] = {}
    for i, n in enumerate(circuit.nodes):
        groups.setdefault((n.layer, n.kind, getattr(n, "hook", None)), []).append(i)
    rank = {}
    for members in groups.values():
        members.sort(key=lambda i: circuit.nodes[i].index)
        for r, i in enumerate(members):
            rank[i] = r - (len(members) - 1) / 2
    feature_y = _feature_rows(circuit)
    pos = []
    for i, n in enumerate(circuit.nodes):
        if n.kind == "embed":
            pos.append((-1.0, (n_heads - 1) / 2))
        elif n.kind == "logits":
            pos.append((n_layers + 0.2, (n_heads - 1) / 2))
        elif n.kind == "head":
            pos.append((float(n.layer), float(n.index)))
        elif n.kind == "kv":
            pos.append((n.layer - 0.15, n_heads + 0.5 + n.index))
        elif n.kind == "mlp":
            pos.append((n.layer + 0.5, -1.5))
        elif n.kind in FEATURE_KINDS:
            pos.append((n.layer + STAGE.get(_site(n), 0.5), feature_y[i]))
        else:
            pos.append((n.layer + STAGE.get(n.kind, 0.5), rank[i]))
    return pos


def _site(n) -> str:
    hook = getattr(n, "hook", None) or ""
    return hook.split(".", 2)[-1].replace("hook_", "") if hook.startswith("blocks.") else hook


def _feature_rows(circuit: Circuit) -> dict[int, float]:
    """Feature circuits: y of each latent in its hook's column, largest |score| on top, the error node below."""
    values = node_values(circuit)
    by_hook: dict[str, list[int]] = {}
    for i, n in enumerate(circuit.nodes):
        if n.kind in FEATURE_KINDS:
            by_hook.setdefault(getattr(n, "hook", None) or "", []).append(i)
    out = {}
    for members in by_hook.values():
        latents = [i for i in members if circuit.nodes[i].kind == "latent"]
        latents.sort(key=lambda i: -abs(values[i] or 0.0))
        for r, i in enumerate(latents):
            out[i] = (len(latents) - 1) / 2 - r
        for i in members:
            if circuit.nodes[i].kind == "sae_error":
                out[i] = -(len(latents) - 1) / 2 - 1.5
    return out


CROWDED = 12
"""A column with more nodes than this shows their names on hover only."""

MAX_TICKS = 200
"""A position-resolved page names at most this many tokens on its axis."""

_COLUMN_NAME = {
    "head": "attn",
    "kv": "k/v",
    "mlp": "MLP",
    "neuron": "MLP",
    "attn_out": "attn out",
    "mlp_out": "MLP out",
}


def _column_ticks(nodes, pos) -> dict[float, str]:
    """x position -> axis label ("L3 attn", "L3 MLP", "embed", "logits") for every column that holds a node."""
    ticks = {}
    for n, (x, _) in zip(nodes, pos):
        if n.kind in ("embed", "logits"):
            name = n.kind
        elif n.kind in FEATURE_KINDS:
            name = f"L{n.layer} {_site(n)}"
        else:
            name = f"L{n.layer} {_COLUMN_NAME.get(n.kind, n.kind)}"
        ticks.setdefault(round(x, 3), name)
    return dict(sorted(ticks.items()))


def _text(s: str) -> str:
    """Text for Plotly: `<`, `>` and `&` escaped once. Plotly decodes those entities but shows `&quot;` and
    `&#x27;` literally, so quotes stay as they are (they are data inside JSON, never an HTML attribute)."""
    return html.escape(str(s), quote=False)


def page_data(circuit: Circuit) -> dict:
    """What the page script draws: nodes (label, x, y, colour) and edges sorted by |weight|."""
    pos = layout(circuit)
    values = node_values(circuit)
    at = (lambda n: f"@{n.pos}") if _positional(circuit) else (lambda n: "")
    positional = _positional(circuit)
    # a column: one x, or one token position in position-resolved graphs (its nodes spread around it)
    key = [n.pos if positional else round(x, 3) for n, (x, _) in zip(circuit.nodes, pos, strict=True)]
    column: dict = {}
    for k in key:
        column[k] = column.get(k, 0) + 1
    nodes = [
        {
            "label": _text(_label(n) + at(n)),
            "x": x,
            "y": y,
            "kind": n.kind,
            "colour": KIND_COLOUR.get(n.kind, "#555"),
            "value": v,
            # a crowded column keeps its names for the hover: printed, they would overlap
            # (position-resolved: the token axis names the embeddings)
            "show_label": column[k] <= CROWDED and not (positional and n.kind == "embed"),
        }
        for n, (x, y), v, k in zip(circuit.nodes, pos, values, key, strict=True)
    ]
    edges = sorted(([e.src, e.dst, float(e.weight), _text(e.label)] for e in circuit.edges), key=lambda e: -abs(e[2]))
    prov = circuit.provenance
    model = prov.get("model_spec") or (
        prov.get("model", {}).get("spec", "?") if isinstance(prov.get("model"), dict) else prov.get("model", "?")
    )
    m = circuit.metrics
    bits = [
        metric_text(k, m[k])
        for k in (
            "n_nodes",
            "n_edges",
            "faithfulness_nodes",
            "faithfulness",
            "error_only_faithfulness",
            "latents_only_faithfulness",
            "replacement",
            "completeness",
            "task_loss",
            "removed_fraction",
        )
        if m.get(k) is not None
    ]
    title = f"{prov.get('method', 'circuit')} circuit of {short_task(prov.get('task', '?'))} in {short_task(model)}"
    if _positional(circuit):
        tokens = [str(t) for t in circuit.extra["positions"].get("tokens", [])]
        every = max(1, -(-len(tokens) // MAX_TICKS))  # a long prompt names every k-th token (k shown in the title)
        axes = {
            "xaxis": {
                "title": "token position" + (f" (every {every}th named)" if every > 1 else ""),
                "tickvals": list(range(0, len(tokens), every)),
                "ticktext": [_text(t) for t in tokens[::every]],
                "range": [-0.6, len(tokens) - 0.4],  # every token's column, with or without nodes
                "zeroline": False,
            },
            "yaxis": {"title": "layer (embedding below, logits on top; MLP above its heads)", "zeroline": False},
        }
    else:
        ticks = _column_ticks(circuit.nodes, pos)
        features = circuit.extra.get("feature_circuit")
        y_title = (
            "latents by |score| (largest on top; the error node below)"
            if features
            else "head index (MLPs below, key/value heads above)"
        )
        axes = {
            "xaxis": {"title": "layer", "zeroline": False, "tickvals": list(ticks), "ticktext": list(ticks.values())},
            "yaxis": {"title": y_title, "zeroline": False},
        }
    return {
        **axes,
        "nodes": nodes,
        "edges": edges,
        "title": _text(title),
        "subtitle": _text(", ".join(bits)),
        "all_nodes": "graph" not in circuit.extra,
        "n_edges": len(edges),
        "value_name": _text(values_meaning(circuit)),
        "edge_name": _text((circuit.extra.get("meanings") or {}).get("edge", "edge score (metric change if patched)")),
    }


def short_task(name) -> str:
    """A task or model name without its folders: prompts:/a/b/pairs.jsonl -> prompts:pairs.jsonl."""
    name = str(name)
    prefix = "prompts:" if name.startswith("prompts:") else ""
    rest = name.removeprefix(prefix)
    is_path = prefix or rest.startswith(("/", "./", "../", "~"))
    return prefix + (Path(rest).name if is_path else rest)


def node_values(circuit: Circuit) -> list[float | None]:
    """Each node's value: its own score in unit circuits (SafeSeek mask logit, pruning tau: `extra.node_scores`) and
    feature circuits (`extra.node_values`, one per node), else the summed signed score of its edges (out of it; into
    it for the logits); None when there is none."""
    given = circuit.extra.get("node_values")
    if isinstance(given, list) and len(given) == len(circuit.nodes):
        return [None if v is None else float(v) for v in given]
    scores = circuit.extra.get("node_scores") or {}
    out: list[float | None] = []
    for i, n in enumerate(circuit.nodes):
        vals = scores.get(f"{n.kind}_{n.layer}")
        if isinstance(vals, list) and 0 <= n.index < len(vals):
            out.append(float(vals[n.index]))
            continue
        es = [e.weight for e in circuit.edges if (e.dst if n.kind == "logits" else e.src) == i]
        out.append(float(sum(es)) if es else None)
    return out


UNDEFINED = {"faithfulness": "the full and the ablated model score the task the same: nothing to recover"}
"""Why a metric can be undefined (NaN in the circuit's metrics), shown in its place."""


def metric_text(name: str, value) -> str:
    """`faithfulness 0.8123`; a NaN or inf says it is undefined and why, never `faithfulness nan`."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name} undefined ({UNDEFINED.get(name, f'{value} is not a number')})"
    return f"{name} {value:.4g}" if isinstance(value, float) else f"{name} {value}"


def values_meaning(circuit: Circuit) -> str:
    given = (circuit.extra.get("meanings") or {}).get("node")
    if given:
        return str(given)
    if circuit.extra.get("node_values"):
        return "node score (metric change if patched)"
    if circuit.extra.get("node_scores"):
        return "node score"
    return "summed edge score"


_SCRIPT = r"""
(function(){
const D = JSON.parse(document.getElementById('circuit-data').textContent);
const el = document.getElementById('circuit-graph');
const slider = document.getElementById('topk'), kout = document.getElementById('kout');
const thr = document.getElementById('thr');
let selected = null;
const maxAbs = D.edges.reduce((m, e) => Math.max(m, Math.abs(e[2])), 1e-12);  // no spread: a long graph has 10^5+ edges
slider.max = D.edges.length; slider.value = Math.min(+slider.dataset.k, D.edges.length);
const SCALE = [[0, '#2166ac'], [0.25, '#67a9cf'], [0.5, '#dddddd'], [0.75, '#ef8a62'], [1, '#b2182b']];
function colour(w) {
  const t = Math.max(0, Math.min(1, 0.5 + 0.5 * w / maxAbs));
  for (let i = 1; i < SCALE.length; i++) { if (t <= SCALE[i][0]) {
    const [a, ca] = SCALE[i - 1], [b, cb] = SCALE[i], f = (t - a) / (b - a);
    const p = s => [1, 3, 5].map(j => parseInt(s.substr(j, 2), 16));
    const x = p(ca), y = p(cb);
    return 'rgb(' + x.map((v, j) => Math.round(v + f * (y[j] - v))).join(',') + ')'; } }
  return SCALE[SCALE.length - 1][1];
}
function path(e) {
  // points along the edge: straight, or bowed when both ends sit on one row (MLP -> MLP, head -> head of one index)
  const a = D.nodes[e[0]], b = D.nodes[e[1]], n = 12;
  const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
  const bow = Math.abs(dy) < 1e-9 ? 0.18 * len + 0.3 : 0;
  const cx = (a.x + b.x) / 2 - bow * dy / len, cy = (a.y + b.y) / 2 + bow * dx / len;
  const out = [];
  for (let i = 0; i <= n; i++) { const t = i / n, u = 1 - t;
    out.push([u * u * a.x + 2 * u * t * cx + t * t * b.x, u * u * a.y + 2 * u * t * cy + t * t * b.y]); }
  return out;
}
function visibleEdges() {
  const t = parseFloat(thr.value);
  if (!isNaN(t) && thr.value !== '') return D.edges.filter(e => Math.abs(e[2]) >= t);
  return D.edges.slice(0, +slider.value);
}
function draw() {
  const edges = visibleEdges();
  kout.textContent = edges.length + ' of ' + D.edges.length + ' edges' + (D.all_nodes ? ', ' + D.nodes.length + ' nodes' : '');
  const used = new Set(); edges.forEach(e => { used.add(e[0]); used.add(e[1]); });
  D.nodes.forEach((n, i) => { if (D.all_nodes || n.kind === 'embed' || n.kind === 'logits') used.add(i); });
  const near = new Set();
  if (selected !== null) { near.add(selected); edges.forEach(e => { if (e[0] === selected) near.add(e[1]); if (e[1] === selected) near.add(e[0]); }); }
  const bins = {}, arrows = [];
  edges.forEach(e => {
    const on = selected === null || e[0] === selected || e[1] === selected;
    const c = on ? colour(e[2]) : 'rgba(200,200,200,0.25)';
    const w = on ? (1 + 5 * Math.abs(e[2]) / maxAbs).toFixed(1) : '1';
    const key = c + '|' + w;
    (bins[key] = bins[key] || {x: [], y: [], c: c, w: +w, text: []});
    const pts = path(e);
    pts.forEach(p => { bins[key].x.push(p[0]); bins[key].y.push(p[1]); });
    bins[key].x.push(null); bins[key].y.push(null);
    const tip = pts[pts.length - 1], back = pts[pts.length - 3];
    arrows.push({x: tip[0], y: tip[1], ax: back[0], ay: back[1], xref: 'x', yref: 'y', axref: 'x', ayref: 'y', text: '',
      showarrow: true, arrowhead: 2, arrowsize: 1.1, arrowwidth: Math.max(1, +w * 0.7), arrowcolor: c, standoff: 7});
  });
  const traces = Object.values(bins).map(b => ({type: 'scatter', mode: 'lines', x: b.x, y: b.y, hoverinfo: 'skip',
    showlegend: false, line: {color: b.c, width: b.w}}));
  const idx = [...used];
  const mids = edges.map(e => { const a = D.nodes[e[0]], b = D.nodes[e[1]], m = path(e)[6];
    return [m[0], m[1], a.label + ' \u2192 ' + b.label + (e[3] ? ' <' + e[3] + '>' : '') + ': ' + e[2].toPrecision(3), e[2]]; });
  traces.push({type: 'scatter', mode: 'markers', x: mids.map(m => m[0]), y: mids.map(m => m[1]), text: mids.map(m => m[2]),
    hovertemplate: '%{text}<extra></extra>', showlegend: false,
    marker: {size: 6, opacity: 0.01, color: mids.map(m => m[3]), colorscale: SCALE, cmin: -maxAbs, cmax: maxAbs,
             showscale: true, colorbar: {title: {text: D.edge_name.replace(/ \(/, '<br>(')}, thickness: 14}}});
  traces.push({type: 'scatter', mode: 'markers+text', x: idx.map(i => D.nodes[i].x), y: idx.map(i => D.nodes[i].y),
    text: idx.map(i => D.nodes[i].show_label === false ? '' : D.nodes[i].label), textposition: 'middle right',
    customdata: idx, showlegend: false,
    hovertext: idx.map(i => D.nodes[i].label + (D.nodes[i].value === null ? '' : '<br>' + D.value_name + ': ' +
      D.nodes[i].value.toPrecision(3))),
    hovertemplate: '%{hovertext}<extra></extra>', textfont: {size: 10},
    marker: {size: 13, color: idx.map(i => D.nodes[i].colour), line: {width: 1.5, color: '#fff'},
             opacity: idx.map(i => selected === null || near.has(i) ? 1 : 0.25)}});
  Plotly.react(el, traces, {title: {text: D.title + '<br><sub>' + D.subtitle + '</sub>'}, template: 'plotly_white',
    hovermode: 'closest', height: 720, margin: {t: 80}, annotations: arrows,
    xaxis: D.xaxis, yaxis: D.yaxis}, {responsive: true});
}
const want = decodeURIComponent((location.hash.match(/node=([^&]+)/) || [])[1] || '');
if (want) { const i = D.nodes.findIndex(n => n.label === want); if (i >= 0) selected = i; }  // e.g. graph.html#node=L9H6
slider.addEventListener('input', () => { thr.value = ''; draw(); });
thr.addEventListener('change', draw);
draw();
el.on('plotly_click', ev => { const p = ev.points[0];
  selected = (p.customdata !== undefined && selected !== p.customdata) ? p.customdata : null; draw(); });
})();
"""


def to_html(circuit: Circuit, top_k: int = 200, include_plotlyjs: bool | str = True) -> str:
    """The whole page as a string; plotly.js inline (True), read from `plotly.min.js` beside the page
    ("directory"), or left out (False)."""
    from plotly.offline import get_plotlyjs

    data = json.dumps(page_data(circuit)).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    title = page_data(circuit)["title"]  # already escaped
    if include_plotlyjs == "directory":
        js = '<script src="plotly.min.js" charset="utf-8"></script>'
    else:
        js = f"<script>{get_plotlyjs()}</script>" if include_plotlyjs else ""
    no_edges = not circuit.edges
    hide_edges, show_note = ("display:none", "") if no_edges else ("", "display:none")
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>{js}</head>
<body style="font-family: sans-serif; margin: 8px">
<div style="display:flex; gap:18px; align-items:center; font-size:14px">
 <span style="{hide_edges}">
 <label>top edges by |score|: <input id="topk" type="range" min="1" max="1" value="1" data-k="{int(top_k)}" style="width:320px"></label>
 <span id="kout"></span>
 <label>or |score| &ge; <input id="thr" type="number" step="any" style="width:90px"></label>
 </span>
 <span style="{show_note}">a node circuit: the units the method kept, with no edges between them</span>
 <span style="color:#666">click a node to highlight its neighbours; hover a node for its name and score</span>
</div>
<div id="circuit-graph" style="width:100%; height:720px"></div>
<script type="application/json" id="circuit-data">{data}</script>
<script>{_SCRIPT}</script>
</body></html>"""


def write_html(circuit: Circuit, path: str | Path, top_k: int = 200) -> Path:
    """Write the graph as an HTML file that reads the folder's one `plotly.min.js` (written beside it when absent,
    as plotly's own `include_plotlyjs="directory"` does): offline, and 4.8 MB once per folder, not per page."""
    from plotly.offline import get_plotlyjs

    from interp.store.atomic import atomic_write_bytes

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shared = path.parent / "plotly.min.js"
    if not shared.exists():
        atomic_write_bytes(shared, get_plotlyjs().encode())
    atomic_write_bytes(path, to_html(circuit, top_k, include_plotlyjs="directory").encode())
    return path


def notebook_html(circuit: Circuit, top_k: int = 200) -> str:
    """The page inside an iframe (srcdoc), so it runs its own script in a notebook output cell."""
    return (
        f'<iframe srcdoc="{html.escape(to_html(circuit, top_k))}" style="width:100%; height:800px; border:0" '
        'sandbox="allow-scripts"></iframe>'
    )
