"""BayesAttn demo: mean-space attention heads vs the Bayes oracle, and QK metrics vs Fisher information.

Part A (synthetic). In-context estimation with K=8 fresh candidate symbols per sequence, d=4, n in [4, 64]
observations from a Gaussian (random covariance, condition number 10), Bernoulli or Poisson family. Models:
`MetricHeads` with 1, 2 or 4 heads, each a shared quadratic QK metric (logit -n/2 (xbar-mu)^T M_h (xbar-mu)),
values = the candidates, trained by MSE to the exact posterior mean (1500 Adam steps, batch 256).
Baseline: the Bayes oracle (the closed-form head, zero excess by construction); the no-attention control
is the sample mean xbar. Seeds: independent trainings (init and batches), evaluation sequences fixed.
We report the excess MSE over the oracle at n = 4 / 16 / 64, relative to the oracle's own risk E||posterior mean -
mu_true||^2,
and for 1 head the cosine between the learned metric and the Fisher information (the precision for the
Gaussian; the prior-averaged diagonal Fisher for Bernoulli / Poisson).
Claim: Gaussian excess -> 0 and cosine ~ 1; Bernoulli keeps a single-head gap that shrinks with heads.
Strong baseline (issue 42), beside every 1-head row: the same head with an isotropic metric M = c I (a
Euclidean soft nearest neighbour over the candidates, temperature tuned), c chosen from `ISO_GRID` (25 values
0.01-100) by MSE to the posterior mean on 20 tuning batches of 256 sequences drawn as in training (n uniform in
[4, 64]; generator seed 1000 + training seed): 25 candidates instead of 1500 gradient steps. It asks whether
learning the metric (the Fisher geometry) is what brings the head to the oracle.

Part B (real model, `--lm`). For each layer of smollm2-135m: the Frobenius cosine between each head's
symmetric pre-rotary QK metric (in RMS-normalised residual space) and the precision of the cached
normalised residual rows (the Fisher information of a Gaussian fit), against the same metric randomly
rotated (same spectrum, random orientation). `--lm-samples N` repeats it on N data samples (sample s: the
corpus's documents shuffled with seed s; sample 0 is the one-sample run) and prints the summary over them;
`--lm-only` skips Part A.

    python -m interp.contrib.mechanisms.experiments.bayes [--seeds 3] [--families gaussian,bernoulli,poisson]
        [--heads 1,2,4] [--quick] [--lm] [--lm-only] [--lm-samples 3]
"""

from __future__ import annotations

import json

import torch
from tqdm import tqdm

from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.mechanisms.bayes_attention import (
    MetricHeads,
    default_family,
    fisher_alignment,
    make_task,
    qk_metrics,
    qk_precision_alignment,
    train_heads,
)
from interp.contrib.report import fmt, markdown_table


def _prior_fisher(fam, d: int, g: torch.Generator) -> torch.Tensor:
    if fam.name == "gaussian":
        return fam.precision
    t = make_task(fam, 8, 1, 4096, d, g)
    return torch.stack([fam.fisher(m) for m in t["mus"].reshape(-1, d)[:4096]]).mean(0)


ISO_GRID = tuple(float(v) for v in torch.logspace(-2, 2, 25))
"""The isotropic baseline's metric scales c (M = c I)."""


def isotropic_head(fam, d: int, c: float) -> MetricHeads:
    """One head with metric M = c I (W = sqrt(c) I, output projection I)."""
    model = MetricHeads(d, 1)
    with torch.no_grad():
        model.W.copy_(c**0.5 * torch.eye(d)[None])
    return model


def tune_isotropic(fam, d: int, seed: int, n_symbols: int = 8, batches: int = 20, batch: int = 256) -> float:
    """The strong baseline's c: lowest MSE to the posterior mean over `ISO_GRID`, on tuning batches drawn as in
    training (n uniform in [4, 64])."""
    g = torch.Generator().manual_seed(1000 + seed)
    tasks = []
    for _ in range(batches):
        n = int(torch.randint(4, 65, (1,), generator=g))
        tasks.append(make_task(fam, n_symbols, n, batch, d, g))

    def loss(c: float) -> float:
        m = isotropic_head(fam, d, c)
        with torch.no_grad():
            return sum(float((m(t["x"], t["mus"]).double() - t["target"]).pow(2).sum(1).mean()) for t in tasks)

    return min(ISO_GRID, key=loss)


def synthetic(
    heads=(1, 2, 4),
    steps: int = 1500,
    ns=(4, 16, 64),
    d: int = 4,
    eval_batch: int = 4000,
    seeds: int = 3,
    families=("gaussian", "bernoulli", "poisson"),
) -> dict:
    """Per family and head count, over `seeds` independent trainings (init and training batches; the
    evaluation sequences are fixed): lists of one value per seed."""
    out = {}
    for name in families:
        fam = default_family(name, d)
        for h in tqdm(heads, desc=name):
            row: dict = {}
            for seed in range(seeds):
                model = train_heads(fam, h, d=d, steps=steps, seed=seed)
                iso = None
                if h == 1:
                    c = tune_isotropic(fam, d, seed)
                    iso = isotropic_head(fam, d, c)
                    row.setdefault("iso_c", []).append(c)
                g = torch.Generator().manual_seed(123)
                for n in ns:
                    t = make_task(fam, 8, n, eval_batch, d, g)
                    with torch.no_grad():
                        pred = model(t["x"], t["mus"]).double()
                        iso_pred = None if iso is None else iso(t["x"], t["mus"]).double()
                    truth = t["mus"][torch.arange(eval_batch), t["k"]]
                    oracle = float((t["target"] - truth).pow(2).sum(1).mean())
                    excess = float((pred - t["target"]).pow(2).sum(1).mean())
                    xbar = float((t["x"].mean(1) - t["target"]).pow(2).sum(1).mean())
                    cell = row.setdefault(f"n={n}", {})
                    vals = [
                        ("excess", excess),
                        ("oracle_risk", oracle),
                        ("rel_excess", excess / oracle),
                        ("xbar_excess", xbar),
                        ("xbar_rel_excess", xbar / oracle),
                    ]
                    if iso_pred is not None:
                        vals.append(("iso_rel_excess", float((iso_pred - t["target"]).pow(2).sum(1).mean()) / oracle))
                    for k, v in vals:
                        cell.setdefault(k, []).append(v)
                if h == 1:
                    fa = fisher_alignment(model.metric(0), _prior_fisher(fam, d, torch.Generator().manual_seed(7)))
                    for k, v in fa.items():
                        row.setdefault("fisher", {}).setdefault(k, []).append(v)
            out[f"{name}/{h} head{'s' if h > 1 else ''}"] = row
    return out


def lm(model_name: str = "smollm2-135m", n_seq: int = 16, n_random: int = 18, sample: int = 0, model=None) -> dict:
    """Part B on data sample `sample` (documents shuffled with that seed): per layer, the heads' cosines and
    the random rotations' mean and sd."""
    import interp
    from interp.data import resolve_corpus

    model = interp.load_model(model_name) if model is None else model
    corpus = resolve_corpus("stdlib-docs", model.tokenizer, ctx_len=128, max_tokens=128 * n_seq, seed=sample)
    names = [f"blocks.{l}.hook_resid_pre" for l in range(model.n_layers)]
    with torch.no_grad():
        _, cache = model.run_with_cache(corpus.tokens, names=names, return_logits=False)
    out = {}
    for layer in tqdm(range(model.n_layers), desc="layers"):
        x = cache[names[layer]][:, 1:].reshape(-1, model.d_model).double()  # drop position 0 (massive activations)
        u = x / x.pow(2).mean(-1, keepdim=True).sqrt()
        res = qk_precision_alignment(qk_metrics(model, layer), u, n_random=n_random, seed=layer)
        out[layer] = {
            "head_cosine_mean": sum(res["head_cosine"]) / len(res["head_cosine"]),
            "head_cosine_max": max(res["head_cosine"]),
            "head_cosine_min": min(res["head_cosine"]),
            "random_mean": res["random_rotation_cosine_mean"],
            "random_std": res["random_rotation_cosine_std"],
        }
    return out


def lm_summary(per_layer: dict) -> dict[str, float]:
    """One sample's Part B in three numbers: the mean cosine over all heads and layers, the rotated metrics'
    mean, and how many layers have a head above the rotation mean by 3 sd."""
    rows = list(per_layer.values())
    return {
        "head mean": sum(r["head_cosine_mean"] for r in rows) / len(rows),
        "rotated mean": sum(r["random_mean"] for r in rows) / len(rows),
        "layers with a head > rotation mean + 3 sd": sum(
            r["head_cosine_max"] > r["random_mean"] + 3 * r["random_std"] for r in rows
        ),
    }


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__, seeds=3, quick="300 steps, heads 1 and 2, one seed, smaller evaluation", lm_samples=1, lm_only=True
    )
    ap.add_argument("--lm", action="store_true", help="also run Part B on smollm2-135m")
    ap.add_argument("--families", default="gaussian,bernoulli,poisson", help="comma-separated families")
    ap.add_argument("--heads", default="1,2,4", help="comma-separated head counts")
    a = parse(ap, argv)
    fams = tuple(a.families.split(","))
    heads = tuple(int(h) for h in a.heads.split(","))
    if a.lm_only:
        return {"lm": lm_part(a)}
    if a.quick:
        syn = synthetic((1, 2), 300, eval_batch=1000, seeds=1, families=fams)
    else:
        syn = synthetic(heads, seeds=a.seeds, families=fams)
    result = {"synthetic": syn}
    print(json.dumps(result, indent=1))
    n_seeds = 1 if a.quick else a.seeds
    ns = [k for k in next(iter(syn.values())) if k.startswith("n=")]
    print(f"\nmean ± sd over {n_seeds} training seeds (the sample-mean row is the no-attention baseline)")
    print("\n| family / heads | " + " | ".join(f"excess / oracle risk, {n}" for n in ns) + " | cos(metric, Fisher) |")
    print("|---|" + "---|" * (len(ns) + 1))
    for key, row in syn.items():
        fish = f"{fmt(row['fisher']['cosine'])} (scale {fmt(row['fisher']['scale'], 2)})" if "fisher" in row else ""
        print(f"| {key} | " + " | ".join(fmt(row[n]["rel_excess"], 4) for n in ns) + f" | {fish} |")
        if key.endswith("/1 head"):
            cells = " | ".join(fmt(row[n]["xbar_rel_excess"][0], 4) for n in ns)
            print(f"| {key.split('/')[0]}/sample mean | {cells} |  |")
            cells = " | ".join(fmt(row[n]["iso_rel_excess"], 4) for n in ns)
            cs = ", ".join(f"{c:.3g}" for c in row["iso_c"])
            print(f"| {key.split('/')[0]}/isotropic c·I, tuned c (strong baseline) | {cells} | c = {cs} |")
            diff = [a - b for a, b in zip(row[ns[-1]]["rel_excess"], row[ns[-1]]["iso_rel_excess"])]
            lower = sum(v < 0 for v in diff)
            fam_name = key.split("/")[0]
            cells = f"|  |  | {fmt(diff, 4)} | lower {lower}/{n_seeds} |"
            print(f"| {fam_name}/learned - isotropic, {ns[-1]}, paired {cells}")
    for key, row in syn.items():
        if n_seeds > 1:
            print(f"{key}, {ns[-1]} per seed: " + ", ".join(f"{v:.4f}" for v in row[ns[-1]]["rel_excess"]))
    if a.lm:
        result["lm"] = lm_part(a)
    return json.loads(json.dumps(result))


def lm_part(a) -> dict:
    """Part B on `a.lm_samples` data samples: sample 0's per-layer table, then the summary per sample."""
    import interp

    model = interp.load_model("smollm2-135m")
    per = [lm(n_seq=4 if a.quick else 16, sample=s, model=model) for s in range(a.lm_samples)]
    print("\n| layer | mean cos(QK metric, precision) over heads | min / max | random rotation mean +- std |")
    print("|---|---|---|---|")
    for layer, r in per[0].items():
        print(
            f"| {layer} | {r['head_cosine_mean']:.3f} | {r['head_cosine_min']:.3f} / {r['head_cosine_max']:.3f} | "
            f"{r['random_mean']:.3f} +- {r['random_std']:.3f} |"
        )
    summaries = [lm_summary(p) for p in per]
    print("\nover all heads and layers, per data sample (sample s = documents shuffled with seed s)")
    cols = list(summaries[0])
    rows = [[s, *(f"{v[c]:.3f}" if isinstance(v[c], float) else v[c] for c in cols)] for s, v in enumerate(summaries)]
    if len(per) > 1:
        rows.append([f"mean ± sd ({len(per)})", *(fmt([float(v[c]) for v in summaries]) for c in cols)])
    print(markdown_table(["sample", *cols], rows))
    return per[0] if len(per) == 1 else {"samples": per, "summary": summaries}


if __name__ == "__main__":
    main()
