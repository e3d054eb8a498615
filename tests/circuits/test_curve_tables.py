"""The curve's size-reaching-80% and its side-by-side table, on a hand-made curve."""

from circuits.evaluation.curve import crossing, curve_table, curve_wide_table


def _point(series, size, f, lo, hi, per_seed, comp=0.1):
    return {
        "series": series,
        "size": size,
        "n_edges": float(size),
        "faithfulness": f,
        "faithfulness_ci": [lo, hi],
        "complement": comp,
        "complement_ci": [comp - 0.05, comp + 0.05],
        "per_seed": per_seed,
    }


def _curve():
    pts = [
        _point("eap", 10, 0.3, 0.1, 0.5, [0.2, 0.4]),
        _point("eap", 100, 0.7, 0.5, 0.85, [0.6, 0.81]),
        _point("eap", 1000, 0.9, 0.82, 0.97, [0.85, 0.95]),
    ]
    for name in ("random", "random-connected"):
        pts += [_point(name, k, -0.0001, -0.001, 0.001, [0.0, 0.0], comp=0.95) for k in (10, 100, 1000)]
    return {"method": "eap", "unit": "edges", "points": pts}


def test_crossing_reads_the_point_the_bounds_and_each_seed():
    c = crossing(_curve())
    assert c["size"] == 1000
    assert c["ci"] == [100, 1000]  # the upper bound reaches 0.8 at 100, the lower one at 1,000
    assert c["per_seed"] == [1000, 100]
    assert crossing(_curve(), level=0.99) == {"level": 0.99, "size": None, "ci": [None, None], "per_seed": [None, None]}


def test_wide_table_has_one_row_per_size_with_both_controls():
    rows = curve_wide_table(_curve()).splitlines()
    assert len(rows) == 2 + 3
    assert rows[3].startswith("| 100 | 0.70 [0.50, 0.85] | 0.10 [0.05, 0.15] | 0.00 [0.00, 0.00] / 0.95")
    assert "-0.00" not in rows[2]
    text = curve_table(_curve())
    assert text.startswith("| series |")
    assert text.endswith(
        "reaches 80% faithfulness at 1,000 edges (95% interval, at the grid's resolution: 100 to "
        "1,000; per seed: 1,000, 100)."
    )
