"""Replacement and completeness scores of attribution graphs over trained transcoders, on a fixed set of prompts,
plus a known-mechanism check and interventions measured against the graph's prediction.

    python -m circuits.experiments.graph_scores --model smollm2-135m \
        --transcoders runs/transcoders/smollm2_plt --transcoders runs/transcoders/smollm2_clt \
        --out runs/graphs/scores [--max-feature-nodes 7500] [--markdown]
    python -m circuits.experiments.graph_scores --quick --out /tmp/gs      # a tiny random model, seconds

Prompts (`PROMPTS`): IOI, subject-verb agreement, a capital city, and repeated random tokens (induction). For
each transcoder folder and prompt: the graph's replacement and completeness scores (circuit-tracer's
definitions, `circuits.graph.influence`), active features, the top logit and its probability, seconds.

- **Induction check**: on the repeated random tokens, does the model predict the copied token (`copies`), and is
  the token node right after the earlier occurrence of the current token the one the graph routes the prediction
  through? Reported as that node's rank among the token nodes by influence (`copied_token_rank`, 1 = first) and
  by the graph's linear prediction of the top logit's change when a token's embedding is removed
  (`copied_token_rank_by_effect`, the prepended special token aside).
- **Head loadings** (IOI): the five heads carrying the most |part| of the cross-position edges into the top
  logit, counting what each head writes at the final position (`circuits.graph.heads`). On SmolLM2's IOI the
  per-head direct logit attribution names L23H3 (+2.86) and L29H1 (+1.73) (README, "TransformerLens idioms").
- **Interventions**: the `--n-ablate` most influential features of the capital prompt are ablated one at a
  time; each measured change of the top logit (frozen attention and norms, and free) beside the graph's linear
  prediction (`circuits.graph.intervene`). Reported: the correlation and the median |error| / |prediction|.

Writes `scores.json` (every number) and, with `--markdown`, prints the README table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

PROMPTS = {
    "ioi": "When Mary and John went to the store, John gave a drink to",
    "agreement": "In the kitchen, the keys to the cabinet",
    "capital": "The capital of France is",
}
INDUCTION_LEN = 12


def induction_tokens(model, seed: int = 0) -> tuple[torch.Tensor, int]:
    """[BOS?] r_1..r_k r_1..r_j: random ordinary tokens repeated; returns (tokens, position of r_{j+1} in the
    first copy), the token the model should copy."""
    g = torch.Generator().manual_seed(seed)
    lo, hi = (1000, 20000) if model.d_vocab > 20000 else (3, model.d_vocab)  # ordinary tokens; bytes for --quick
    r = torch.randint(lo, hi, (INDUCTION_LEN,), generator=g)
    bos_id = getattr(model.tokenizer, "bos_token_id", None)
    bos = torch.tensor([bos_id] if bos_id is not None else [], dtype=torch.long)
    j = INDUCTION_LEN // 2
    tokens = torch.cat([bos, r, r[:j]])
    return tokens, len(bos) + j  # r_{j+1} sits at index j of r (0-based), after the BOS


def token_influence_rank(g, position: int) -> int:
    """Rank (1 = most) of the token node at `position` among token nodes by influence on the logits."""
    from circuits.graph.influence import influence, normalize_rows

    weights = torch.zeros(g.adjacency.shape[0])
    weights[-g.n_logits :] = g.logit_probabilities
    inf = influence(normalize_rows(g.adjacency), weights)
    start = g.n_features + g.n_errors
    tokens = inf[start : start + g.n_pos]
    return int((tokens > tokens[position]).sum()) + 1


def token_total_effects(g) -> torch.Tensor:
    """[n_pos] the graph's linear prediction of the top logit's change when each token's embedding is removed:
    direct edges plus every path through features (each edge over its source's activation is one unit's effect)."""
    n_feat = g.n_features
    start = n_feat + g.n_errors
    cols = torch.arange(start, start + g.n_pos)
    act = g.activations[g.selected].clamp(min=1e-12)
    per_unit = g.adjacency[:, :n_feat] / act[None, :]
    change = torch.zeros(n_feat, g.n_pos)
    for i in range(n_feat):  # features are in layer order: every path is complete when a row is reached
        change[i] = -g.adjacency[i, cols] + per_unit[i] @ change
    row = g.adjacency.shape[0] - g.n_logits
    return -g.adjacency[row, cols] + per_unit[row] @ change


def ablation_check(model, tc, g, n: int) -> dict:
    """Ablate the n most influential features one at a time: measured (frozen, free) vs predicted top logit."""
    from circuits.graph.influence import influence, normalize_rows
    from circuits.graph.intervene import intervene, predicted_effect

    weights = torch.zeros(g.adjacency.shape[0])
    weights[-g.n_logits :] = g.logit_probabilities
    inf = influence(normalize_rows(g.adjacency), weights)[: g.n_features]
    top = inf.argsort(descending=True)[:n].tolist()
    with torch.no_grad():
        clean = model(g.tokens[None])[0, -1].float()
    base = float(clean[g.logit_tokens[0]] - clean.mean())
    rows = []
    for i in top:
        key = tuple(int(v) for v in g.features[g.selected[i]])
        edit = {key: 0.0}
        pred = float(predicted_effect(g, edit)[0])
        got = {}
        for freeze in (True, False):
            x = intervene(model, tc, g.tokens, edit, freeze=freeze)
            got["frozen" if freeze else "free"] = float(x[g.logit_tokens[0]] - x.mean()) - base
        rows.append({"feature": list(key), "predicted": pred, **got})
    out = {"ablations": rows}
    for mode in ("frozen", "free"):
        p = torch.tensor([r["predicted"] for r in rows])
        m = torch.tensor([r[mode] for r in rows])
        out[f"corr_{mode}"] = float(torch.corrcoef(torch.stack([p, m]))[0, 1]) if len(rows) > 2 else None
        out[f"median_rel_error_{mode}"] = float(((m - p).abs() / p.abs().clamp(min=1e-6)).median()) if rows else None
    return out


def run(model, folders: dict, out: Path, max_feature_nodes: int, batch_size: int, n_ablate: int) -> dict:
    from circuits.graph import attribute

    results = {
        "model": model.provenance.get("spec", model.name),
        "settings": {
            "max_feature_nodes": max_feature_nodes,
            "batch_size": batch_size,
            "torch_threads": torch.get_num_threads(),
        },
        "rows": [],
    }
    ind_tokens, ind_pos = induction_tokens(model)
    for name, tc in folders.items():
        for task, prompt in [*PROMPTS.items(), ("induction", ind_tokens)]:
            t = time.perf_counter()
            g = attribute(model, tc, prompt, batch_size=batch_size, max_feature_nodes=max_feature_nodes)
            row = {
                "transcoders": name,
                "kind": tc.kind,
                "width": tc.d_tc,
                "task": task,
                "tokens": g.n_pos,
                "active_features": len(g.features),
                "feature_nodes": g.n_features,
                "top_logit": (g.meta.get("logit_strings") or [None])[0],
                "top_p": round(float(g.logit_probabilities[0]), 4),
                **{k: round(v, 4) for k, v in g.meta["scores"].items()},
                "seconds": round(time.perf_counter() - t, 1),
            }
            if task == "induction":
                row["copies"] = bool(int(g.logit_tokens[0]) == int(ind_tokens[ind_pos]))
                row["copied_token_rank"] = token_influence_rank(g, ind_pos)
                effects = token_total_effects(g)[1:]  # the prepended special token aside
                row["copied_token_rank_by_effect"] = int((effects.abs() > effects[ind_pos - 1].abs()).sum()) + 1
                row["token_effects"] = [round(float(x), 4) for x in token_total_effects(g)]
            if task == "ioi":
                from circuits.graph.heads import head_loadings, top_heads

                logit = g.adjacency.shape[0] - g.n_logits
                loads = head_loadings(model, tc, g, logit, batch_size=batch_size, at=g.n_pos - 1)
                row["top_heads_final_position"] = top_heads(g, loads, logit, k=5)
            if task == "capital" and n_ablate:
                row["interventions"] = ablation_check(model, tc, g, n_ablate)
            results["rows"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "interventions"}), flush=True)
            out.mkdir(parents=True, exist_ok=True)
            (out / "scores.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def markdown(results: dict) -> str:
    lines = [
        "| transcoders | kind | width | task | tokens | active features | replacement | completeness | error share "
        "| seconds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        lines.append(
            f"| {r['transcoders']} | {r['kind']} | {r['width']} | {r['task']} | {r['tokens']} | {r['active_features']} "
            f"| {r['replacement']:.3f} | {r['completeness']:.3f} | {r['error_share']:.3f} | {r['seconds']} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--transcoders", action="append", default=[], metavar="DIR")
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-feature-nodes", type=int, default=7500)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--n-ablate", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    from circuits.model.transcoders import load_transcoders

    if a.quick:
        from circuits.graph_cli import quick_setup

        model, tc = quick_setup()
        folders = {"random-plt": tc}
        a.max_feature_nodes, a.n_ablate = min(a.max_feature_nodes, 300), min(a.n_ablate, 3)
    else:
        if not a.transcoders:
            ap.error("give --transcoders DIR (one or more), or --quick")
        from circuits.model.checkpoint import load_checkpoint

        model = load_checkpoint(a.model)
        folders = {Path(p).name: load_transcoders(p) for p in a.transcoders}
    results = run(model, folders, Path(a.out), a.max_feature_nodes, a.batch_size, a.n_ablate)
    if a.markdown:
        print(markdown(results))


if __name__ == "__main__":
    main()
