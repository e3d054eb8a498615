"""SWM demo: a latent state-space world model trained by ELBO on event-driven belief series, against
persistence and an AR model, in the windows right after an event.

    python -m interp.contrib.timeseries.experiments.social_world_model [--seeds 3] [--steps 600] [--quick]

Catalog setting: 6 belief series (logit prices), event embeddings e_t ∈ R^16 (an event with probability
0.1 per step, else 0) that move the series' targets through sparse loadings (each series loads on 2 of
the 16 dimensions): u_t = u_{t-1} + L e_t, and beliefs drift to the target, b_t = b_{t-1} + 0.4 (u_t - b_{t-1})
+ N(0, 0.05²). 256 training and 128 test sequences of 60 steps. Forecast horizon 5 from t = 40..54,
given the upcoming event embeddings (as the paper's model reads the news); RMSE on windows with an event
at the first forecast step ("post-event") and on all windows. The loadings are never given to the model.

Strong baseline (issue 42): "ARX ridge", persistence and AR given the events too: one direct ridge regression
from the last level, the last 3 differences of every series and the event embeddings from t - 3 to the end of
the horizon (the events the world model reads) to the 5 future changes of every series, fit on all training
windows, its penalty by 5-fold CV over training sequences from ARX_LAMS (synthetic table only). Printed: SWM
minus it, post-event RMSE paired by seed.
"""

from __future__ import annotations

import json

import torch

from interp.contrib.common.ridge import ridge as ridge_weights
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.report import fmt, markdown_table
from interp.contrib.timeseries.social_world_model import SWM, SWMConfig, ar_forecast, fit_ar, persistence, train_swm

K, D, T, H = 6, 16, 60, 5
METHODS = ("persistence", "AR(3) on differences", "SWM (ELBO)", "ARX ridge, events seen, CV (strong baseline)")


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


ARX_LAGS, ARX_LAMS = 3, (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


def arx_features(b: torch.Tensor, e: torch.Tensor, t0: int) -> torch.Tensor:
    """[n, features] for forecasting b[:, t0 : t0 + H] from b[:, :t0] and e[:, : t0 + H]: the last level, the
    last ARX_LAGS differences, the event embeddings from t0 - ARX_LAGS to t0 + H - 1, and a bias."""
    if t0 < ARX_LAGS + 1 or t0 + H > e.shape[1]:
        raise ValueError(f"t0={t0} needs {ARX_LAGS + 1} past steps and {H} future event steps")
    diffs = [b[:, t0 - j] - b[:, t0 - j - 1] for j in range(1, ARX_LAGS + 1)]
    ev = e[:, t0 - ARX_LAGS : t0 + H].flatten(1)
    return torch.cat([b[:, t0 - 1], *diffs, ev, torch.ones(len(b), 1)], 1).double()


def _arx_rows(b, e, seqs):
    xs, ys = [], []
    for t0 in range(ARX_LAGS + 1, b.shape[1] - H + 1):
        xs.append(arx_features(b[seqs], e[seqs], t0))
        ys.append((b[seqs, t0 : t0 + H] - b[seqs, t0 - 1 : t0]).flatten(1).double())
    return torch.cat(xs), torch.cat(ys)


def fit_arx(b: torch.Tensor, e: torch.Tensor, folds: int = 5) -> tuple[torch.Tensor, float]:
    """Ridge weights [features, H * K] of the ARX baseline and the penalty chosen by `folds`-fold CV over
    sequences."""
    n = len(b)
    err = dict.fromkeys(ARX_LAMS, 0.0)
    for f in range(folds):
        test = torch.zeros(n, dtype=torch.bool)
        test[f * n // folds : (f + 1) * n // folds] = True
        xtr, ytr = _arx_rows(b, e, ~test)
        xte, yte = _arx_rows(b, e, test)
        for lam in ARX_LAMS:
            err[lam] += float((xte @ ridge_weights(xtr, ytr, lam) - yte).pow(2).sum())
    lam = min(ARX_LAMS, key=err.get)
    x, y = _arx_rows(b, e, torch.ones(n, dtype=torch.bool))
    return ridge_weights(x, y, lam), lam


def arx_forecast(b_hist: torch.Tensor, e: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """[n, H, K] forecast from b_hist [n, t0, K] and the events e [n, >= t0 + H, D]."""
    t0 = b_hist.shape[1]
    delta = (arx_features(b_hist, e[:, : t0 + H], t0) @ w).float().view(len(b_hist), H, K)
    return b_hist[:, -1:] + delta


def trial(seed: int, steps: int, n_train: int, n_test: int) -> dict:
    btr, etr, L = generate(n_train, seed)
    bte, ete, _ = generate(n_test, seed + 1000, L)
    torch.manual_seed(seed)
    model = SWM(SWMConfig(n_series=K, d_event=D))
    trace = train_swm(model, btr, etr, steps, seed=seed)
    coef = fit_ar(btr)
    w_arx, lam = fit_arx(btr, etr)
    errs = {m: {"post-event": [], "all": []} for m in METHODS}
    for t0 in range(40, T - H):
        hist, fut = bte[:, :t0], bte[:, t0 : t0 + H]
        event = ete[:, t0].abs().sum(1) > 0
        preds = {
            "persistence": persistence(hist, H),
            "AR(3) on differences": ar_forecast(hist, coef, H),
            "SWM (ELBO)": model.forecast(hist, ete[:, : t0 + H], H),
            METHODS[3]: arx_forecast(hist, ete, w_arx),
        }
        for m, p in preds.items():
            se = ((p - fut) ** 2).mean((1, 2))
            errs[m]["all"].append(se)
            errs[m]["post-event"].append(se[event])
    out = {m: {k: float(torch.cat(v).mean().sqrt()) for k, v in d.items()} for m, d in errs.items()}
    out["elbo_first_last"] = (trace[0], trace[-1])
    out["arx penalty"] = lam
    return out


TOPICS = ("interest rates", "oil prices", "the unemployment rate", "tech stocks", "house prices", "the price of gold")
UP = ("rise sharply", "surge", "climb", "jump", "go up")
DOWN = ("fall sharply", "plunge", "drop", "slide", "go down")
HELD_OUT = ("jump", "slide")  # verbs only seen at test time


def sentences():
    """(texts, shift [n, K], held-out mask): 'Analysts expect {topic} to {verb}.' moves series `topic` by ±1."""
    texts, shift, held = [], [], []
    for k, topic in enumerate(TOPICS):
        for verbs, sign in ((UP, 1.0), (DOWN, -1.0)):
            for v in verbs:
                texts.append(f"Analysts expect {topic} to {v}.")
                row = torch.zeros(K)
                row[k] = sign
                shift.append(row)
                held.append(v in HELD_OUT)
    return texts, torch.stack(shift), torch.tensor(held)


def smollm_sentence_embeddings(texts, layer: int = 12, dims: int = D) -> torch.Tensor:
    """Mean of SmolLM2's `blocks.{layer}.hook_resid_post` over each sentence (position 0 dropped), reduced to
    `dims` principal components and standardised."""
    from interp.contrib.lm_features import hook_name, load_lm

    model = load_lm()
    rows = []
    for t in texts:
        _, cache = model.run_with_cache(t, names=[hook_name(layer)], return_logits=False)
        rows.append(cache[hook_name(layer)][0, 1:].float().mean(0))
    X = torch.stack(rows)
    X = X - X.mean(0)
    _, _, vh = torch.linalg.svd(X, full_matrices=False)
    Z = X @ vh[:dims].T
    return Z / Z.std(0)


def generate_text(n: int, seed: int, emb: torch.Tensor, shift: torch.Tensor, allowed: torch.Tensor):
    """Belief series whose events are sentences (indices in `allowed`); the model sees `emb` of the sentence."""
    g = torch.Generator().manual_seed(seed)
    has = torch.rand(n, T, generator=g) < 0.1
    idx = allowed[torch.randint(0, len(allowed), (n, T), generator=g)]
    ev = torch.where(has.unsqueeze(2), emb[idx], torch.zeros(()))
    jumps = torch.where(has.unsqueeze(2), shift[idx], torch.zeros(()))
    u = torch.cumsum(jumps, 1)
    b = torch.zeros(n, T, K)
    prev = torch.zeros(n, K)
    for t in range(T):
        prev = prev + 0.4 * (u[:, t] - prev) + 0.05 * torch.randn(n, K, generator=g)
        b[:, t] = prev
    return b, ev


def lm_trial(seed: int, steps: int, emb_lm: torch.Tensor, shift, held) -> dict:
    """Train on sentences with the seen verbs, test on sentences with held-out verbs only."""
    seen, unseen = torch.nonzero(~held).flatten(), torch.nonzero(held).flatten()
    emb_rand = torch.randn(emb_lm.shape, generator=torch.Generator().manual_seed(seed + 7))
    out = {}
    for name, emb in (("SWM, SmolLM2 event embeddings", emb_lm), ("SWM, random embedding per sentence", emb_rand)):
        btr, etr = generate_text(256, seed, emb, shift, seen)
        bte, ete = generate_text(128, seed + 1000, emb, shift, unseen)
        torch.manual_seed(seed)
        model = SWM(SWMConfig(n_series=K, d_event=D))
        train_swm(model, btr, etr, steps, seed=seed)
        coef = fit_ar(btr)
        errs = {name: [], "persistence": [], "AR(3) on differences": []}
        for t0 in range(40, T - H):
            hist, fut = bte[:, :t0], bte[:, t0 : t0 + H]
            ev = ete[:, t0].abs().sum(1) > 0
            preds = {
                name: model.forecast(hist, ete[:, : t0 + H], H),
                "persistence": persistence(hist, H),
                "AR(3) on differences": ar_forecast(hist, coef, H),
            }
            for m, p in preds.items():
                errs[m].append(((p - fut) ** 2).mean((1, 2))[ev])
        for m, v in errs.items():
            out[m] = float(torch.cat(v).mean().sqrt())
    return out


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=3, steps=600, quick="1 seed, 30 steps, 64 / 32 sequences")
    ap.add_argument(
        "--lm", action="store_true", help="also: events as sentences encoded by SmolLM2, held-out verbs at test"
    )
    a = parse(ap, argv)
    if a.seeds <= 0 or a.steps <= 0:
        raise ValueError("--seeds and --steps must be positive")
    seeds, steps, ntr, nte = (1, 30, 64, 32) if a.quick else (a.seeds, a.steps, 256, 128)
    runs = [trial(s, steps, ntr, nte) for s in range(seeds)]
    methods = METHODS
    print(f"belief forecasts, horizon {H}: RMSE (mean ± sd over {seeds} seeds)")
    print(
        markdown_table(
            ["model", "post-event windows", "all windows"],
            [[m, fmt([r[m]["post-event"] for r in runs], 4), fmt([r[m]["all"] for r in runs], 4)] for m in methods],
        )
    )
    print(
        "ELBO first -> last step: "
        + "; ".join(f"{r['elbo_first_last'][0]:.2f} -> {r['elbo_first_last'][1]:.2f}" for r in runs)
    )
    d = [r["SWM (ELBO)"]["post-event"] - r[METHODS[3]]["post-event"] for r in runs]
    print(
        f"SWM - ARX ridge, post-event RMSE paired by seed: {fmt(d, 4)} (SWM lower {sum(v < 0 for v in d)}/{seeds}); "
        f"ARX penalties {[r['arx penalty'] for r in runs]}"
    )
    out = {"runs": runs}
    if a.lm and not a.quick:
        texts, shift, held = sentences()
        emb = smollm_sentence_embeddings(texts)
        lm = [lm_trial(s, steps, emb, shift, held) for s in range(seeds)]
        cols = [
            "SWM, SmolLM2 event embeddings",
            "SWM, random embedding per sentence",
            "persistence",
            "AR(3) on differences",
        ]
        print(
            f"\nevents as sentences ({len(texts)}; test events use only the held-out verbs {HELD_OUT}): post-event "
            f"RMSE, {seeds} seeds"
        )
        print(markdown_table(cols, [[fmt([r[c] for r in lm], 4) for c in cols]]))
        out["smollm2"] = lm
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
