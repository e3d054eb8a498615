"""Plotly figures of a probe report, written as self-contained HTML (plotly.js embedded: opens offline).

- `layer_profile`: top-3 |h| and the median |h| of each layer's output (log scale): rise, plateau, fall.
- `sink_heatmap`: alpha_first per (layer, head), Gu et al.'s sink score.
- `ablation_bars`: perplexity of the original model, each massive-activation intervention and the
  StreamingLLM conditions (log scale).

Every model- or text-derived string is HTML-escaped before it reaches the page.
"""

from __future__ import annotations

import html
from pathlib import Path

import plotly.graph_objects as go


def _title(report: dict, what: str) -> str:
    return html.escape(f"{what} - {report['model'].get('name', '?')}")


def layer_profile(report: dict) -> go.Figure:
    layers = report["massive"]["layers"]
    xs = [x["layer"] for x in layers]
    fig = go.Figure()
    for k in range(3):
        ys = [x["mean_topk_abs"][k] if len(x.get("mean_topk_abs", [])) > k else None for x in layers]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=f"top {k + 1} |h| (mean over sequences)"))
    hover = [
        html.escape(f"channel {x['top'][0]['channel']}, position {x['top'][0]['pos']}, token {x['top'][0]['token']!r}")
        if x["top"]
        else ""
        for x in layers
    ]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[x["max_abs"] for x in layers],
            mode="markers",
            name="max |h| (hover: where)",
            hovertext=hover,
            marker={"symbol": "x"},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=xs, y=[x["median_abs"] for x in layers], mode="lines+markers", name="median |h|", line={"dash": "dot"}
        )
    )
    crit = report["massive"]["criterion"]
    fig.add_trace(
        go.Scatter(
            x=[xs[0], xs[-1]],
            y=[crit["abs_threshold"]] * 2,
            mode="lines",
            name=f"abs threshold {crit['abs_threshold']:g}",
            line={"color": "grey", "dash": "dash"},
        )
    )
    fig.update_layout(
        title=_title(report, "Largest residual-stream magnitudes per layer (hook_resid_post)"),
        xaxis_title="layer",
        xaxis_dtick=1,  # layers are whole numbers
        yaxis_title="|h| (log)",
        yaxis_type="log",
        template="plotly_white",
    )
    return fig


def sink_heatmap(report: dict) -> go.Figure:
    s = report["sinks"]
    a = s["alpha_first"]
    fig = go.Figure(
        go.Heatmap(
            z=a,
            x=[f"head {h}" for h in range(len(a[0]))],
            y=list(range(len(a))),
            colorscale="Viridis",
            zmin=0,
            zmax=1,
            colorbar={"title": "alpha_1"},
        )
    )
    fig.update_layout(
        title=_title(
            report,
            f"Attention to the first token per head (Sink_1 at eps {s['eps']:g}: "
            f"{100 * s['sink_fraction']:.1f}% of heads)",
        ),
        xaxis_title="head",
        yaxis_title="layer",
        template="plotly_white",
    )
    return fig


def ablation_bars(report: dict) -> go.Figure:
    names, ppls, groups = [], [], []
    abl = report.get("ablations") or {}
    for key in ("original", "zero", "mean", "random", "pos0_mean"):
        if key in abl:
            names.append(f"massive: {key}" if key != "original" else "original")
            ppls.append(abl[key]["ppl"])
            groups.append(f"massive activations (layer {abl.get('layer')})")
    stream = report.get("streaming") or {}
    for key, val in stream.items():
        if isinstance(val, dict):
            names.append(f"stream: {key}")
            ppls.append(val["ppl"])
            groups.append(f"StreamingLLM (window {stream['window']}, positions >= window)")
    fig = go.Figure()
    for g in dict.fromkeys(groups):
        idx = [i for i, x in enumerate(groups) if x == g]
        fig.add_trace(
            go.Bar(
                x=[names[i] for i in idx],
                y=[ppls[i] for i in idx],
                name=html.escape(g),
                text=[f"{ppls[i]:.3g}" for i in idx],
                textposition="outside",
            )
        )
    fig.update_layout(
        title=_title(report, "Perplexity under interventions"),
        yaxis_type="log",
        yaxis_title="perplexity (log)",
        template="plotly_white",
    )
    return fig


FIGURES = {"layer_profile": layer_profile, "sink_heatmap": sink_heatmap, "ablations": ablation_bars}


def write_figures(report: dict, folder: Path) -> dict[str, str]:
    """Write every figure as `<name>.html`, all reading one `plotly.min.js` written beside them (offline, and
    4.8 MB once per folder rather than once per page); returns {name: path}."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, make in FIGURES.items():
        path = folder / f"{name}.html"
        make(report).write_html(str(path), include_plotlyjs="directory", full_html=True)
        paths[name] = str(path)
    return paths
