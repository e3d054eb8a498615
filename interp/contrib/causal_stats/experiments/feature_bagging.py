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
"""

from __future__ import annotations

import json

import torch

from interp.contrib.causal_stats.feature_bagging import BaggedRidge, feature_instability, instance_instability
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
    if not (a.quick or a.no_lm):
        out["smollm2"] = smollm(seeds, a.quick)
        _print(f"\nsmollm2-135m probe on 576 layer-12 neurons (corpus ±1, {seeds} splits)", out["smollm2"])
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
