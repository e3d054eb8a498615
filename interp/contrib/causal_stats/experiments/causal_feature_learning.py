"""CFL demo: fault detection in an unseen operating mode (CFL vs PCA-T², PLS, CCA = CFL with λ = 0), and an
invariant probe on SmolLM2's cached activations (corpora as environments).

    python -m interp.contrib.causal_stats.experiments.causal_feature_learning [--seeds 3] [--quick] [--no-lm]

Synthetic process (catalog, our generator): 20 variables x_t = A s_t + B u_t + m_e + 0.5 ε_t, with 3
AR(1) (0.9) quality latents s, 5 nuisance latents u (sd 3), and an operating-mode mean m_e = D μ_e
(D: random directions spanning a rank-1 subspace, which two
training modes identify, or rank 3, which they cannot; μ_e ~ N(0, 4² I)); a third setting adds the
mode's first mean coordinate to the targets (the target level is confounded with the operating mode); targets y_{t+1} =
C s_t + 0.1 noise (3 quality variables,
lag 1). Train on modes 0 and 1 (1,000 steps each); test on mode 2: 500 normal steps, then 500 steps with
a fault x += 3 A f (a unit f in the quality latents). 3 directions per method; T² threshold = the 99th
percentile of the training T². Metrics in the unseen mode: false-alarm rate (FAR) and fault-detection
rate (FDR).

Strong baseline (issue 42): a ridge soft sensor with fixed effects, the quality targets regressed on x after
centring both within each training mode, the penalty chosen by leave-one-mode-out CV from 13 values
(`RIDGE_LAMS`, relative to tr Σ_x / d; CFL's λ is fixed, so the baseline gets the larger budget), and Hotelling's
T² on its 3 predicted targets with the same threshold rule. λ → 0 on uncentred rows would be CCA's span, λ → ∞
PLS's; the centring is what uses the mode labels, as CFL's Σ_μ does. Paired CFL minus baseline per seed.

SmolLM2 (`smollm2-135m`, stdlib-docs / stdlib / pydoc-topics, 48 x 64 tokens each, position 0 dropped,
from `../../lm_features.py`; rows dropped by `interp/cache/rows.py`'s
`positions:0+norm-outliers:10`): x = `blocks.12.hook_resid_post` rows, y = log(position), environment =
corpus; leave one corpus out. One direction, a linear readout calibrated on the training corpora; metrics
on the held-out corpus: R² of log(position) and the mean shift of the held-out corpus along the
direction (in training sd).
"""

from __future__ import annotations

import json

import numpy as np

from interp.contrib.causal_stats.causal_feature_learning import (
    CFL,
    detection_rates,
    loeo_ridge_penalty,
    pca_directions,
    pls_directions,
    within_env_ridge,
)
from interp.contrib.experiment import experiment_parser
from interp.contrib.report import fmt, markdown_table

ROWS = "positions:0+norm-outliers:10"
"""Rows dropped from the SmolLM2 stores (`interp/cache/rows.py`'s default rule: the sink and massive-activation
rows)."""

RIDGE_LAMS = tuple(float(v) for v in np.logspace(-4, 2, 13))
"""The strong baseline's penalty grid (relative to tr Σ_x / d)."""
BASELINE = "ridge, within-mode, LOMO-CV λ (strong baseline)"


def process(seed: int, shift_rank: int = 1, confounded: bool = False, n_train: int = 1000, n_test: int = 500):
    rng = np.random.default_rng(seed)
    d = 20
    a, b, dm, c = (
        rng.normal(size=(d, 3)),
        rng.normal(size=(d, 5)),
        rng.normal(size=(d, shift_rank)),
        rng.normal(size=(3, 3)),
    )
    mus = rng.normal(scale=4.0, size=(3, shift_rank))

    def run(mode: int, n: int, fault: np.ndarray | None = None):
        s = np.zeros((n + 1, 3))
        for t in range(1, n + 1):
            s[t] = 0.9 * s[t - 1] + np.sqrt(1 - 0.81) * rng.normal(size=3)
        s = s[1:]
        if fault is not None:
            s = s + fault
        x = s @ a.T + 3.0 * rng.normal(size=(n, 5)) @ b.T + dm @ mus[mode] + 0.5 * rng.normal(size=(n, d))
        y = s @ c.T + 0.1 * rng.normal(size=(n, 3))
        if confounded:  # the quality level differs by operating mode: the mode shift predicts y in training
            y = y + mus[mode, 0]
        return x[:-1], y[1:]  # x_t paired with y_{t+1}

    tr = [run(0, n_train), run(1, n_train)]
    x = np.concatenate([t[0] for t in tr])
    y = np.concatenate([t[1] for t in tr])
    env = np.repeat([0, 1], n_train - 1)
    f = rng.normal(size=3)
    normal = run(2, n_test)[0]
    faulty = run(2, n_test, fault=3.0 * f / np.linalg.norm(f))[0]
    return x, y, env, normal, faulty


def monitors(x, y, env, lam: float, r: int = 3) -> tuple[dict[str, CFL], float]:
    """The monitors and the strong baseline's chosen penalty."""
    ridge_lam, _ = loeo_ridge_penalty(x, y, env, RIDGE_LAMS)
    return {
        "PCA-T²": CFL.from_directions(pca_directions(x, r), x),
        "PLS": CFL.from_directions(pls_directions(x, y, r), x),
        "CCA (CFL λ=0)": CFL.fit(x, y, env, r, lam=0.0),
        BASELINE: CFL.from_directions(within_env_ridge(x, y, env, ridge_lam), x),
        f"CFL λ={lam:g}": CFL.fit(x, y, env, r, lam=lam),
    }, ridge_lam


def synthetic(seeds: int, lam: float, shift_rank: int, confounded: bool = False) -> dict:
    res: dict[str, dict[str, list]] = {}
    for s in range(seeds):
        x, y, env, normal, faulty = process(s, shift_rank, confounded)
        mons, ridge_lam = monitors(x, y, env, lam)
        res.setdefault("_ridge_lam", {"λ": []})["λ"].append(ridge_lam)
        for name, m in mons.items():
            thr = float(np.quantile(m.t2(x), 0.99))
            far, fdr = detection_rates(m.t2(normal), m.t2(faulty), thr)
            res.setdefault(name, {"FAR": [], "FDR": []})
            res[name]["FAR"].append(far)
            res[name]["FDR"].append(fdr)
    return res


def smollm(lams=(0.0, 10.0, 100.0)) -> dict:
    from interp.cache.rows import row_filter
    from interp.contrib.lm_features import CORPORA, corpus_store, hook_name, load_lm, token_rows

    xs, ys, es, loaded = [], [], [], load_lm()  # its weights key the caches
    for e, corpus in enumerate(CORPORA):
        store = corpus_store(corpus, 48, 64, loaded=loaded)
        x, idx = token_rows(store, hook_name(12))
        keep = row_filter(ROWS, store, hook_name(12)).keep_tensor(x, idx["pos"])
        x, idx = x[keep], {k: v[keep] for k, v in idx.items()}
        xs.append(x.double().numpy()), ys.append(np.log(idx["pos"].double().numpy())), es.append(np.full(len(x), e))
    x, y, env = np.concatenate(xs), np.concatenate(ys), np.concatenate(es)
    out: dict[str, dict[str, list]] = {}
    for held in range(len(CORPORA)):
        tr, te = env != held, env == held
        mu, sd = x[tr].mean(0), x[tr].std(0) + 1e-6
        xt, xe = (x[tr] - mu) / sd, (x[te] - mu) / sd
        for lam in lams:
            m = CFL.fit(xt, y[tr, None], env[tr], 1, lam=lam, ridge=1e-3)
            zt, ze = m.transform(xt)[:, 0], m.transform(xe)[:, 0]
            coef = np.polyfit(zt, y[tr], 1)
            pred = np.polyval(coef, ze)
            r2 = 1 - ((pred - y[te]) ** 2).mean() / y[te].var()
            shift = abs(ze.mean() - zt.mean()) / zt.std()
            row = out.setdefault(f"λ={lam:g}", {"held-out R²": [], "env shift (sd)": []})
            row["held-out R²"].append(float(r2))
            row["env shift (sd)"].append(float(shift))
    return out


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__,
        seeds=3,
        lam=(10.0, "CFL's invariance weight λ"),
        quick="1 seed, no LM run",
        no_lm="skip the SmolLM2 probe run",
    )
    a = ap.parse_args(argv)
    if a.seeds < 1 or a.lam < 0:
        ap.error("--seeds must be positive and --lam non-negative")
    seeds = 1 if a.quick else a.seeds
    out = {}
    for rank, conf in ((1, False), (3, False), (1, True)):
        syn = synthetic(seeds, a.lam, rank, conf)
        print(
            f"synthetic process, unseen operating mode, mode means in a rank-{rank} subspace"
            f"{', target level confounded with the mode' if conf else ''} ({seeds} seeds; threshold = training 99th "
            "percentile)"
        )
        cfl, base = syn[f"CFL λ={a.lam:g}"], syn[BASELINE]
        paired = {m: [c - b for c, b in zip(cfl[m], base[m])] for m in ("FAR", "FDR")}
        rows = [[k, fmt(v["FAR"]), fmt(v["FDR"])] for k, v in syn.items() if not k.startswith("_")]
        rows.append(
            [
                "CFL - strong baseline, paired",
                f"{fmt(paired['FAR'])} (lower {sum(v < 0 for v in paired['FAR'])}/{seeds})",
                f"{fmt(paired['FDR'])} (higher {sum(v > 0 for v in paired['FDR'])}/{seeds})",
            ]
        )
        print(markdown_table(["monitor", "false-alarm rate", "fault-detection rate"], rows))
        print("strong baseline's λ per seed:", [f"{v:.2g}" for v in syn["_ridge_lam"]["λ"]])
        out[f"synthetic_rank{rank}" + ("_confounded" if conf else "")] = syn
    if not (a.quick or a.no_lm):
        lm = smollm()
        print("\nsmollm2-135m layer 12, y = log(position), leave one corpus out (3 folds)")
        print(
            markdown_table(
                ["direction", "held-out R²", "held-out corpus shift (sd)"],
                [[k, fmt(v["held-out R²"]), fmt(v["env shift (sd)"])] for k, v in lm.items()],
            )
        )
        print("per held-out corpus (R²):", {k: [round(r, 3) for r in v["held-out R²"]] for k, v in lm.items()})
        out["smollm2"] = lm
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    main()
