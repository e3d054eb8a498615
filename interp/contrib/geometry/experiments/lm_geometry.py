"""RicciFlow and neural-collapse diagnostics on a real LM's cached residual stream (smollm2-135m).

Data: `stdlib-docs` text (32 sequences x 128 tokens). Rows: token positions (not the first of a sequence,
which carries massive activations) whose *next* token is one of the K most frequent next tokens, at most
`per_class` rows per class; the class label is that next token. Baseline: the same architecture with
random weights (seeded), and for Ricci also the trained model with each layer's rows shuffled (which
breaks the point correspondence between layers).

- Ricci: kNN graphs (k=10) of each layer's `resid_post`, RMS-normalised; global / mean local / edge
  Ricci-evolution coefficients; label modularity at the first, middle and last layer.
- Collapse: NC1 of the RMS-normalised `resid_post` at each layer; at the output (`ln_final.hook_normalized`
  with the unembedding rows of the K tokens as classifier) NC1, NC2, NC3, and the Gauss-Newton spectrum
  check (K*d = 3456 dims) of the K-way softmax restricted to those tokens.

Data samples (`--lm-samples N`): sample s shuffles the corpus's documents with seed s before they are cut into
sequences and initialises the random twin with seed s; the rows are then selected as above from that sample's
own most frequent next tokens. Sample 0 is the one-sample run; with N > 1 a mean ± sd table over the samples
follows the per-sample JSON.

    python -m interp.contrib.geometry.experiments.lm_geometry [--model smollm2-135m] [--lm-samples 3] [--quick]
"""

from __future__ import annotations

import json

import torch

import interp
from interp import HookedModel
from interp.cache import ActivationCache
from interp.contrib.experiment import experiment_parser, model_refusals, parse
from interp.contrib.geometry.neural_collapse import nc_metrics, spectrum_check
from interp.contrib.geometry.ricci_flow import ricci_flow
from interp.contrib.lm_features import bos_first
from interp.contrib.report import fmt, markdown_table, stack_runs
from interp.data import resolve_corpus


def random_twin(model: HookedModel, seed: int = 0) -> HookedModel:
    """Same config, freshly initialised weights."""
    torch.manual_seed(seed)
    hf = type(model.hf_model)(model.hf_model.config).eval()
    return HookedModel(hf, model.tokenizer)


def cache_rows(model: HookedModel, tokens: torch.Tensor, batch: int = 8) -> ActivationCache:
    names = [f"blocks.{l}.hook_resid_post" for l in range(model.n_layers)] + ["ln_final.hook_normalized"]
    parts: dict[str, list] = {n: [] for n in names}
    for i in range(0, len(tokens), batch):
        _, c = model.run_with_cache(tokens[i : i + batch], names=names, return_logits=False)
        for n in names:
            parts[n].append(c[n])
    return ActivationCache({n: torch.cat(v) for n, v in parts.items()}, tokens=tokens)


def select(
    tokens: torch.Tensor, n_classes: int, per_class: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(seq, pos) of rows whose next token is among the n_classes most frequent, balanced; labels; token ids."""
    nxt = tokens[:, 2:]  # positions 1 .. ctx-2 predict tokens 2 .. ctx-1
    ids, counts = torch.unique(nxt, return_counts=True)
    top = ids[counts.argsort(descending=True)[:n_classes]]
    g = torch.Generator().manual_seed(seed)
    where, labels = [], []
    for c, tok in enumerate(top):
        s, p = torch.nonzero(nxt == tok, as_tuple=True)
        pick = torch.randperm(len(s), generator=g)[:per_class]
        where.append(torch.stack([s[pick], p[pick] + 1], 1))
        labels.append(torch.full((len(pick),), c))
    return torch.cat(where), torch.cat(labels), top


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x / x.pow(2).mean(-1, keepdim=True).sqrt()


def analyse(model: HookedModel, tokens: torch.Tensor, where, labels, top, k: int, spectrum: bool) -> dict:
    cache = cache_rows(model, tokens)
    layers = [_rms(cache["resid_post", l][where[:, 0], where[:, 1]]).double() for l in range(model.n_layers)]
    # hook_normalized is before the final norm's weight (TransformerLens semantics): apply the norm module
    # itself to the last residual to get what the unembedding reads.
    final_norm = model.norm_module("ln_final")[0]
    with torch.no_grad():
        out_feats = final_norm(cache["resid_post", model.n_layers - 1][where[:, 0], where[:, 1]]).double()
    W = model.hf_model.get_output_embeddings().weight.detach().double()[top]
    rf = ricci_flow(layers, k=k, labels=labels).summary()
    g = torch.Generator().manual_seed(0)
    shuffled = ricci_flow([x[torch.randperm(len(x), generator=g)] for x in layers], k=k).summary()
    res = {
        "ricci": {key: rf[key] for key in ("global_coefficient", "mean_local_coefficient", "frac_local_negative")},
        "ricci_mean_edge_coefficient": float(torch.tensor(rf["edge_coefficients"]).nanmean()),
        "modularity_first_mid_last": [rf["modularity"][0], rf["modularity"][len(layers) // 2], rf["modularity"][-1]],
        "ricci_shuffled_rows": {key: shuffled[key] for key in ("global_coefficient", "mean_local_coefficient")},
        "ricci_shuffled_mean_edge_coefficient": float(torch.tensor(shuffled["edge_coefficients"]).nanmean()),
        "nc1_by_layer": [nc_metrics(x, labels)["nc1"] for x in layers],
        "output_nc": nc_metrics(out_feats, labels, W),
    }
    if spectrum:
        check = spectrum_check(out_feats, labels, W)
        res["spectrum"] = {key: v for key, v in check.items() if key != "top_eigs"}
    return res


def run_sample(model: HookedModel, sample: int, n_seq: int, classes: int, per: int, k: int, spectrum: bool) -> dict:
    """Trained model and its random twin on data sample `sample` (documents shuffled with that seed)."""
    corpus = resolve_corpus("stdlib-docs", model.tokenizer, ctx_len=128, max_tokens=128 * n_seq, seed=sample)
    tokens = bos_first(corpus.tokens, model.tokenizer)  # BOS in front for a model trained with it (Gemma)
    where, labels, top = select(tokens, classes, per)
    out = {"sample": sample, "rows": len(labels), "classes": [model.tokenizer.decode([int(t)]) for t in top]}
    with torch.no_grad():
        out["trained"] = analyse(model, tokens, where, labels, top, k, spectrum)
        out["random_init"] = analyse(random_twin(model, seed=sample), tokens, where, labels, top, k, spectrum)
    return out


HEADLINE = {
    "GN trace in class-mean subspace": lambda r: r.get("spectrum", {}).get("trace_in_subspace"),
    "GN top overlap": lambda r: r.get("spectrum", {}).get("overlap_top"),
    "output NC1": lambda r: r["output_nc"]["nc1"],
    "Ricci global coef": lambda r: r["ricci"]["global_coefficient"],
    "Ricci mean local coef": lambda r: r["ricci"]["mean_local_coefficient"],
    "Ricci mean local coef, rows shuffled per layer": lambda r: r["ricci_shuffled_rows"]["mean_local_coefficient"],
    "mean edge coef": lambda r: r["ricci_mean_edge_coefficient"],
    "modularity, last layer": lambda r: r["modularity_first_mid_last"][-1],
}
"""The numbers the summary table reports, read from one `analyse` result (None where not measured)."""


def headline_table(runs: list[dict]) -> str:
    """Mean ± sd over the samples of the headline numbers, trained model and random twin side by side."""
    rows = []
    for name, read in HEADLINE.items():
        cells = []
        for part in ("trained", "random_init"):
            vals = [v for v in (read(r[part]) for r in runs) if v is not None]
            cells.append(fmt([float(v) for v in vals]) if vals else "-")
        rows.append([name, *cells])
    return markdown_table([f"metric (mean ± sd over {len(runs)} data samples)", "trained", "random-init twin"], rows)


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__,
        seeds=None,
        model="smollm2-135m",
        classes=6,
        per_class=100,
        k=10,
        quick="8 sequences, 40 rows per class, no GN spectrum",
        threads=2,
        lm_samples=1,
    )
    a = parse(ap, argv)
    model = interp.load_model(a.model)
    n_seq = 8 if a.quick else 32
    per = 40 if a.quick else a.per_class
    runs = [run_sample(model, s, n_seq, a.classes, per, a.k, not a.quick) for s in range(a.lm_samples)]
    out = {"model": a.model, **runs[0]} if len(runs) == 1 else {"model": a.model, "samples": runs}
    print(json.dumps(out, indent=1))
    if len(runs) > 1:
        out["over_samples"] = stack_runs([{p: r[p] for p in ("rows", "trained", "random_init")} for r in runs])
        print(headline_table(runs))
    return json.loads(json.dumps(out))


if __name__ == "__main__":
    with model_refusals():
        main()
