"""MIB's circuit-localization scores of a faithfulness curve: CPR and CMD (Mueller et al. 2025, "MIB: A Mechanistic
Interpretability Benchmark").

Followed exactly: `evaluate_area_under_curve` in `MIB_circuit_track/evaluation.py` of
github.com/hannamw/MIB-circuit-track (commit b759df3), with the scores its `print_results.py` reports (CPR its
`area_under`, CMD its `area_from_1`): at circuit sizes given as fractions x of the graph's edges (theirs: 0.1%,
0.2%, 0.5%, 1%, 2%, 5%, 10%, 20%, 50%, 100%; the circuit at x keeps int(x * edges) items), with faithfulness
f(x) = (m(circuit) - m(empty)) / (m(model) - m(empty)),

    CPR = sum over consecutive sizes of (x2 - x1) * (f1 + f2) / 2                (`area_under`; higher is better)
    CMD = sum over consecutive sizes of (x2 - x1) * (|1 - f1| + |1 - f2|) / 2    (`area_from_1`; lower is better)

the trapezoid rule on a linear x axis (their default `log_scale=False`). Their x is the nominal fraction, which we
use on their grid (`interp circuits curve --sizes mib`); on any other grid x is the measured size over the graph's
size, and the integral covers only the measured range (reported as `x_range`), so such numbers are comparable with
each other but not with MIB's leaderboard, which integrates over 0.001 to 1. Head rankings (SafeSeek, pruning) use
x = heads kept / all heads, their node-level count. MIB ranks edges by signed score for CPR and by |score| for CMD;
our curves rank by |score| for both.

    sizes = mib_sizes(graph.n_edges)               # [70, 141, 353, 706, 1413, 3532, 7065, 14130, 35325, 70651]
    cpr, cmd = areas(MIB_FRACTIONS, faithfulness)  # one curve
"""

from __future__ import annotations

MIB_FRACTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
"""MIB's circuit sizes, as fractions of the graph's edges (`percentages` in their `evaluate_area_under_curve`)."""
REFERENCE = "MIB (Mueller et al. 2025), hannamw/MIB-circuit-track MIB_circuit_track/evaluation.py, trapezoid rule"


def mib_sizes(total: int) -> list[int]:
    """The number of items at each of MIB's fractions of `total`: int(fraction * total), as theirs (0 is the
    empty circuit, whose faithfulness is 0 by definition)."""
    return [int(p * total) for p in MIB_FRACTIONS]


def areas(x: list[float], f: list[float]) -> tuple[float, float]:
    """(CPR, CMD) of the curve f(x): the trapezoid areas under f and under |1 - f| between consecutive x (sorted)."""
    if len(x) != len(f):
        raise ValueError(f"{len(x)} sizes but {len(f)} faithfulness values")
    pts = sorted(zip(x, f))
    cpr = cmd = 0.0
    for (x1, f1), (x2, f2) in zip(pts, pts[1:]):
        cpr += (x2 - x1) * (f1 + f2) / 2
        cmd += (x2 - x1) * (abs(1.0 - f1) + abs(1.0 - f2)) / 2
    return cpr, cmd


def curve_scores(curve: dict, fractions: list[float] | None = None) -> dict:
    """CPR and CMD of every series of a faithfulness curve (`circuits.evaluation.curve`): of the mean curve, and of
    each seed's (the method) or each draw's (the controls) own curve. `fractions`: the x of each size (MIB's grid);
    None: size / the graph's size."""
    total = curve["n_edges_graph"] if curve["unit"] == "edges" else curve["n_heads_graph"]
    out: dict = {}
    for name in dict.fromkeys(p["series"] for p in curve["points"]):
        pts = [p for p in curve["points"] if p["series"] == name]
        x = list(fractions) if fractions is not None else [p["size"] / total for p in pts]
        cpr, cmd = areas(x, [p["faithfulness"] for p in pts])
        key = "per_seed" if "per_seed" in pts[0] else "per_draw"
        runs = [areas(x, [p[key][i] for p in pts]) for i in range(len(pts[0][key]))]
        out[name] = {"cpr": cpr, "cmd": cmd, key: [{"cpr": round(a, 4), "cmd": round(b, 4)} for a, b in runs]}
    xs = list(fractions) if fractions is not None else [p["size"] / total for p in curve["points"]]
    return {
        "grid": "mib" if fractions is not None else "measured",
        "x_range": [min(xs), max(xs)] if xs else None,
        "reference": REFERENCE,
        "series": out,
    }


__all__ = ["MIB_FRACTIONS", "areas", "curve_scores", "mib_sizes"]
