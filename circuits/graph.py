"""A circuit as a plotly graph in one self-contained HTML file (plotly.js embedded, works offline).

Nodes are placed by where they act in the forward pass (x: layer and sub-layer; y: unit index), coloured
by kind; edges are lines whose opacity grows with weight. Every label that comes from the model or the
user (model name, task, node labels) is HTML-escaped.

    write_html(Circuit.load("circuit.json"), "graph.html")
"""

from __future__ import annotations

import html
from pathlib import Path

import plotly.graph_objects as go

from circuits.format import Circuit, Node

STAGE = {"resid_pre": 0.0, "q": 0.6, "k": 0.8, "v": 1.0, "head": 1.4, "head_compat": 1.8, "attn_out": 2.0,
         "resid_mid": 2.4, "neuron": 3.0, "mlp_out": 3.5, "resid_post": 3.9}
COLOURS = {"head": "#1f77b4", "head_compat": "#17becf", "neuron": "#d62728", "q": "#9467bd", "k": "#8c564b",
           "v": "#e377c2", "attn_out": "#2ca02c", "mlp_out": "#ff7f0e", "resid_pre": "#7f7f7f", "resid_mid": "#7f7f7f",
           "resid_post": "#7f7f7f"}


def _position(node: Node, rank: int, count: int) -> tuple[float, float]:
    return node.layer * 4 + STAGE[node.kind], (rank - (count - 1) / 2)


def figure(circuit: Circuit, max_edges: int = 3000) -> go.Figure:
    """The plotly figure of a circuit."""
    groups: dict[tuple[int, str], list[int]] = {}
    for i, n in enumerate(circuit.nodes):
        groups.setdefault((n.layer, n.kind), []).append(i)
    pos: dict[int, tuple[float, float]] = {}
    for members in groups.values():
        members.sort(key=lambda i: circuit.nodes[i].index)
        for rank, i in enumerate(members):
            pos[i] = _position(circuit.nodes[i], rank, len(members))
    fig = go.Figure()
    edges = sorted(circuit.edges, key=lambda e: -e.weight)[:max_edges]
    if edges:
        top = max(e.weight for e in edges) or 1.0
        for lo, hi, alpha in ((0.0, 0.2, 0.12), (0.2, 0.6, 0.35), (0.6, 1.01, 0.8)):
            xs, ys = [], []
            for e in edges:
                if lo <= e.weight / top < hi:
                    xs += [pos[e.src][0], pos[e.dst][0], None]
                    ys += [pos[e.src][1], pos[e.dst][1], None]
            if xs:
                fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                         line={"width": 1 + 2 * alpha, "color": f"rgba(80,80,80,{alpha})"}))
    for kind in sorted({n.kind for n in circuit.nodes}):
        idx = [i for i, n in enumerate(circuit.nodes) if n.kind == kind]
        fig.add_trace(go.Scatter(
            x=[pos[i][0] for i in idx], y=[pos[i][1] for i in idx], mode="markers", name=html.escape(kind),
            marker={"size": 11, "color": COLOURS.get(kind, "#333"), "line": {"width": 1, "color": "white"}},
            text=[html.escape(circuit.nodes[i].key) for i in idx], hovertemplate="%{text}<extra></extra>"))
    prov = circuit.provenance
    model = prov.get("model", {})
    model_name = model.get("spec", "?") if isinstance(model, dict) else str(model)
    m = circuit.metrics
    bits = [f"{k} {m[k]:.4g}" if isinstance(m[k], float) else f"{k} {m[k]}"
            for k in ("n_nodes", "n_edges", "task_loss", "removed_fraction") if k in m]
    title = (f"{html.escape(str(prov.get('method', 'circuit')))} circuit of {html.escape(str(prov.get('task', '?')))} "
             f"in {html.escape(str(model_name))}<br><sub>{html.escape(', '.join(bits))}</sub>")
    n_layers = max((n.layer for n in circuit.nodes), default=0) + 1
    fig.update_layout(
        title=title, template="plotly_white", height=700, hovermode="closest",
        xaxis={"title": "layer and sub-layer", "range": [-0.5, 4 * n_layers - 0.2], "zeroline": False,
               "tickvals": [v for layer in range(n_layers) for v in (4 * layer + 1.2, 4 * layer + 3.0)],
               "ticktext": [t for layer in range(n_layers) for t in (f"L{layer} attn", f"L{layer} mlp")]},
        yaxis={"title": "unit (centred rank)", "zeroline": False, "showticklabels": False},
    )
    if not circuit.nodes:
        fig.add_annotation(text="empty circuit (no nodes)", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def write_html(circuit: Circuit, path: str | Path) -> Path:
    """Write the graph as one HTML file with plotly.js embedded."""
    from interp.store.atomic import atomic_write_bytes

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    page = figure(circuit).to_html(include_plotlyjs=True, full_html=True)
    atomic_write_bytes(path, page.encode())
    return path
