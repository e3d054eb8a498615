"""Export a feature record in the structure SAEDashboard writes for Neuronpedia, and read it back.

SAEDashboard's `NeuronpediaDashboardFeature.to_dict()` (sae_dashboard/neuronpedia/neuronpedia_dashboard.py)
is the per-feature JSON Neuronpedia imports; a batch file wraps features as
`{"model_id", "layer", "sae_set", "features": [...]}` (`NeuronpediaDashboardBatch`). `to_neuronpedia`
writes exactly those keys, so `NeuronpediaDashboardFeature(**d)` accepts the file. Field by field:

| Neuronpedia / SAEDashboard field | from our record |
|---|---|
| `feature_index` | `feature` |
| `frac_nonzero` | `freq` (fraction of covered rows where the value > 0) |
| `freq_hist_data_bar_values`, `..._heights` | `histogram`: bin centres, counts (exact, active values) |
| `pos_str`, `pos_values` / `neg_str`, `neg_values` | `logits.top` / `logits.bottom`: decoded token text, effect |
| `logits_hist_data_bar_values`, `..._heights` | `logits`: bin centres, counts of the effect over the vocabulary |
| `correlated_features_indices` | `coact` features (ranked by Jaccard of firing sets) |
| `correlated_features_pearson`, `correlated_features_l1` | `coact`: Pearson and cosine of the activations (SAEDashboard's "l1" column holds a cosine too) |
| `activations` | `top` as one group (`bin_min` -1, `bin_max` = max activation, `bin_contains` -1, SAEDashboard's "TOP ACTIVATIONS" convention), then each `buckets` group (`bin_min` = lo, `bin_max` = hi, `bin_contains` = fraction); `tokens` = decoded text of the window, `values` = activation per token |
| `n_tokens_in_prompt`, `n_prompts_total`, `dataset` | the store's context length, sequences covered, data source |
| `neuron_alignment_*`, `correlated_neurons_*`, `decoder_weights_dist` | empty lists (not computed here; the first two are about the model's neurons, the last about attention heads) |

What does not fit the format stays in our own JSON (`features/<i>.json`): token ids (Neuronpedia keeps
text only), `target` (which token of a window is the active one: Neuronpedia derives it from the max),
the position distribution, decoder-cosine neighbours, Jaccard values, bottom contexts of signed channels.
`from_neuronpedia` reads an export back into a record with the fields above (test: tests/interp/dashboards).
"""

from __future__ import annotations

from typing import Any

NEURONPEDIA_FEATURE_KEYS = (
    "feature_index",
    "neuron_alignment_indices",
    "neuron_alignment_values",
    "neuron_alignment_l1",
    "correlated_neurons_indices",
    "correlated_neurons_l1",
    "correlated_neurons_pearson",
    "correlated_features_indices",
    "correlated_features_l1",
    "correlated_features_pearson",
    "neg_str",
    "neg_values",
    "pos_str",
    "pos_values",
    "frac_nonzero",
    "freq_hist_data_bar_values",
    "freq_hist_data_bar_heights",
    "logits_hist_data_bar_heights",
    "logits_hist_data_bar_values",
    "n_prompts_total",
    "n_tokens_in_prompt",
    "dataset",
    "decoder_weights_dist",
    "activations",
)
"""The keys of SAEDashboard's `NeuronpediaDashboardFeature.to_dict()`, in its order."""

ACTIVATION_KEYS = ("bin_min", "bin_max", "bin_contains", "tokens", "values")


def _centres(edges: list[float]) -> list[float]:
    return [round((a + b) / 2, 6) for a, b in zip(edges[:-1], edges[1:])]


def _edges(centres: list[float]) -> list[float]:
    if not centres:
        return []
    w = centres[1] - centres[0] if len(centres) > 1 else 1.0
    return [round(c - w / 2, 5) for c in centres] + [round(centres[-1] + w / 2, 5)]


def _activation(
    ctx: dict[str, Any], text: dict[str, list[str]], lo: float, hi: float, contains: float
) -> dict[str, Any]:
    return {
        "bin_min": lo,
        "bin_max": hi,
        "bin_contains": contains,
        "tokens": [text[str(t)][1] for t in ctx["tokens"]],
        "values": [0.0 if v is None else v for v in ctx["values"]],
    }


def to_neuronpedia(rec: dict[str, Any], ctx_len: int = 0, dataset: str = "") -> dict[str, Any]:
    """One feature in SAEDashboard/Neuronpedia's structure (exactly `NEURONPEDIA_FEATURE_KEYS`)."""
    toks = rec["tokens"]
    lg = rec.get("logits") or {"top": [], "bottom": [], "edges": [], "counts": []}
    acts = [_activation(c, toks, -1, rec["max"], -1) for c in rec["top"]]
    for b in rec["buckets"]:
        acts += [_activation(c, toks, b["lo"], b["hi"], b["fraction"]) for c in b["examples"]]
    out = {
        "feature_index": rec["feature"],
        "neuron_alignment_indices": [],
        "neuron_alignment_values": [],
        "neuron_alignment_l1": [],
        "correlated_neurons_indices": [],
        "correlated_neurons_l1": [],
        "correlated_neurons_pearson": [],
        "correlated_features_indices": [c[0] for c in rec["coact"]],
        "correlated_features_l1": [c[3] for c in rec["coact"]],
        "correlated_features_pearson": [c[2] for c in rec["coact"]],
        "neg_str": [toks[str(t)][1] for t, _ in lg["bottom"]],
        "neg_values": [v for _, v in lg["bottom"]],
        "pos_str": [toks[str(t)][1] for t, _ in lg["top"]],
        "pos_values": [v for _, v in lg["top"]],
        "frac_nonzero": rec["freq"],
        "freq_hist_data_bar_values": _centres(rec["histogram"]["edges"]),
        "freq_hist_data_bar_heights": list(rec["histogram"]["counts"]),
        "logits_hist_data_bar_heights": list(lg["counts"]),
        "logits_hist_data_bar_values": _centres(lg["edges"]),
        "n_prompts_total": rec["n_rows"] // ctx_len if ctx_len else 0,
        "n_tokens_in_prompt": ctx_len,
        "dataset": dataset,
        "decoder_weights_dist": [],
        "activations": acts,
    }
    return {k: out[k] for k in NEURONPEDIA_FEATURE_KEYS}


def neuronpedia_batch(features: list[dict[str, Any]], model_id: str, layer: int, sae_set: str) -> dict[str, Any]:
    """SAEDashboard's `NeuronpediaDashboardBatch` layout around exported features."""
    return {"model_id": model_id, "layer": layer, "sae_set": sae_set, "features": features}


def from_neuronpedia(d: dict[str, Any]) -> dict[str, Any]:
    """The record fields an export carries, read back (tokens as text, since the format has no ids)."""
    missing = [k for k in NEURONPEDIA_FEATURE_KEYS if k not in d]
    if missing:
        raise ValueError(f"not a SAEDashboard/Neuronpedia feature: missing {missing}")
    top, buckets = [], []
    for a in d["activations"]:
        ctx = {"tokens": list(a["tokens"]), "values": list(a["values"])}
        if a["bin_min"] == -1 and a["bin_contains"] == -1:
            top.append(ctx)
        elif buckets and (buckets[-1]["lo"], buckets[-1]["hi"]) == (a["bin_min"], a["bin_max"]):
            buckets[-1]["examples"].append(ctx)
        else:
            buckets.append({"lo": a["bin_min"], "hi": a["bin_max"], "fraction": a["bin_contains"], "examples": [ctx]})
    return {
        "feature": d["feature_index"],
        "freq": d["frac_nonzero"],
        "histogram": {"edges": _edges(d["freq_hist_data_bar_values"]), "counts": list(d["freq_hist_data_bar_heights"])},
        "logits": {
            "top": [[s, v] for s, v in zip(d["pos_str"], d["pos_values"])],
            "bottom": [[s, v] for s, v in zip(d["neg_str"], d["neg_values"])],
            "edges": _edges(d["logits_hist_data_bar_values"]),
            "counts": list(d["logits_hist_data_bar_heights"]),
        },
        "coact": [
            [g, p, c]
            for g, p, c in zip(
                d["correlated_features_indices"], d["correlated_features_pearson"], d["correlated_features_l1"]
            )
        ],
        "top": top,
        "buckets": buckets,
    }


def record_as_text(rec: dict[str, Any]) -> dict[str, Any]:
    """Our record reduced to what `from_neuronpedia` returns (token ids replaced by their text): the
    round trip `from_neuronpedia(to_neuronpedia(rec)) == record_as_text(rec)` holds up to bin-edge rounding."""
    toks = rec["tokens"]

    def ctx(c: dict[str, Any]) -> dict[str, Any]:
        return {
            "tokens": [toks[str(t)][1] for t in c["tokens"]],
            "values": [0.0 if v is None else v for v in c["values"]],
        }

    lg = rec.get("logits") or {"top": [], "bottom": [], "edges": [], "counts": []}
    return {
        "feature": rec["feature"],
        "freq": rec["freq"],
        "histogram": {"edges": rec["histogram"]["edges"], "counts": rec["histogram"]["counts"]},
        "logits": {
            "top": [[toks[str(t)][1], v] for t, v in lg["top"]],
            "bottom": [[toks[str(t)][1], v] for t, v in lg["bottom"]],
            "edges": lg["edges"],
            "counts": lg["counts"],
        },
        "coact": [[g, p, c] for g, _, p, c in rec["coact"]],
        "top": [ctx(c) for c in rec["top"]],
        "buckets": [
            {"lo": b["lo"], "hi": b["hi"], "fraction": b["fraction"], "examples": [ctx(c) for c in b["examples"]]}
            for b in rec["buckets"]
            if b["examples"]
        ],
    }
