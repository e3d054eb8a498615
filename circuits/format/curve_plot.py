"""One self-contained plot of a faithfulness curve (`circuits.evaluation.curve`): faithfulness and complement vs size,
each series with its 95% bootstrap interval as error bars (plotly.js embedded, works offline)."""

from __future__ import annotations

from pathlib import Path

COLOURS = {
    "eap": "#1f77b4",
    "eap-ig": "#d62728",
    "safeseek": "#2ca02c",
    "prune": "#9467bd",
    "random": "#7f7f7f",
    "random-connected": "#bcbd22",
}


def curve_figure(curve: dict):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("faithfulness: the circuit alone", "complement: the circuit ablated, the rest kept"),
    )
    series = list(dict.fromkeys(p["series"] for p in curve["points"]))
    for col, key in ((1, "faithfulness"), (2, "complement")):
        for name in series:
            pts = [p for p in curve["points"] if p["series"] == name]
            y = [p[key] for p in pts]
            fig.add_trace(
                go.Scatter(
                    x=[max(p["n_edges"], 1) for p in pts],
                    y=y,
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    line={"color": COLOURS.get(name, "#333"), "dash": "dot" if "random" in name else "solid"},
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [p[key + "_ci"][1] - v for p, v in zip(pts, y)],
                        "arrayminus": [v - p[key + "_ci"][0] for p, v in zip(pts, y)],
                    },
                    text=[f"{p['size']} {curve['unit']}" for p in pts],
                    hovertemplate="%{text}, %{x} edges: %{y:.3f}<extra>" + name + "</extra>",
                ),
                1,
                col,
            )
        total = curve.get("n_edges_graph")
        fig.update_xaxes(
            type="log",
            dtick=1,  # one labelled tick per power of ten (no unlabelled minor digits)
            title="edges in the circuit" + (f" (of {total:,})" if total else ""),
            row=1,
            col=col,
        )
        for y in (0.0, 1.0):
            fig.add_hline(y=y, line={"color": "#999", "width": 1}, row=1, col=col)
    fig.add_hline(
        y=0.8,
        line={"color": "#555", "width": 1, "dash": "dash"},
        annotation_text="80%",
        annotation_position="top left",
        row=1,
        col=1,
    )
    fig.update_yaxes(title="metric recovered (1 = whole model, 0 = all edges ablated)", row=1, col=1)
    fig.update_yaxes(title="metric left with the circuit's edges ablated", row=1, col=2)
    model = curve.get("model", {})
    spec = model.get("spec", "?") if isinstance(model, dict) else str(model)
    seeds = curve.get("config", {}).get("seeds", "?")
    n_eval = curve.get("config", {}).get("n_eval", "?")
    fig.update_layout(
        template="plotly_white",
        height=500,
        width=1200,
        title=f"{curve['method']} on {Path(str(curve['task'])).name} in {spec}: {curve['metric']}, "
        f"{curve['ablation']} ablation, {seeds} seed{'' if seeds == 1 else 's'}",
        legend={"title": {"text": f"bars: 95% bootstrap<br>interval over {n_eval}<br>evaluation prompts"}},
    )
    return fig


def write_curve_html(curve: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    curve_figure(curve).write_html(path, include_plotlyjs="directory")
    return path
