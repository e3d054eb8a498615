"""StreamATE demo: a 50k-unit stream whose propensity and outcome functions both shift halfway; ATE error of
the coreset-balancing estimator vs online IPW, online regression adjustment and full-data kernel balancing.

    python -m interp.contrib.causal_stats.experiments.stream_ate [--seeds 3] [--n 50000] [--quick]

Stream (our generator after the catalog): x ~ N(0, I_5), s = unit index / n. Propensity logit
0.8 x0 - 0.5 x1 before the shift, -0.8 x0 + 0.8 x2 + 0.5 after. Outcome μ0(x) = x0 + 0.5 x1² (+ 1 + x2
after the shift), effect τ(x) = 1 + 0.5 x0 before, 2 - 0.5 x0 after; noise N(0, 1). Estimand: the sample ATE
of all units so far (mean τ_i), read at the shift (n/2) and at the end (post-shift). Balancing features:
z = (x, c s) (c = `--time-scale`, default 3) through 128 random Fourier features (lengthscale 2); coreset blocks of 64
rows.
Baselines: online IPW (Hajek; SGD logistic propensity on [1, x], lr 0.05, clipped to [0.02, 0.98]);
online regression adjustment (recursive least squares per arm on [1, x, s]); full-data kernel balancing
(the same weights solved on every unit: the oracle the coresets approximate).
"""

from __future__ import annotations

import json
import time

import numpy as np

from interp.contrib.causal_stats.stream_ate import RandomFourier, StreamATE, balance_weights
from interp.contrib.experiment import experiment_parser
from interp.contrib.report import fmt, markdown_table


def make_stream(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5))
    s = np.arange(n) / n
    after = s >= 0.5
    logit = np.where(after, -0.8 * x[:, 0] + 0.8 * x[:, 2] + 0.5, 0.8 * x[:, 0] - 0.5 * x[:, 1])
    t = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(int)
    mu0 = x[:, 0] + 0.5 * x[:, 1] ** 2 + after * (1 + x[:, 2])
    tau = np.where(after, 2 - 0.5 * x[:, 0], 1 + 0.5 * x[:, 0])
    y = mu0 + t * tau + rng.normal(size=n)
    return x, s, t, y, tau


def online_ipw(x, t, y, lr: float = 0.05) -> np.ndarray:
    """Running Hajek IPW estimate after each unit (propensity predicted before the unit updates it)."""
    w = np.zeros(x.shape[1] + 1)
    sums = np.zeros(4)  # Σ t y / e, Σ t / e, Σ (1-t) y / (1-e), Σ (1-t) / (1-e)
    out = np.empty(len(y))
    for i in range(len(y)):
        f = np.concatenate([[1.0], x[i]])
        e = float(np.clip(1 / (1 + np.exp(-f @ w)), 0.02, 0.98))
        if t[i]:
            sums[:2] += (y[i] / e, 1 / e)
        else:
            sums[2:] += (y[i] / (1 - e), 1 / (1 - e))
        out[i] = (sums[0] / sums[1] if sums[1] else 0.0) - (sums[2] / sums[3] if sums[3] else 0.0)
        w += lr * (t[i] - 1 / (1 + np.exp(-f @ w))) * f
    return out


def online_regression(x, s, t, y, checkpoints) -> dict[int, float]:
    """Per-arm recursive least squares on [1, x, s]; ATE = mean over all units so far of μ̂1 - μ̂0 (linear:
    the fitted difference at the running mean feature)."""
    d = x.shape[1] + 2
    p = [np.eye(d) * 1e3, np.eye(d) * 1e3]
    b = [np.zeros(d), np.zeros(d)]
    mean = np.zeros(d)
    out = {}
    for i in range(len(y)):
        f = np.concatenate([[1.0], x[i], [s[i]]])
        mean += (f - mean) / (i + 1)
        a = t[i]
        pf = p[a] @ f
        k = pf / (1 + f @ pf)
        b[a] = b[a] + k * (y[i] - f @ b[a])
        p[a] = p[a] - np.outer(k, pf)
        if i + 1 in checkpoints:
            out[i + 1] = float(mean @ (b[1] - b[0]))
    return out


def full_balancing(rff: RandomFourier, z, t, y, alpha: float) -> float:
    phi = rff(z)
    target = phi.mean(0)
    means = []
    for arm in (0, 1):
        m = t == arm
        w = balance_weights(phi[m], target, alpha * m.sum() / 64, iters=300)  # same penalty per coreset-sized block
        means.append(float(w @ y[m]))
    return means[1] - means[0]


def trial(n: int, seed: int, oracle: bool, time_scale: float = 3.0) -> dict:
    x, s, t, y, tau = make_stream(n, seed)
    z = np.concatenate([x, time_scale * s[:, None]], 1)
    checks = (n // 2, n)
    truth = {c: float(tau[:c].mean()) for c in checks}
    est = StreamATE(d_in=6, n_features=128, block=64, lengthscale=2.0, alpha=1e-3, seed=seed)
    res = {"truth": truth, "StreamATE": {}, "memory": 0}
    t0 = time.process_time()
    start = 0
    for c in checks:
        est.update_many(z[start:c], t[start:c], y[start:c])
        start = c
        res["StreamATE"][c] = est.estimate()
        res["memory"] = max(res["memory"], est.arms[0].max_rows + est.arms[1].max_rows)
    res["stream_cpu_s"] = time.process_time() - t0
    ipw = online_ipw(x, t, y)
    res["online IPW"] = {c: float(ipw[c - 1]) for c in checks}
    res["online regression"] = online_regression(x, s, t, y, set(checks))
    if oracle:
        res["full-data balancing"] = {c: full_balancing(est.rff, z[:c], t[:c], y[:c], 1e-3) for c in checks}
    res["naive difference"] = {c: float(y[:c][t[:c] == 1].mean() - y[:c][t[:c] == 0].mean()) for c in checks}
    return res


METHODS = ("naive difference", "online IPW", "online regression", "StreamATE", "full-data balancing")


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__,
        seeds=3,
        n=50_000,
        time_scale=(3.0, "weight of stream time s in the balancing features"),
        quick="1 seed, 4,000 units, no full-data oracle",
    )
    a = ap.parse_args(argv)
    if a.seeds < 1 or a.n < 256:
        ap.error("--seeds must be positive and --n at least 256")
    seeds, n = (1, 4000) if a.quick else (a.seeds, a.n)
    runs = [trial(n, s, oracle=not a.quick, time_scale=a.time_scale) for s in range(seeds)]
    rows = []
    for m in METHODS:
        if m not in runs[0]:
            continue
        rows.append([m] + [fmt([abs(r[m][c] - r["truth"][c]) for r in runs]) for c in (n // 2, n)])
    print(
        f"absolute ATE error ({seeds} seeds, n = {n}; true SATE at the shift "
        f"{fmt([r['truth'][n // 2] for r in runs])}, at the end {fmt([r['truth'][n] for r in runs])})"
    )
    print(markdown_table(["estimator", "at the shift (n/2)", "end of stream (post-shift)"], rows))
    print(
        f"StreamATE memory: at most {max(r['memory'] for r in runs)} rows over both arms (stream of {n}); "
        f"CPU {fmt([r['stream_cpu_s'] for r in runs], 1)} s per stream"
    )
    return json.loads(json.dumps(runs, default=str))


if __name__ == "__main__":
    main()
