"""ParalESN demo: classic tanh ESN vs ParalESN on Mackey-Glass (1-step and 84-step NRMSE), memory capacity,
and wall-clock of the scan against the sequential recurrence as T grows.

    python -m interp.contrib.timeseries.experiments.paralesn [--seeds 3] [--quick]

Catalog setting (sized for a shared 2-core CPU): Mackey-Glass τ=17 sampled every time unit, T train 4,000
+ 2,000 test after a 200-step washout (paper T = 10k); ESN 500 units (ρ 0.9), ParalESN 500 units in one
linear layer and 3 x 167 units with the untrained nonlinear mixing between layers (the paper's deep form;
it also runs 5,000 units), ridge readout on [Re h, Im h] of every layer. Memory capacity: delays 1..100, T 3,000.
Timing: one thread, T in {1k, 4k, 16k}, 500 units, median of 3 repeats.
"""

from __future__ import annotations

import json
import time

import torch

from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.report import fmt, markdown_table
from interp.contrib.timeseries.paralesn import (
    ClassicESN,
    ParalESN,
    ParalESNConfig,
    apply_readout,
    mackey_glass,
    memory_capacity,
    nrmse,
    ridge_readout,
)

WASH = 200


def _models(seed: int, n0: int):
    """The tanh ESN, a one-layer (purely linear) ParalESN and a 3-layer ParalESN with nonlinear mixing, all
    with about n0 units."""
    out = {f"ESN-{n0} (tanh)": ClassicESN(n0, 1, rho=0.9, input_scaling=0.5, seed=seed).features}
    one = ParalESN(ParalESNConfig(n_units=n0, rho_min=0.5, rho_max=0.99, input_scaling=0.5, seed=seed), 1)
    out[f"ParalESN-{n0}, 1 layer (linear)"] = one.features
    k = -(-n0 // 3)
    deep = ParalESN(ParalESNConfig(n_units=k, n_layers=3, rho_min=0.5, rho_max=0.99, input_scaling=2.0, seed=seed), 1)
    out[f"ParalESN-3x{k}, mixing layers"] = deep.features
    return out


def forecast(seed: int, n_train: int, n_test: int, n0: int, horizons=(1, 84)) -> dict[str, dict[int, float]]:
    s = mackey_glass(n_train + n_test + max(horizons) + WASH, seed=seed)
    s = s - s.mean()
    res = {}
    for name, feat in _models(seed, n0).items():
        H = feat(s.unsqueeze(1))
        res[name] = {}
        for h in horizons:
            X, Y = H[: len(s) - h], s[h:]
            tr = slice(WASH, WASH + n_train)
            te = slice(WASH + n_train, WASH + n_train + n_test)
            W = ridge_readout(X[tr], Y[tr], 1e-7)
            res[name][h] = nrmse(apply_readout(X[te], W), Y[te])
    return res


def _median_time(fn, reps: int = 3) -> float:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


def timing(lengths: tuple[int, ...], n_units: int) -> list[dict]:
    esn = ClassicESN(n_units, 1, seed=0)
    par = ParalESN(ParalESNConfig(n_units=n_units), 1)
    rows = []
    for T in lengths:
        x = torch.randn(T, 1, dtype=torch.float64)
        t_esn = _median_time(lambda: esn.features(x))  # noqa: B023
        t_seq = _median_time(lambda: par.features(x, parallel=False))  # noqa: B023
        t_scan = _median_time(lambda: par.features(x))  # noqa: B023
        t_dbl = _median_time(lambda: par.features(x, parallel="doubling"))  # noqa: B023
        rows.append(
            {
                "T": T,
                "esn_s": t_esn,
                "paralesn_loop_s": t_seq,
                "paralesn_scan_s": t_scan,
                "paralesn_doubling_s": t_dbl,
                "speedup_vs_esn": t_esn / t_scan,
                "speedup_vs_loop": t_seq / t_scan,
            }
        )
    return rows


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=3, quick="1 seed, 100 units, short series and timings")
    a = parse(ap, argv)
    seeds = 1 if a.quick else a.seeds
    n0 = 100 if a.quick else 500
    n_train, n_test = (800, 400) if a.quick else (4000, 2000)
    runs = [forecast(s, n_train, n_test, n0) for s in range(seeds)]
    names = list(runs[0])
    mc = {
        n: [memory_capacity(_models(s, n0)[n], T=1500 if a.quick else 3000, seed=s) for s in range(seeds)]
        for n in names
    }
    print(f"Mackey-Glass NRMSE (mean ± sd over {seeds} seeds) and memory capacity (delays 1..100)")
    print(
        markdown_table(
            ["model", "1-step NRMSE", "84-step NRMSE", "memory capacity"],
            [[n, fmt([r[n][1] for r in runs], 4), fmt([r[n][84] for r in runs], 3), fmt(mc[n], 1)] for n in names],
        )
    )
    tim = timing((500, 2000) if a.quick else (1000, 4000, 16000), 100 if a.quick else 500)
    print(f"\nwall-clock, 1 thread, {100 if a.quick else 500} units (median of 3)")
    print(
        markdown_table(
            [
                "T",
                "ESN (tanh loop) s",
                "ParalESN loop s",
                "ParalESN blocked scan s",
                "ParalESN doubling scan s",
                "scan vs ESN",
                "scan vs loop",
            ],
            [
                [
                    r["T"],
                    f"{r['esn_s']:.3f}",
                    f"{r['paralesn_loop_s']:.3f}",
                    f"{r['paralesn_scan_s']:.3f}",
                    f"{r['paralesn_doubling_s']:.3f}",
                    f"{r['speedup_vs_esn']:.1f}x",
                    f"{r['speedup_vs_loop']:.1f}x",
                ]
                for r in tim
            ],
        )
    )
    out = {"forecast": runs, "memory_capacity": mc, "timing": tim}
    print(json.dumps({"timing": tim}))
    return out


if __name__ == "__main__":
    main()
