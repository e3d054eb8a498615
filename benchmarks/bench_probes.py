"""Probe-scan overhead, side by side in one run: prints JSON with times and the ratio to the bare forward.

    .venv/bin/python benchmarks/bench_probes.py            # 100k tokens of smollm2-135m (minutes on 2 cores)
    .venv/bin/python benchmarks/bench_probes.py --quick    # 4k tokens, for a smoke check

The same token batches go through (a) the bare HF forward and (b) the forward with the probe scan's hooks
(massive-activation statistics on every `hook_resid_post`, sink scores and attention distances on every
`attn.hook_pattern`), alternating per batch so that machine noise hits both alike; the scan's final
summary (`report()`) is timed and added to (b). Goal: ratio <= 1.2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--ctx-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="4,096 tokens")
    args = parser.parse_args(argv)
    if args.quick:
        args.tokens = 4096

    import interp
    from interp.data import resolve_corpus
    from interp.probes.massive import MassiveCriterion, MassiveScanner
    from interp.probes.sinks import SinkScanner

    model = interp.load_model(args.model)
    corpus = resolve_corpus("stdlib-docs", model.tokenizer, ctx_len=args.ctx_len, max_tokens=args.tokens, seed=0)
    rows = corpus.tokens
    massive = MassiveScanner(model.n_layers, MassiveCriterion())
    sinks = SinkScanner(model.n_layers, model.n_heads)
    hooks = [("blocks.*.hook_resid_post", massive.hook), ("blocks.*.attn.hook_pattern", sinks.hook)]
    times = {"bare": 0.0, "scan": 0.0}

    def bare(ids):
        model.hf_model(input_ids=ids, use_cache=False)

    def scan(ids):
        with model.hooks(hooks):
            massive.begin_batch(ids, None)
            sinks.begin_batch(ids, None)
            model.hf_model(input_ids=ids, use_cache=False)

    with torch.no_grad():
        warm = rows[: args.batch_size]
        bare(warm)
        for n, i in enumerate(range(0, rows.shape[0], args.batch_size)):
            ids = rows[i : i + args.batch_size]
            order = [("bare", bare), ("scan", scan)] if n % 2 == 0 else [("scan", scan), ("bare", bare)]
            for name, fn in order:
                t0 = time.perf_counter()
                fn(ids)
                times[name] += time.perf_counter() - t0
    t0 = time.perf_counter()
    massive.report(model.tokenizer.decode)
    sinks.report(model.tokenizer.decode)
    times["scan"] += time.perf_counter() - t0
    out = {
        "model": args.model,
        "tokens": int(rows.numel()),
        "ctx_len": args.ctx_len,
        "batch_size": args.batch_size,
        "threads": torch.get_num_threads(),
        "bare_forward_s": round(times["bare"], 3),
        "probe_scan_s": round(times["scan"], 3),
        "ratio": round(times["scan"] / times["bare"], 3),
        "goal_ratio": 1.2,
        "bare_tokens_per_s": round(rows.numel() / times["bare"], 1),
        "scan_tokens_per_s": round(rows.numel() / times["scan"], 1),
    }
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
