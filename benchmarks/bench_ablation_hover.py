"""The dashboards' per-token ablation hover (`interp.dashboards.ablation`): seconds per top window.

    .venv/bin/python benchmarks/bench_ablation_hover.py [--model pythia-70m-init] [--hook blocks.3.hook_resid_post]

One window of `--positions` firing tokens at the end of a `--seq`-token sequence (random byte ids, a random
direction, every position active): `next_token_loss_deltas` at two batch bounds, after a warm-up. The cost
does not depend on what the model learnt, so the random-initialised Pythia stands in for a trained one.
Prints JSON: load seconds and seconds per window at each --max-batch.
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="pythia-70m-init")
    ap.add_argument("--hook", default="blocks.3.hook_resid_post")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--positions", type=int, default=17, help="firing tokens of the window (before 12 + 1 + after 4)")
    ap.add_argument("--max-batch", default="16,4")
    ap.add_argument("--quick", action="store_true", help="a 32-token sequence with 8 positions (run_all --quick)")
    args = ap.parse_args()
    if args.quick:
        args.seq, args.positions = 32, 8
    import interp
    from interp.dashboards.ablation import next_token_loss_deltas

    t0 = time.perf_counter()
    model = interp.load_model(args.model)
    out = {"model": args.model, "hook": args.hook, "seq": args.seq, "positions": args.positions}
    out["load_s"] = round(time.perf_counter() - t0, 2)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 256, (args.seq,), generator=g)
    d = torch.randn(model.cfg.d_model, generator=g)
    pos = list(range(args.seq - 1 - args.positions, args.seq - 1))
    ones = lambda x: torch.ones(len(x))  # noqa: E731 - every position active, coefficient 1
    next_token_loss_deltas(model, args.hook, ids, pos[:2], d, ones)  # warm-up
    for mb in (int(b) for b in args.max_batch.split(",")):
        t0 = time.perf_counter()
        got = next_token_loss_deltas(model, args.hook, ids, pos, d, ones, max_batch=mb)
        out[f"window_s_max_batch_{mb}"] = round(time.perf_counter() - t0, 3)
        assert len(got) == args.positions
    print(json.dumps(out))


if __name__ == "__main__":
    main()
