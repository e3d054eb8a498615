"""Circuits benchmark: mask-training step time against a plain forward+backward, and extraction time vs model size.

    .venv/bin/python benchmarks/bench_circuits.py [--quick]

Prints JSON. (1) On one model, the median time of: a plain forward+backward of the task loss w.r.t. the
weights; a SafeSeek mask step (head + neuron masks, straight-through, backward to the mask logits, Adam);
a pruning mask step (q/k/v/neuron/attn_out/mlp_out node masks with mean ablation); and the ratios to
the plain step. (2) Extraction time (SafeSeek and pruning, fixed step counts) for three model sizes.
(3) With `--eap` (a real model, default smollm2-135m): EAP over every edge of the residual-stream graph
on N IOI pairs, against per-edge activation patching (exact, `circuits.evaluation.edge_patching`) timed on a
random sample of edges and extrapolated to all of them (ratio; the goal is >= 100x); and EAP-IG's time
for several step counts.

    .venv/bin/python benchmarks/bench_circuits.py --eap --only-eap [--n 64] [--sample 6] [--ig-steps 1,3,5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from circuits.finders.masks import UnitMasks, site_means, sites_of
from circuits.finders.prune import PruneConfig, TargetNotReached, prune
from circuits.finders.safeseek import SafeSeekConfig, safeseek
from circuits.finders.weight_sparse import WeightSparseConfig, build_model
from circuits.tasks.binary import binary_loss, get_task


def timed(fn, reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def step_overhead(d_model: int, n_layers: int, batch: int, reps: int) -> dict:
    model = build_model(
        WeightSparseConfig(
            d_model=d_model, n_layers=n_layers, n_heads=d_model // 16, d_mlp=4 * d_model, l0=1.0, afrac=0.0, ctx_len=64
        )
    )
    task = get_task("quotes")
    b = task.make(batch, 0, model.tokenizer)
    inputs = {"input_ids": b.ids, "attention_mask": b.mask}
    for p in model.parameters():
        p.requires_grad_(True)

    def plain():
        model.hf_model.zero_grad()
        binary_loss(model(inputs), b).backward()

    ss = UnitMasks(model, ("head", "neuron"))
    opt_ss = torch.optim.Adam(ss.parameters(), lr=1e-2)
    prune_kinds = ("q", "k", "v", "neuron", "attn_out", "mlp_out")
    pm = UnitMasks(
        model,
        prune_kinds,
        init=0.1,
        means=site_means(model, sites_of(model, prune_kinds), [(b.ids, b.mask)]),
        clamp=(-1, 1),
    )
    opt_pm = torch.optim.AdamW(pm.parameters(), lr=3e-3)

    def mask_step(masks, opt):
        def run():
            with model.hooks(fwd_hooks=masks.hooks()):
                loss = binary_loss(model(inputs), b) + 1e-4 * masks.kept_count()
            opt.zero_grad()
            loss.backward()
            opt.step()

        return run

    t_plain = t_ss = t_pm = None
    rows = {"plain": [], "safeseek": [], "prune": []}
    for _ in range(3):  # interleave the three to share the machine's noise
        rows["plain"].append(timed(plain, reps))
        for p in model.parameters():
            p.requires_grad_(False)
        rows["safeseek"].append(timed(mask_step(ss, opt_ss), reps))
        rows["prune"].append(timed(mask_step(pm, opt_pm), reps))
        for p in model.parameters():
            p.requires_grad_(True)
    t_plain, t_ss, t_pm = (statistics.median(rows[k]) for k in ("plain", "safeseek", "prune"))
    return {
        "model": f"GPT-NeoX d_model {d_model}, {n_layers} layers",
        "batch": batch,
        "tokens": int(b.mask.sum()),
        "plain_fwd_bwd_ms": round(1e3 * t_plain, 2),
        "safeseek_step_ms": round(1e3 * t_ss, 2),
        "prune_step_ms": round(1e3 * t_pm, 2),
        "safeseek_overhead": round(t_ss / t_plain, 2),
        "prune_overhead": round(t_pm / t_plain, 2),
        "units": {"safeseek": ss.n_units, "prune": pm.n_units},
    }


def extraction(sizes, steps: int) -> list[dict]:
    out = []
    task = get_task("quotes")
    for d, layers in sizes:
        model = build_model(
            WeightSparseConfig(d_model=d, n_layers=layers, n_heads=d // 16, d_mlp=4 * d, l0=1.0, afrac=0.0)
        )
        t0 = time.perf_counter()
        safeseek(model, task, SafeSeekConfig(steps=steps, eval_every=steps, n_train=64, n_val=64), progress=False)
        t_ss = time.perf_counter() - t0
        t0 = time.perf_counter()
        try:
            prune(
                model,
                task,
                PruneConfig(steps=steps, lambda_steps=1, n_train=128, n_eval=128, target_loss=10.0),
                progress=False,
            )
        except TargetNotReached:
            pass
        t_pr = time.perf_counter() - t0
        n_params = sum(p.numel() for p in model.parameters())
        out.append(
            {
                "d_model": d,
                "layers": layers,
                "params": n_params,
                "steps": steps,
                "safeseek_s": round(t_ss, 2),
                "prune_s": round(t_pr, 2),
            }
        )
    base = out[0]
    for row in out:
        row["safeseek_vs_smallest"] = round(row["safeseek_s"] / base["safeseek_s"], 2)
        row["prune_vs_smallest"] = round(row["prune_s"] / base["prune_s"], 2)
    return out


def eap_vs_patching(spec: str, n: int, sample: int, ig_steps: list[int]) -> dict:
    import interp
    from circuits.evaluation.edge_patching import patched_metric
    from circuits.finders.eap import eap, eap_ig
    from circuits.model.residual_graph import EdgeGraph

    model = interp.load_model(spec)
    batch = get_task("ioi").make_pairs(n, 0, model.tokenizer)
    graph = EdgeGraph.of(model)
    t0 = time.perf_counter()
    scores = eap(model, batch)
    t_eap = time.perf_counter() - t0
    gen = torch.Generator().manual_seed(0)
    flat = torch.nonzero(graph.valid.flatten())[:, 0]
    picks = flat[torch.randperm(len(flat), generator=gen)[:sample]]
    cache: dict = {}
    clean = float(
        patched_metric(model, batch, graph.valid, cache=cache, graph=graph)["metric"].mean()
    )  # shares the corrupted runs
    t0 = time.perf_counter()
    effects, estimates = [], []
    for f in picks.tolist():
        keep = graph.valid.clone().flatten()
        keep[f] = False
        m = float(patched_metric(model, batch, keep.view_as(graph.valid), cache=cache, graph=graph)["metric"].mean())
        effects.append(m - clean)  # the change of the metric when that one edge is patched
        estimates.append(float(scores.scores.flatten()[f]))
    t_per_edge = (time.perf_counter() - t0) / sample
    ig = {}
    for k in ig_steps:
        t0 = time.perf_counter()
        eap_ig(model, batch, steps=k)
        ig[k] = round(time.perf_counter() - t0, 2)
    return {
        "model": spec,
        "n_pairs": n,
        "n_edges": graph.n_edges,
        "eap_seconds": round(t_eap, 2),
        "patching_seconds_per_edge": round(t_per_edge, 2),
        "patching_edges_sampled": sample,
        "patching_seconds_all_edges_extrapolated": round(t_per_edge * graph.n_edges, 1),
        "speedup_eap_vs_patching": round(t_per_edge * graph.n_edges / t_eap, 1),
        "eap_ig_seconds_by_steps": ig,
        "sampled_edge_patch_effects": effects,
        "sampled_edge_eap_estimates": estimates,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--eap", action="store_true", help="also EAP vs per-edge patching on a real model")
    p.add_argument("--only-eap", action="store_true", help="skip the mask benchmarks")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--n", type=int, default=64, help="IOI pairs")
    p.add_argument("--sample", type=int, default=6, help="edges patched one by one")
    p.add_argument("--ig-steps", default="1,3,5")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.only_eap:
        steps = [int(x) for x in a.ig_steps.split(",")]
        print(json.dumps({"threads": a.threads, "eap": eap_vs_patching(a.model, a.n, a.sample, steps)}, indent=1))
        return
    reps = 3 if a.quick else 10
    steps = 10 if a.quick else 40
    sizes = [(32, 1), (64, 2), (128, 4)] if a.quick else [(64, 2), (128, 4), (256, 6)]
    result = {"threads": a.threads, "overhead": step_overhead(128, 4, 32, reps), "extraction": extraction(sizes, steps)}
    if a.eap:
        result["eap"] = eap_vs_patching(a.model, a.n, a.sample, [int(x) for x in a.ig_steps.split(",")])
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
