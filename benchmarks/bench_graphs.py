"""Attribution graphs on SmolLM2-135M: a 128-token graph with the defaults, and ours beside circuit-tracer's own
`attribute` on the same model, transcoders and tokens; prints JSON.

    .venv/bin/python benchmarks/bench_graphs.py                        # random transcoders at L0 32 per layer
    .venv/bin/python benchmarks/bench_graphs.py --transcoders runs/transcoders/smollm2_plt
    .venv/bin/python benchmarks/bench_graphs.py --skip-theirs          # without circuit-tracer's venv

- `defaults`: `circuits.graph.attribute` on a 128-token text with the command line's defaults (7,500 feature rows,
  batch 32), its seconds, peak memory (max RSS) and the plan (`plan_of`).
- `side_by_side`: both tools on the same 128 tokens with `--compare-features` feature rows (circuit-tracer's
  `attribute(max_feature_nodes=...)`, batch 32, under its own venv, `circuits/experiments/circuit_tracer_referee.py`,
  with our thread count), and the ratio of their attribute seconds to ours; one after the other in this run.
Random transcoders (no `--transcoders`): width 1,536, thresholds set per layer so that 32 features fire per token
on this text (a trained set's L0), so the graph has the size a real one has.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TEXT = (
    "The old lighthouse keeper climbed the stairs every evening to light the lamp. Ships passing in the night relied "
    "on its beam to avoid the rocks along the coast. One stormy night the lamp failed, and the keeper had to find "
    "another way to warn the sailors. He lit a fire on the cliff and waved a lantern until dawn. When the storm "
    "finally passed, the captain of the largest ship climbed up to thank him. They shared a pot of tea and talked "
    "about the sea, the weather and the old days, when the harbour was full of fishing boats and the village "
    "market sold bread, cheese and smoked fish every morning. The captain said that his grandfather had sailed the "
    "same route for forty years without ever seeing the light go out, and that the keeper should be proud of"
)


def calibrated_random(model, tokens, d_tc: int, l0: int):
    """Random transcoders whose per-layer thresholds let `l0` features fire per token on `tokens`."""
    from circuits.graph.replacement import record
    from circuits.model.transcoders import random_transcoders

    tc = random_transcoders(model.n_layers, model.d_model, d_tc, "plt", seed=0, threshold=0.0)
    rec = record(model, tc, tokens, zero_positions=0)
    for layer in range(model.n_layers):
        pre = tc.pre(layer, rec.inputs[layer, 1:]).flatten()
        tc.threshold[layer][:] = pre.topk(l0 * (len(tokens) - 1)).values[-1]
    return tc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transcoders", metavar="DIR")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--max-feature-nodes", type=int, default=7500)
    ap.add_argument("--compare-features", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-theirs", action="store_true")
    ap.add_argument("--skip-defaults", action="store_true", help="only the side-by-side run")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import interp
    from circuits.experiments.graph_referee import VENV_PY, model_folder, run_theirs, write_ct_config
    from circuits.graph import attribute
    from circuits.model.transcoders import load_transcoders, save_transcoders

    model = interp.load_model("smollm2-135m")
    tokens = model.to_tokens(TEXT)[0][: a.tokens]
    out = {"tokens": len(tokens), "torch_threads": a.threads}
    with tempfile.TemporaryDirectory() as tmp:
        if a.transcoders:
            tc_dir = Path(a.transcoders)
            tc = load_transcoders(tc_dir)
        else:
            tc = calibrated_random(model, tokens, 1536, 32)
            tc_dir = save_transcoders(tc, Path(tmp) / "tc")
            write_ct_config(tc_dir, "plt", model.n_layers)
        out["transcoders"] = a.transcoders or "random plt, width 1536, L0 32 per layer on this text"
        if not a.skip_defaults:
            plans = []
            t = time.perf_counter()
            g = attribute(model, tc, tokens, max_feature_nodes=a.max_feature_nodes, on_plan=plans.append)
            out["defaults"] = {
                "seconds": round(time.perf_counter() - t, 1),
                "max_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
                "plan": plans[0],
                "scores": g.meta["scores"],
            }
            print(json.dumps(out), flush=True)
        if not a.skip_theirs and VENV_PY.exists():
            t = time.perf_counter()
            attribute(model, tc, tokens, max_feature_nodes=a.compare_features)
            ours = time.perf_counter() - t
            model_dir = model_folder(model, Path(tmp) / "model")
            info = run_theirs(model_dir, tc_dir, Path(tmp) / "theirs", None, tokens.tolist(), 32, a.compare_features)
            theirs = info["timings_s"]["attribute"]
            out["side_by_side"] = {
                "feature_rows": a.compare_features,
                "ours_seconds": round(ours, 1),
                "theirs_seconds": round(theirs, 1),
                "theirs_over_ours": round(theirs / ours, 2),
            }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
