"""The analysis layer against TransformerLens, side by side in one run on the same weights and prompts.

    .venv/bin/python benchmarks/bench_analysis.py            # pythia-70m-init (random weights), 24 tokens, 5
    repetitions
    .venv/bin/python benchmarks/bench_analysis.py --quick    # pythia-14m-init, 12 tokens, 1 repetition
    .venv/bin/python benchmarks/bench_analysis.py --ioi      # SmolLM2-135M on the IOI prompt: 30x14 resid_pre, 30x9 z

Rows (medians of interleaved repetitions; ratios are TransformerLens time / ours, >1 means we are faster):
1. a full layer x position activation-patching sweep of `resid_pre`: ours (`interp.patching`, with the
   same metric function TL gets, and with the default logit-difference metric that reads only the last
   position's logits) against `transformer_lens.patching.get_act_patch_resid_pre` through
   `HookedTransformer` (`model.to_transformer_lens()`) and through TL 3's `TransformerBridge`
   (`model.to_transformer_bridge()`). The sweeps' values are compared too (max abs difference).
   Each of our runs starts at the patched layer from the cached residual; `act_sweep_ours_from_embeddings`
   is the same sweep run from the embeddings (what that saves). The same for the per-head `z` grid
   against `get_act_patch_attn_head_out_all_pos`.
2. attribution patching of the same sweep: ours (`attribution_patching`) against the usual TL recipe
   (clean `run_with_cache`, then a corrupted forward+backward with fwd/bwd hooks), on both TL routes;
   and the ratio of our activation sweep to our attribution patching (goal: at least 10x).
3. `run_with_cache` + `accumulated_resid(apply_ln=True)` + unembedding (the logit lens), ours vs TL's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")  # TL's sweeps draw a progress bar per sweep


def median_time(fn, reps: int) -> float:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def tl_attribution(tl, clean, corrupted, metric, names):
    """The TransformerLens recipe for attribution patching (Nanda 2023), one layer x position grid."""
    _, clean_cache = tl.run_with_cache(clean, names_filter=lambda n: n in names)
    acts, grads = {}, {}

    def saver(store, name):  # keyed by the name we asked for: the bridge reports its own alias
        def save(t, hook):
            store[name] = t.detach()

        return save

    tl.reset_hooks()
    for n in names:
        tl.add_hook(n, saver(acts, n), "fwd")
        tl.add_hook(n, saver(grads, n), "bwd")
    try:
        metric(tl(corrupted)).backward()
    finally:
        tl.reset_hooks()
        tl.zero_grad(set_to_none=True)
    return torch.stack([((clean_cache[n] - acts[n]) * grads[n]).sum(-1).sum(0) for n in names])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small model, one repetition (a smoke check)")
    ap.add_argument(
        "--model", default=None, help="model spec (default pythia-70m-init, or pythia-14m-init with --quick)"
    )
    ap.add_argument("--pos", type=int, default=None, metavar="INT", help="prompt length in tokens")
    ap.add_argument("--reps", type=int, default=None, metavar="INT", help="repetitions per row")
    ap.add_argument("--ioi", action="store_true", help="SmolLM2-135M on the IOI pair; patching rows, bridge only")
    ap.add_argument("--no-hooked", action="store_true", help="leave out TL's HookedTransformer rows")
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    import transformer_lens.patching as tlp

    import interp
    from interp.patching import activation_patching, attribution_patching

    spec = args.model or ("smollm2-135m" if args.ioi else "pythia-14m-init" if args.quick else "pythia-70m-init")
    reps = args.reps or (1 if args.quick or args.ioi else 5)
    model = interp.load_model(spec)
    with_hooked = not (args.ioi or args.no_hooked)
    hooked = model.to_transformer_lens() if with_hooked else None
    bridge = model.to_transformer_bridge()
    if args.ioi:
        clean = model.to_tokens("When Mary and John went to the store, John gave a drink to")
        corrupted = model.to_tokens("When Mary and John went to the store, Mary gave a drink to")
        a, b = model.to_single_token(" Mary"), model.to_single_token(" John")
        n_pos = clean.shape[1]
    else:
        n_pos = args.pos or (12 if args.quick else 24)
        gen = torch.Generator().manual_seed(0)
        clean = torch.randint(0, 256, (1, n_pos), generator=gen)
        corrupted = clean.clone()
        corrupted[0, n_pos // 3] = (clean[0, n_pos // 3] + 1) % 256
        a, b = 5, 7

    def metric(logits):
        return logits[0, -1, a] - logits[0, -1, b]

    names = [f"blocks.{l}.hook_resid_pre" for l in range(model.n_layers)]
    with torch.no_grad():
        _, hooked_cache = hooked.run_with_cache(clean) if with_hooked else (None, None)
        _, bridge_cache = bridge.run_with_cache(clean)
    results = {}
    runs = {
        "act_sweep_ours": lambda: activation_patching(model, clean, corrupted, "resid_pre", metric=metric),
        "act_sweep_ours_from_embeddings": lambda: activation_patching(
            model, clean, corrupted, "resid_pre", metric=metric, start_from_cache=False
        ),
        "act_sweep_ours_default_metric": lambda: activation_patching(
            model, clean, corrupted, "resid_pre", answer=a, wrong=b
        ),
        "act_sweep_tl_hooked": lambda: tlp.get_act_patch_resid_pre(hooked, corrupted, hooked_cache, metric),
        "act_sweep_tl_bridge": lambda: tlp.get_act_patch_resid_pre(bridge, corrupted, bridge_cache, metric),
        "z_sweep_ours": lambda: activation_patching(model, clean, corrupted, "z", metric=metric),
        "z_sweep_ours_default_metric": lambda: activation_patching(model, clean, corrupted, "z", answer=a, wrong=b),
        "z_sweep_tl_bridge": lambda: tlp.get_act_patch_attn_head_out_all_pos(bridge, corrupted, bridge_cache, metric),
        "attribution_ours": lambda: attribution_patching(model, clean, corrupted, "resid_pre", metric=metric),
        "attribution_tl_hooked": lambda: tl_attribution(hooked, clean, corrupted, metric, names),
        "attribution_tl_bridge": lambda: tl_attribution(bridge, clean, corrupted, metric, names),
        "logit_lens_ours": lambda: model.run_with_cache(clean)[1].accumulated_resid(apply_ln=True) @ model.W_U,
        "logit_lens_tl_hooked": lambda: hooked.run_with_cache(clean)[1].accumulated_resid(apply_ln=True) @ hooked.W_U,
        "logit_lens_tl_bridge": lambda: bridge.run_with_cache(clean)[1].accumulated_resid(apply_ln=True) @ bridge.W_U,
    }
    if not with_hooked:
        runs = {k: v for k, v in runs.items() if "hooked" not in k}
    if args.ioi:  # the patching grids of the issue only
        runs = {k: v for k, v in runs.items() if "sweep" in k}

    def grad_mode(k):  # TL's tutorials switch gradients off globally; only attribution needs them
        return torch.enable_grad() if k.startswith("attribution") else torch.no_grad()

    values = {}
    for k, fn in runs.items():  # warm-up, and the numbers compared below
        with grad_mode(k):
            values[k] = fn()
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(reps):  # interleaved, so load on the machine hits every row alike
        for k, fn in runs.items():
            with grad_mode(k):
                times[k].append(median_time(fn, 1))
    med = {k: statistics.median(v) for k, v in times.items()}
    results["setup"] = {
        "model": spec,
        "n_layers": model.n_layers,
        "d_model": model.d_model,
        "pos": n_pos,
        "reps": reps,
        "threads": torch.get_num_threads(),
    }
    results["seconds"] = {k: round(v, 4) for k, v in med.items()}

    def ratio(theirs, ours):
        return round(med[theirs] / med[ours], 2) if theirs in med and ours in med else None

    def diff(x, y):
        if x not in values or y not in values:
            return None
        vx, vy = (v if isinstance(v, torch.Tensor) else v.values for v in (values[x], values[y]))
        return float((vx - vy).abs().max())

    results["ratios_tl_over_ours"] = {
        "act_sweep_bridge": ratio("act_sweep_tl_bridge", "act_sweep_ours"),
        "act_sweep_bridge_vs_default_metric": ratio("act_sweep_tl_bridge", "act_sweep_ours_default_metric"),
        "act_sweep_hooked": ratio("act_sweep_tl_hooked", "act_sweep_ours"),
        "act_sweep_hooked_vs_default_metric": ratio("act_sweep_tl_hooked", "act_sweep_ours_default_metric"),
        "z_sweep_bridge": ratio("z_sweep_tl_bridge", "z_sweep_ours"),
        "z_sweep_bridge_vs_default_metric": ratio("z_sweep_tl_bridge", "z_sweep_ours_default_metric"),
        "attribution_hooked": ratio("attribution_tl_hooked", "attribution_ours"),
        "attribution_bridge": ratio("attribution_tl_bridge", "attribution_ours"),
        "logit_lens_hooked": ratio("logit_lens_tl_hooked", "logit_lens_ours"),
        "logit_lens_bridge": ratio("logit_lens_tl_bridge", "logit_lens_ours"),
    }
    results["act_sweep_from_embeddings_over_from_cache"] = ratio("act_sweep_ours_from_embeddings", "act_sweep_ours")
    results["act_sweep_over_attribution_ours"] = ratio("act_sweep_ours", "attribution_ours")
    results["agreement_max_abs_diff"] = {
        "act_sweep_vs_tl_bridge": diff("act_sweep_ours", "act_sweep_tl_bridge"),
        "act_sweep_default_metric_vs_tl_bridge": diff("act_sweep_ours_default_metric", "act_sweep_tl_bridge"),
        "act_sweep_vs_tl_hooked": diff("act_sweep_ours", "act_sweep_tl_hooked"),
        "act_sweep_from_cache_vs_from_embeddings": diff("act_sweep_ours", "act_sweep_ours_from_embeddings"),
        "z_sweep_vs_tl_bridge": diff("z_sweep_ours", "z_sweep_tl_bridge"),
        "z_sweep_default_metric_vs_tl_bridge": diff("z_sweep_ours_default_metric", "z_sweep_tl_bridge"),
        "logit_lens_vs_tl_hooked": diff("logit_lens_ours", "logit_lens_tl_hooked"),
    }
    if "attribution_ours" in values and "attribution_tl_hooked" in values:
        results["agreement_max_abs_diff"]["attribution_vs_tl_hooked"] = float(
            (values["attribution_ours"].effect - values["attribution_tl_hooked"]).abs().max()
        )
        results["attribution_vs_activation_correlation"] = float(
            torch.corrcoef(
                torch.stack([values["attribution_ours"].effect.flatten(), values["act_sweep_ours"].effect.flatten()])
            )[0, 1]
        )
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
