"""Attribution graphs of long prompts on SmolLM2-135M: the layer-wise backward with rows streamed to disk beside the
dense in-memory version on the same prompt, then a 4,096-token graph; prints JSON.

    .venv/bin/python benchmarks/bench_long_graphs.py --transcoders runs/transcoders/smollm2_plt
    .venv/bin/python benchmarks/bench_long_graphs.py --transcoders DIR --side-tokens 256 --long-tokens 4096 \\
        --side-rows 128 --long-rows 128 --out runs/graphs/long4096

- `side_by_side`: `attribute` at `--side-tokens` with `--side-rows` feature rows, once with `--mode memory` (one
  frozen forward of 32 copies, rows in memory) and once with `--mode offload` (layer-wise backward, rows on disk),
  each in its own process (its own peak RSS): seconds, peak RSS, and how far apart the two graphs are (selected
  features, the largest row difference over the largest entry, the scores).
- `long`: the offload mode at `--long-tokens`: the plan (printed before the backward passes), what the dense mode
  would have needed (`plan_of`), seconds, seconds per row, peak RSS, the rows' bytes on disk, the scores and the
  pruned graph's size. With `--out` the graph folder is written as `interp circuits graph` writes it.
The prompt is the start of Python's reference-manual topics (`pydoc_data.topics`, sorted by name), text the
transcoders never saw (they train on the stdlib's docstrings). One torch thread per process (`--threads`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODES = {"memory": (False, False), "offload": (True, True)}


def prompt_ids(model, n: int):
    """The first `n` - 1 tokens of the topics text (the graph prepends BOS: n in all)."""
    from pydoc_data import topics

    text = "\n\n".join(topics.topics[k] for k in sorted(topics.topics))
    return model.to_tokens(text[: 12 * n], prepend_bos=False, truncate=True)[0][: n - 1]


_done = [0]


def report(n: int, start: float) -> None:
    """A line on stderr per batch of rows: how far, how long, how much memory."""
    _done[0] += n
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"rows {_done[0]}  {time.perf_counter() - start:.0f} s  max rss {rss:.2f} GB", file=sys.stderr, flush=True)


def one(a) -> dict:
    """One graph in this process (`--one MODE`)."""
    import torch

    torch.set_num_threads(a.threads)
    import interp
    from circuits.graph import attribute, prune
    from circuits.model.transcoders import load_transcoders

    model = interp.load_model("smollm2-135m")
    tc = load_transcoders(a.transcoders)
    tokens = prompt_ids(model, a.tokens)
    plans: list = []
    layerwise, offload = MODES[a.one]
    with tempfile.TemporaryDirectory(dir=a.out or None) as tmp:
        t = time.perf_counter()
        g = attribute(
            model,
            tc,
            tokens,
            max_feature_nodes=a.rows,
            batch_size=32,
            layerwise=layerwise,
            offload=offload,
            offload_dir=tmp,
            on_plan=plans.append,
            progress=lambda n: report(n, t),
        )
        seconds = time.perf_counter() - t
    t = time.perf_counter()
    p = prune(g.rows, g.logit_probabilities, g.n_pos, g.n_features, row_nodes=g.row_nodes)
    prune_s = time.perf_counter() - t
    out = {
        "mode": a.one,
        "tokens": g.n_pos,
        "active_features": len(g.features),
        "feature_rows": g.n_features,
        "logit_rows": g.n_logits,
        "seconds": round(seconds, 1),
        "seconds_per_row": round(seconds / (g.n_features + g.n_logits), 2),
        "prune_seconds": round(prune_s, 1),
        "max_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
        "plan": plans[0],
        "scores": g.meta["scores"],
        "pruned_nodes": int(p.node_mask.sum()),
        "pruned_edges": int(p.edge_rows.sum()),
        "logits": g.meta["logit_strings"],
    }
    if a.save:
        g.save(a.save)
    return out


def child(a, mode: str, tokens: int, rows: int, save: str | None = None) -> dict:
    cmd = [sys.executable, __file__, "--one", mode, "--transcoders", a.transcoders, "--tokens", str(tokens)]
    cmd += ["--rows", str(rows), "--threads", str(a.threads)]
    if save:
        cmd += ["--save", save]
    done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)  # its stderr: progress lines
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transcoders", metavar="DIR", required=True)
    ap.add_argument("--side-tokens", type=int, default=256)
    ap.add_argument("--side-rows", type=int, default=128)
    ap.add_argument("--long-tokens", type=int, default=4096)
    ap.add_argument("--long-rows", type=int, default=128)
    ap.add_argument("--skip-side", action="store_true")
    ap.add_argument("--skip-long", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", metavar="DIR", help="write the long graph's folder here")
    ap.add_argument("--one", choices=list(MODES), help=argparse.SUPPRESS)
    ap.add_argument("--tokens", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--save", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a)))
        return
    import torch

    from circuits.graph import Graph

    out: dict = {"model": "smollm2-135m", "transcoders": a.transcoders, "torch_threads": a.threads}
    if not a.skip_side:
        with tempfile.TemporaryDirectory() as tmp:
            dense = child(a, "memory", a.side_tokens, a.side_rows, f"{tmp}/dense")
            long = child(a, "offload", a.side_tokens, a.side_rows, f"{tmp}/long")
            gd, gl = Graph.load(f"{tmp}/dense"), Graph.load(f"{tmp}/long")
        same = torch.equal(gd.selected, gl.selected)
        out["side_by_side"] = {
            "memory": dense,
            "offload": long,
            "same_selected_features": same,
            "rows_max_rel_diff": float((gd.rows - gl.rows).abs().max() / gd.rows.abs().max()) if same else None,
            "offload_over_memory_seconds": round(long["seconds"] / dense["seconds"], 2),
            "offload_over_memory_rss": round(long["max_rss_gb"] / dense["max_rss_gb"], 2),
        }
        print(json.dumps(out), flush=True)
    if not a.skip_long:
        save = None
        if a.out:
            Path(a.out).mkdir(parents=True, exist_ok=True)
            save = a.out
        long = child(a, "offload", a.long_tokens, a.long_rows, save)
        from circuits.graph.attribute import plan_of

        p = long["plan"]
        sizes = dict(n_pos=p["tokens"], n_layers=30, n_active=p["active_features"], n_visit=p["visited_features"])
        sizes |= dict(n_logits=p["logits"], batch=32, d_model=576, n_heads=9, d_transcoder=1536)
        long["memory_mode_would_need_gb"] = round(plan_of(**sizes)["total_bytes"] / 1e9, 1)
        out["long"] = long
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
