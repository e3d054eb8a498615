"""InfoGlobe demo: Fisher-Rao preservation and gene-group recovery vs PCA on log counts; and SmolLM2's
next-token distributions reduced on the square-root sphere.

    python -m interp.contrib.geometry.experiments.info_globe [--seeds 3] [--quick] [--no-lm] [--lm-samples 3]
        [--lm-only] [--model gemma3-270m]

Counts (catalog setting): 2,000 genes in 20 modules, 6 cell types with Dirichlet module activities,
3,000 cells, multinomial depth ~2,000 (x0.5-1.5). InfoGlobe: 20 groups, 400 Adam steps of 2,048 random
pairs. Baselines: PCA (20 components) of log1p counts-per-10k with angle (cosine) distances; a random
hard grouping into 20 groups (control). Metrics: Spearman correlation, over 20,000 random cell pairs,
between the true Fisher-Rao distance (of the generating proportions) and the embedded distance; the same
for the 15 cell-type centroid pairs; ARI of the hard gene groups vs the true modules.

SmolLM2 (`smollm2-135m` through `HookedModel`, stdlib-docs, 16 x 64 tokens, position 0 dropped):
each position's next-token distribution over the 1,023 most probable tokens (summed over positions)
plus one bin for the rest; InfoGlobe (20 groups) vs PCA of log-probabilities (20 components, angles).
Metric: Spearman between full-distribution Fisher-Rao distances and embedded distances over pairs.
`--model gemma3-270m` runs this part on another pretrained model (Gemma 3 270M, 262,144 tokens).
`--lm-samples N`: N data samples, sample s the corpus's documents shuffled with seed s and every fit (InfoGlobe,
k-means, the random grouping and pair draw) seeded with s; sample 0 is the one-sample run. Printed with InfoGlobe's
paired difference to each baseline over the samples.

Strong baselines (issue 42; `info_globe_baselines.py`), in both parts: k-means of the features' Hellinger
profiles into the same number of groups, aggregated as InfoGlobe aggregates (Fisher-Rao on the group
proportions); and Hellinger PCA (PCA of sqrt(p), as many components, Euclidean distances). Printed with
InfoGlobe's paired difference to each over the seeds.
"""

from __future__ import annotations

import json

import torch

from interp.contrib.common.ranks import spearman
from interp.contrib.experiment import experiment_parser, model_refusals, parse
from interp.contrib.geometry.info_globe import (
    InfoGlobe,
    angle_distances,
    fisher_rao,
    modular_counts,
    to_proportions,
)
from interp.contrib.geometry.info_globe_baselines import group_proportions, hellinger_pca, kmeans_groups
from interp.contrib.report import fmt, markdown_table, per_sample, stack_runs

METHODS = ("observed proportions (no reduction)", "InfoGlobe", "PCA log1p + angle", "random grouping")
STRONG = ("k-means groups", "Hellinger PCA")


def strong_rows(p: torch.Tensor, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The strong-baseline rows: (k-means groups [G], their group proportions [n, k], Hellinger PCA [n, k])."""
    groups = kmeans_groups(p, k, seed=seed)
    return groups, group_proportions(p, groups, k), hellinger_pca(p, k).float()


def pca(x: torch.Tensor, k: int) -> torch.Tensor:
    x = x - x.mean(0)
    _, _, vh = torch.linalg.svd(x, full_matrices=False)
    return x @ vh[:k].T


def pair_corr(true_d: torch.Tensor, d: torch.Tensor, i, j) -> float:
    return spearman(true_d[i, j], d[i, j])


def ari(a: torch.Tensor, b: torch.Tensor) -> float:
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(a.numpy(), b.numpy()))


def counts_trial(seed: int, quick: bool) -> dict[str, float]:
    n, g, k, t = (500, 300, 10, 6) if quick else (3000, 2000, 20, 6)
    counts, probs, ctype, module = modular_counts(n, g, k, t, depth=2000, seed=seed)
    p = to_proportions(counts)
    gen = torch.Generator().manual_seed(seed)
    i, j = torch.randint(n, (20000,), generator=gen), torch.randint(n, (20000,), generator=gen)
    true_d = fisher_rao(probs, probs)
    model = InfoGlobe(g, k, seed=seed).fit(p, steps=60 if quick else 400)
    with torch.no_grad():
        q = model.embed(p)
    rand_groups = torch.randint(k, (g,), generator=gen)
    q_rand = torch.zeros(n, k).index_add_(1, rand_groups, p)
    z = pca(torch.log1p(p * 1e4), k)
    km_groups, q_km, z_h = strong_rows(p, k, seed)
    ds = {
        METHODS[0]: fisher_rao(p, p),
        METHODS[1]: fisher_rao(q, q),
        METHODS[2]: angle_distances(z),
        METHODS[3]: fisher_rao(q_rand, q_rand),
        STRONG[0]: fisher_rao(q_km, q_km),
        STRONG[1]: torch.cdist(z_h, z_h),
    }
    out = {f"cells: {m}": pair_corr(true_d, d, i, j) for m, d in ds.items()}
    cent = lambda x: torch.stack([x[ctype == c].mean(0) for c in range(t)])  # noqa: E731
    ti, tj = torch.triu_indices(t, t, 1)
    true_c = fisher_rao(cent(probs), cent(probs))
    emb_c = {
        METHODS[1]: fisher_rao(cent(q), cent(q)),
        METHODS[2]: angle_distances(cent(z)),
        METHODS[3]: fisher_rao(cent(q_rand), cent(q_rand)),
        STRONG[0]: fisher_rao(cent(q_km), cent(q_km)),
        STRONG[1]: torch.cdist(cent(z_h), cent(z_h)),
    }
    out.update({f"types: {m}": spearman(true_c[ti, tj], d[ti, tj]) for m, d in emb_c.items()})
    out["gene-group ARI (InfoGlobe)"] = ari(model.hard_groups(), module)
    out["gene-group ARI (random)"] = ari(rand_groups, module)
    out[f"gene-group ARI ({STRONG[0]})"] = ari(km_groups, module)
    return out


def lm_trial(seed: int, model=None) -> dict[str, float]:
    """One data sample of a model's next-token distributions (SmolLM2 unless `model` is given): the corpus's
    documents shuffled with `seed`, the fits seeded with it."""
    import interp
    from interp.contrib.lm_features import bos_first
    from interp.data import resolve_corpus

    model = interp.load_model("smollm2-135m") if model is None else model
    corpus = resolve_corpus("stdlib-docs", model.tokenizer, ctx_len=64, max_tokens=64 * 16, seed=seed)
    with torch.no_grad():
        logits, _ = model.run_with_cache(bos_first(corpus.tokens, model.tokenizer), names=[], return_logits=True)
    probs = torch.softmax(logits[:, 1:].flatten(0, 1).double(), -1)
    top = probs.sum(0).argsort(descending=True)[:1023]
    rest = 1 - probs[:, top].sum(1, keepdim=True)
    p = torch.cat([probs[:, top], rest.clamp_min(0)], 1).float()
    p = p / p.sum(1, keepdim=True)
    n = len(p)
    gen = torch.Generator().manual_seed(seed)
    i, j = torch.randint(n, (20000,), generator=gen), torch.randint(n, (20000,), generator=gen)
    true_d = fisher_rao(probs.float(), probs.float())
    globe = InfoGlobe(p.shape[1], 20, seed=seed).fit(p, steps=400)
    with torch.no_grad():
        q = globe.embed(p)
    rand_groups = torch.randint(20, (p.shape[1],), generator=gen)
    q_rand = torch.zeros(n, 20).index_add_(1, rand_groups, p)
    _, q_km, z_h = strong_rows(p, 20, seed)
    return {
        "top-1024 proportions (no reduction)": pair_corr(true_d, fisher_rao(p, p), i, j),
        "InfoGlobe": pair_corr(true_d, fisher_rao(q, q), i, j),
        "PCA log-prob + angle": pair_corr(true_d, angle_distances(pca(p.clamp_min(1e-9).log(), 20)), i, j),
        "random grouping": pair_corr(true_d, fisher_rao(q_rand, q_rand), i, j),
        STRONG[0]: pair_corr(true_d, fisher_rao(q_km, q_km), i, j),
        STRONG[1]: pair_corr(true_d, torch.cdist(z_h, z_h), i, j),
    }


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__,
        seeds=3,
        quick="1 seed, 500 cells x 300 genes, 60 steps, no LM run",
        no_lm="skip the SmolLM2 run",
        lm_samples=1,
        lm_only=True,
        model=("smollm2-135m", "the pretrained model of the LM part (any spec `interp models` lists)"),
    )
    a = parse(ap, argv)
    out: dict = {}
    if not a.lm_only:
        out["counts"] = counts_part(a)
    if a.lm_only or not (a.quick or a.no_lm):
        out["smollm2" if a.model == "smollm2-135m" else a.model] = lm_part(a.lm_samples, a.model)
    return json.loads(json.dumps(out))


def counts_part(a) -> dict[str, list[float]]:
    """The synthetic-counts part: its table and InfoGlobe's paired differences to the baselines."""
    seeds = 1 if a.quick else a.seeds
    per = [counts_trial(s, a.quick) for s in range(seeds)]
    res = {k: [p[k] for p in per] for k in per[0]}
    print(f"synthetic counts: Spearman with the true Fisher-Rao distances, ARI of gene groups ({seeds} seeds)")
    print(markdown_table(["metric", "value"], [[k, fmt(v)] for k, v in res.items()]))
    paired = []
    for key in ("cells", "types", "gene-group ARI"):
        for b in STRONG + (METHODS[2],):
            mk, bk = (
                (f"{key}: InfoGlobe", f"{key}: {b}")
                if key != "gene-group ARI"
                else (f"{key} (InfoGlobe)", f"{key} ({b})")
            )
            if bk in res:
                d = [x - y for x, y in zip(res[mk], res[bk], strict=True)]
                paired.append([key, b, fmt(d), f"{sum(x > 0 for x in d)}/{len(d)}"])
    print("\nInfoGlobe minus each baseline, paired by seed (mean ± sd; seeds where InfoGlobe is higher)")
    print(markdown_table(["metric", "baseline", "InfoGlobe - baseline", "InfoGlobe higher"], paired))
    return res


def lm_part(n: int, model_name: str = "smollm2-135m") -> dict[str, list[float]]:
    """`lm_trial` on data samples 0 .. n-1 of `model_name`: the table, and with n > 1 the paired differences."""
    import interp

    model = interp.load_model(model_name)
    lm = stack_runs([lm_trial(s, model) for s in range(n)])
    print(
        f"\n{model_name} next-token distributions (1,024 rows): Spearman with full-vocabulary Fisher-Rao"
        + (f" (mean ± sd over {n} data samples)" if n > 1 else "")
    )
    rows = [[k, fmt(v), per_sample(v)] for k, v in lm.items()]
    print(markdown_table(["representation (20 dims unless noted)", "Spearman", "per sample"], rows))
    if n > 1:
        rows = []
        for b in (*STRONG, "PCA log-prob + angle"):
            d = [x - y for x, y in zip(lm["InfoGlobe"], lm[b], strict=True)]
            rows.append([b, fmt(d), f"{sum(x > 0 for x in d)}/{n}"])
        print(f"\nInfoGlobe minus each baseline on {model_name}, paired by data sample")
        print(markdown_table(["baseline", "InfoGlobe - baseline", "InfoGlobe higher"], rows))
    return lm


if __name__ == "__main__":
    with model_refusals():
        main()
