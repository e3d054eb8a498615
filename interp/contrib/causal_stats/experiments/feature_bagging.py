"""FI-Bagging demo: feature instability (FI) and instance instability (II) of ridge vs feature-bagged ridge,
on sklearn's diabetes data, a synthetic d = 50 set, and a probe over SmolLM2's neurons.

    python -m interp.contrib.causal_stats.experiments.feature_bagging [--seeds 3] [--quick] [--no-lm]

Grid (catalog): B in {1, 5, 20, 100}, q in {0.2, 0.5, 1} (q = 1 only with B = 1: every bag is the same).
Ridge λ = 1 on standardised features. FI = max over features of mean |f(x) - f^{(-j)}(x)| on test rows;
II = max over 30 training rows of the same for dropping the row; both exact refits (see the module).
Synthetic: n = 200 train, 200 test, d = 50 equicorrelated features (ρ = 0.5), y = xᵀw + noise, w ~ N(0, I)/√d.

SmolLM2 (`smollm2-135m`, stdlib-docs vs stdlib, 48 x 64 tokens each, position 0 dropped, from
`../../lm_features.py`): a ridge probe (λ = 10) on the 576 standardised neurons of
`blocks.12.hook_resid_post` predicting the corpus (±1); 1,000 train rows, 1,000 test rows; B = 20.

Strong baseline (issue 42), for every bagged row (q < 1) and split: plain ridge (B = 1, q = 1) at the penalty
whose test MSE equals the bagged model's (`ridge_at_mse`, on the path's side of more shrinkage), with its FI
and II; printed paired by split (bagged minus matched ridge, and the splits where bagging is more stable).
"""

from __future__ import annotations

import json

import torch

from interp.contrib.causal_stats.feature_bagging import (
    BaggedRidge,
    feature_instability,
    instance_instability,
    ridge_at_mse,
)
from interp.contrib.common.datasets import diabetes, standardise_columns
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.report import fmt, markdown_table

GRID = ((1.0, 1), (0.5, 1), (0.5, 5), (0.5, 20), (0.5, 100), (0.2, 1), (0.2, 5), (0.2, 20), (0.2, 100))


def synthetic(seed: int, n: int = 400, d: int = 50) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + seed)
    z = torch.randn(n, 1, generator=g, dtype=torch.float64)
    x = 0.5**0.5 * z + 0.5**0.5 * torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.randn(d, generator=g, dtype=torch.float64) / d**0.5
    return x, x @ w + 0.5 * torch.randn(n, generator=g, dtype=torch.float64)


def evaluate(x, y, seeds: int, grid, lam: float, n_train: int, ii_rows: int = 30) -> list[dict]:
    rows = []
    for q, b in grid:
        r = {"q": q, "B": b, "FI max": [], "FI mean": [], "II max": [], "test MSE": []}
        for s in range(seeds):
            perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(s))
            tr, te = perm[:n_train], perm[n_train:]
            m = BaggedRidge.fit(x[tr], y[tr], lam, q, b, seed=s)
            fi = feature_instability(m, x[te])
            ii = instance_instability(m, x[tr], y[tr], x[te], torch.arange(min(ii_rows, n_train)))
            r["FI max"].append(float(fi.max()))
            r["FI mean"].append(float(fi.mean()))
            r["II max"].append(float(ii.max()))
            r["test MSE"].append(float(((m.predict(x[te]) - y[te]) ** 2).mean()))
            if q < 1:  # the strong baseline: plain ridge at the same test MSE
                lam_eq, plain = ridge_at_mse(x[tr], y[tr], x[te], y[te], r["test MSE"][-1])
                fi_eq = feature_instability(plain, x[te])
                ii_eq = instance_instability(plain, x[tr], y[tr], x[te], torch.arange(min(ii_rows, n_train)))
                for k, v in (
                    ("FI max", float(fi_eq.max())),
                    ("FI mean", float(fi_eq.mean())),
                    ("II max", float(ii_eq.max())),
                    ("test MSE", float(((plain.predict(x[te]) - y[te]) ** 2).mean())),
                    ("λ", lam_eq),
                ):
                    r.setdefault(f"ridge@MSE {k}", []).append(v)
        rows.append(r)
    return rows


def smollm(seeds: int, quick: bool) -> list[dict]:
    from interp.contrib.lm_features import hook_name, labelled_corpora

    x, lab = labelled_corpora(
        hook_name(12), n_seq=48, ctx_len=64, corpora=("stdlib-docs", "stdlib"), per_sequence=False
    )
    g = torch.Generator().manual_seed(0)
    keep = torch.randperm(len(x), generator=g)[:2000]
    x, y = standardise_columns(x[keep]), lab[keep].double() * 2 - 1
    grid = ((1.0, 1), (0.2, 20)) if quick else ((1.0, 1), (0.5, 20), (0.2, 20))
    return evaluate(x, y, seeds, grid, 10.0, 1000, ii_rows=10)


def _print(title: str, rows: list[dict]) -> None:
    print(title)
    print(
        markdown_table(
            ["q", "B", "FI max", "FI mean", "II max", "test MSE"],
            [
                [r["q"], r["B"], fmt(r["FI max"]), fmt(r["FI mean"], 4), fmt(r["II max"]), fmt(r["test MSE"])]
                for r in rows
            ],
        )
    )


def _paired(a: list[float], b: list[float]) -> str:
    d = [x - y for x, y in zip(a, b, strict=True)]
    return f"{fmt(d)} ({sum(v < 0 for v in d)}/{len(d)})"


def _print_matched(title: str, rows: list[dict]) -> None:
    """The strong-baseline table: each bagged row against plain ridge at its test MSE."""
    print(title)
    print(
        markdown_table(
            [
                "q",
                "B",
                "FI max bagged",
                "FI max ridge@MSE",
                "bagged - ridge (bagging lower)",
                "II max bagged",
                "II max ridge@MSE",
                "MSE bagged",
                "MSE ridge@MSE",
                "ridge λ",
            ],
            [
                [
                    r["q"],
                    r["B"],
                    fmt(r["FI max"]),
                    fmt(r["ridge@MSE FI max"]),
                    _paired(r["FI max"], r["ridge@MSE FI max"]),
                    fmt(r["II max"]),
                    fmt(r["ridge@MSE II max"]),
                    fmt(r["test MSE"]),
                    fmt(r["ridge@MSE test MSE"]),
                    fmt(r["ridge@MSE λ"], 1),
                ]
                for r in rows
                if "ridge@MSE FI max" in r
            ],
        )
    )


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=3, quick="1 seed, B <= 5, diabetes only", no_lm="skip the SmolLM2 probe run")
    a = parse(ap, argv)
    if a.seeds < 1:
        ap.error("--seeds must be positive")
    seeds = 1 if a.quick else a.seeds
    grid = tuple(g for g in GRID if g[1] <= 5) if a.quick else GRID
    x, y = diabetes()
    out = {"diabetes": evaluate(x, y, seeds, grid, 1.0, 300)}
    _print(f"diabetes (d = 10, 300 train / 142 test, {seeds} splits)", out["diabetes"])
    _print_matched("\ndiabetes: bagged vs plain ridge at equal test MSE (strong baseline)", out["diabetes"])
    if not a.quick:
        syn = [evaluate(*synthetic(s), 1, grid, 1.0, 200) for s in range(seeds)]
        out["synthetic"] = [
            {
                k: (sum((syn[s][i][k] for s in range(seeds)), []) if isinstance(v, list) else v)
                for k, v in syn[0][i].items()
            }
            for i in range(len(grid))
        ]
        _print(f"\nsynthetic (d = 50, equicorrelated ρ = 0.5, {seeds} data seeds)", out["synthetic"])
        _print_matched("\nsynthetic: bagged vs plain ridge at equal test MSE", out["synthetic"])
    if not (a.quick or a.no_lm):
        out["smollm2"] = smollm(seeds, a.quick)
        _print(f"\nsmollm2-135m probe on 576 layer-12 neurons (corpus ±1, {seeds} splits)", out["smollm2"])
        _print_matched("\nsmollm2: bagged vs plain ridge at equal test MSE", out["smollm2"])
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
