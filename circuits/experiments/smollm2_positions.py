"""Position-resolved EAP / EAP-IG on SmolLM2 IOI prompts: the sum over positions against the summed graph, and
the top per-position edges against exact patching of that one edge at that one position.

    python -m circuits.experiments.smollm2_positions --out DIR [--rows 1] [--check 8] [--ig-steps 5]
    python -m circuits.experiments.smollm2_positions --quick     # a tiny random model on `quotes`: checks it runs

Rows are IOI pairs of one token length (the first row's; rows of other lengths are skipped). Writes
`DIR/results.json` and prints a markdown table of the checked edges: token, edge, exact patch effect, EAP, EAP-IG.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def same_length_rows(task, tokenizer, n: int, seed: int = 0):
    """n rows of the task whose clean prompt has the token length of the first row."""
    from circuits.tasks.pairs import encode_pairs

    rows = task.rows(max(8 * n, 8), seed)
    length = len(tokenizer(rows[0]["clean"]).input_ids)
    keep = [r for r in rows if len(tokenizer(r["clean"]).input_ids) == length][:n]
    return encode_pairs(tokenizer, keep, align=True)


def run(model, task_name: str, rows: int, check: int, ig_steps: int) -> dict:
    from circuits.evaluation.edge_patching import patched_metric
    from circuits.finders.eap import edge_scores, summed_scores
    from circuits.tasks.binary import get_task

    task = get_task(task_name)
    batch = same_length_rows(task, model.tokenizer, rows)
    metric = task.default_metric
    out: dict = {"task": task_name, "rows": len(batch), "tokens": None, "metric": metric}
    summed = edge_scores(model, batch, metric, "eap")
    pos = edge_scores(model, batch, metric, "eap", positions=True)
    ig = edge_scores(model, batch, metric, "eap-ig", ig_steps=ig_steps, positions=True)
    ig_summed = edge_scores(model, batch, metric, "eap-ig", ig_steps=ig_steps)
    out["tokens"] = pos.tokens
    for name, a, b in (("eap", pos, summed), ("eap-ig", ig, ig_summed)):
        diff = float((summed_scores(a).scores - b.scores).abs().max())
        out[f"{name}_sum_vs_summed_max_abs_diff"] = diff
        out[f"{name}_summed_max_abs_score"] = float(b.scores.abs().max())
    g = pos.graph
    P, U, D = pos.scores.shape
    full = pos.valid.clone()
    cache: dict = {}
    base = float(patched_metric(model, batch, full, metric, "corrupt", graph=g, cache=cache)["metric"].mean())
    checked = []
    for flat in pos.order()[:check].tolist():
        p, u, d = flat // (U * D), flat % (U * D) // D, flat % D
        keep = full.clone()
        keep[p, u, d] = False
        m = float(patched_metric(model, batch, keep, metric, "corrupt", graph=g, cache=cache)["metric"].mean())
        checked.append(
            {
                "pos": p,
                "token": pos.tokens[p],
                "edge": g.edge_name(u, d),
                "exact": m - base,
                "eap": float(pos.scores[p, u, d]),
                "eap_ig": float(ig.scores[p, u, d]),
            }
        )
    out["clean_metric"] = base
    out["checked"] = checked
    nz = pos.scores.abs().sum((1, 2))
    out["positions_with_nonzero_scores"] = [i for i in range(P) if float(nz[i]) > 0]
    return out


def table(res: dict) -> str:
    lines = ["| position (token) | edge | exact patch | EAP | EAP-IG |", "|---|---|---|---|---|"]
    for r in res["checked"]:
        lines.append(
            f"| {r['pos']} ({json.dumps(r['token'])}) | {r['edge']} | {r['exact']:+.4f} | {r['eap']:+.4f} | "
            f"{r['eap_ig']:+.4f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="output folder (required unless --quick)")
    ap.add_argument("--quick", action="store_true", help="a tiny random model on quotes: checks that it all runs")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default="ioi")
    ap.add_argument("--rows", type=int, default=1, help="prompt rows (of the first row's token length)")
    ap.add_argument("--check", type=int, default=8, help="top per-position edges checked by exact patching")
    ap.add_argument("--ig-steps", type=int, default=5)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.quick:
        from circuits.finders.weight_sparse import WeightSparseConfig, build_model

        model = build_model(WeightSparseConfig(d_model=32, n_layers=2, n_heads=4, d_mlp=64, steps=1))
        a.out, a.task, a.rows, a.check, a.ig_steps = a.out or "runs/circuits/positions_quick", "quotes", 2, 3, 2
        a.model = model.provenance["spec"]
    elif not a.out:
        ap.error("--out is required (or --quick)")
    else:
        import interp

        model = interp.load_model(a.model)
    res = {"model": a.model, "args": vars(a), **run(model, a.task, a.rows, a.check, a.ig_steps)}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(res, indent=1))
    keys = [k for k in res if k.endswith(("_diff", "_score"))]
    print(json.dumps({k: res[k] for k in ["tokens", "positions_with_nonzero_scores", *keys]}, indent=1))
    print(table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
