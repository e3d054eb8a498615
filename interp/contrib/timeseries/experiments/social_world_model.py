"""SWM demo: a latent state-space world model trained by ELBO on event-driven belief series, against
persistence and an AR model, in the windows right after an event.

    python -m interp.contrib.timeseries.experiments.social_world_model [--seeds 3] [--steps 600] [--quick]

Catalog setting: 6 belief series (logit prices), event embeddings e_t ∈ R^16 (an event with probability
0.1 per step, else 0) that move the series' targets through sparse loadings (each series loads on 2 of
the 16 dimensions): u_t = u_{t-1} + L e_t, and beliefs drift to the target, b_t = b_{t-1} + 0.4 (u_t - b_{t-1})
+ N(0, 0.05²). 256 training and 128 test sequences of 60 steps. Forecast horizon 5 from t = 40..54,
given the upcoming event embeddings (as the paper's model reads the news); RMSE on windows with an event
at the first forecast step ("post-event") and on all windows. The loadings are never given to the model.
"""

from __future__ import annotations

import argparse
import json

import torch

from interp.contrib.report import fmt, markdown_table
from interp.contrib.timeseries.social_world_model import SWM, SWMConfig, ar_forecast, fit_ar, persistence, train_swm

K, D, T, H = 6, 16, 60, 5


def generate(n: int, seed: int, L: torch.Tensor | None = None):
    g = torch.Generator().manual_seed(seed)
    if L is None:
        L = torch.zeros(K, D)
        for k in range(K):
            idx = torch.randperm(D, generator=g)[:2]
            L[k, idx] = torch.randn(2, generator=g)
    ev = (torch.rand(n, T, 1, generator=g) < 0.1).float() * torch.randn(n, T, D, generator=g) / D**0.5 * 2
    u = torch.cumsum(ev @ L.T, 1)
    b = torch.zeros(n, T, K)
    prev = torch.zeros(n, K)
    for t in range(T):
        prev = prev + 0.4 * (u[:, t] - prev) + 0.05 * torch.randn(n, K, generator=g)
        b[:, t] = prev
    return b, ev, L


def trial(seed: int, steps: int, n_train: int, n_test: int) -> dict:
    btr, etr, L = generate(n_train, seed)
    bte, ete, _ = generate(n_test, seed + 1000, L)
    torch.manual_seed(seed)
    model = SWM(SWMConfig(n_series=K, d_event=D))
    trace = train_swm(model, btr, etr, steps, seed=seed)
    coef = fit_ar(btr)
    errs = {m: {"post-event": [], "all": []} for m in ("persistence", "AR(3) on differences", "SWM (ELBO)")}
    for t0 in range(40, T - H):
        hist, fut = bte[:, :t0], bte[:, t0 : t0 + H]
        event = ete[:, t0].abs().sum(1) > 0
        preds = {"persistence": persistence(hist, H), "AR(3) on differences": ar_forecast(hist, coef, H),
                 "SWM (ELBO)": model.forecast(hist, ete[:, : t0 + H], H)}
        for m, p in preds.items():
            se = ((p - fut) ** 2).mean((1, 2))
            errs[m]["all"].append(se)
            errs[m]["post-event"].append(se[event])
    out = {m: {k: float(torch.cat(v).mean().sqrt()) for k, v in d.items()} for m, d in errs.items()}
    out["elbo_first_last"] = (trace[0], trace[-1])
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--quick", action="store_true", help="1 seed, 30 steps, 64 / 32 sequences")
    a = ap.parse_args(argv)
    if a.seeds <= 0 or a.steps <= 0:
        raise ValueError("--seeds and --steps must be positive")
    torch.set_num_threads(1)
    seeds, steps, ntr, nte = (1, 30, 64, 32) if a.quick else (a.seeds, a.steps, 256, 128)
    runs = [trial(s, steps, ntr, nte) for s in range(seeds)]
    methods = ("persistence", "AR(3) on differences", "SWM (ELBO)")
    print(f"belief forecasts, horizon {H}: RMSE (mean ± sd over {seeds} seeds)")
    print(markdown_table(["model", "post-event windows", "all windows"],
                         [[m, fmt([r[m]["post-event"] for r in runs], 4), fmt([r[m]["all"] for r in runs], 4)] for m in methods]))
    print("ELBO first -> last step: " + "; ".join(f"{r['elbo_first_last'][0]:.2f} -> {r['elbo_first_last'][1]:.2f}" for r in runs))
    print(json.dumps(runs))
    return {"runs": runs}


if __name__ == "__main__":
    main()
