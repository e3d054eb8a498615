"""Attribution speed and memory, side by side in one run; prints JSON with times, peaks and ratios.

    .venv/bin/python benchmarks/bench_attribution.py            # a few minutes on 2 cores
    .venv/bin/python benchmarks/bench_attribution.py --quick    # smaller, for a smoke check

1. SDI at three looped-GPT sizes: TensorSketch (m = 2048 per parameter tensor) against exact per-example,
   per-step gradients (materialised from the same hooks). Each measurement runs in a fresh process:
   wall time of featurising the training and query sets, and peak RSS above the loaded model; ratios
   exact / sketch.
2. Influence throughput (training sequences scored per second) on one Pythia-shaped model (2 layers,
   d 128): our EK-FAC restricted to one head's W_Q, W_K; Kronfluence (if it imports) with EK-FAC over
   the whole fused q|k|v projection of the same layer (it cannot slice one head), same data.
3. Time against the number of training samples for a sketched SDI job (it should be linear: the
   per-sample time is reported for each N, with the ratio of the largest to the smallest).
4. Crossover: item 1 up to a looped GPT of 12.6M body parameters (d 1024), where exact per-example,
   per-step features take GBs; the first size at which the sketch is faster / smaller is reported.
5. `--smollm2-run DIR` (the output of `python -m attribution.experiments.smollm2`): scores per second of
   `interp attribute` TracIn and EK-FAC jobs on SmolLM2-135M, in-process and on a local Ray with 2
   workers (score phase: the shards, after the shared preparation), and the ratio Ray / in-process.
7. `--store` (only that part): serial queries through the gradient store (`attribution.gradstore`), then the
   same ten through one resident `attribution.resident.GradientIndex`, beside one `interp attribute query`
   process for the tenth (start-up included). 10,000
   training sequences of the looped LDS task (stdlib-docs, 32 bytes, d 64, 3 loops; briefly trained), gradients
   of the looped block projected to 512 (seeded Gaussian) once; then ten query sets of 8 sequences through the
   store, and the tenth also recomputed directly (every training gradient again, same projection), side by side:
   seconds, ratio, and whether the top-10 rows are identical. Peak RSS of a query (in a fresh process) against
   the store and against stores of the training set tiled 2x and 4x: ratios to 1x.
6. GPU rows: with CUDA present, item 1 and 5 repeat on `--device cuda` (`benchmarks/gpu_check.py` runs the
   attribution GPU job); without CUDA they are reported as not run.

Kronfluence is an optional comparison (item 2): install it without its torchvision dependency,
`pip install --no-deps kronfluence==1.0.1 && pip install -e ".[attribution-bench]"` (in the checkout) (NOTES.md).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch

SIZES = {
    "small": dict(hidden_size=32, num_attention_heads=2, intermediate_size=128),
    "medium": dict(hidden_size=128, num_attention_heads=4, intermediate_size=512),
    "large": dict(hidden_size=256, num_attention_heads=8, intermediate_size=1024),
    "xl": dict(hidden_size=512, num_attention_heads=8, intermediate_size=2048),
    "xxl": dict(hidden_size=1024, num_attention_heads=16, intermediate_size=4096),
}
QUICK_SIZES = ("small", "medium", "large")


def _model(size: str, loops: int = 4, ctx: int = 64):
    from attribution.looped import random_looped_gpt

    return random_looped_gpt(num_hidden_layers=loops, max_position_embeddings=ctx, **SIZES[size])


def one(size: str, mode: str, n_train: int, n_query: int, device: str = "cpu") -> dict:
    """Featurise n_train + n_query sequences once (exact or sketched); time and peak RSS growth."""
    from attribution.sdi import looped_featurizer, sdi_from_features
    from attribution.tracin import features

    torch.set_num_threads(1)
    model = _model(size).to(device)
    g = torch.Generator().manual_seed(0)
    train, queries = (
        torch.randint(0, 257, (n_train, 64), generator=g),
        torch.randint(0, 257, (n_query, 64), generator=g),
    )
    feat = looped_featurizer(model, None if mode == "exact" else 2048)
    if device != "cpu":
        torch.cuda.reset_peak_memory_stats()
    features(model, feat, queries[:2])  # warm-up
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    res = sdi_from_features(
        features(model, feat, train, batch_size=8), features(model, feat, queries, batch_size=8), 1.0
    )
    if device != "cpu":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    n_body = sum(p.numel() for p in model.body_parameters().values())
    out = {
        "seconds": seconds,
        "peak_rss_growth_mb": (peak - base) / 1024,
        "body_params": n_body,
        "feature_dim": feat.dim(),
        "checksum": float(res.tracin.sum()),
    }
    if device != "cpu":
        out["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def run_one(size, mode, n_train, n_query, device="cpu") -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--one", size, mode, str(n_train), str(n_query), device],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        return {"failed": (out.stderr.strip().splitlines() or ["killed"])[-1][:300], "returncode": out.returncode}
    return json.loads(out.stdout.strip().splitlines()[-1])


def crossover(sizes, n_train: int, n_query: int, device: str = "cpu") -> dict:
    """Sketch vs exact at each size (fresh process each); the first size where the sketch wins on time / memory."""
    key = "peak_cuda_mb" if device != "cpu" else "peak_rss_growth_mb"
    table = {}
    for size in sizes:
        sk, ex = run_one(size, "sketch", n_train, n_query, device), run_one(size, "exact", n_train, n_query, device)
        row = {"body_params": sk.get("body_params"), "sketch": sk, "exact": ex}
        if "seconds" in sk and "seconds" in ex:
            row["time_ratio_exact_over_sketch"] = ex["seconds"] / sk["seconds"]
            row["memory_ratio_exact_over_sketch"] = max(ex[key], 1e-3) / max(sk[key], 1e-3)
        table[size] = row
        print(json.dumps({size: row}), file=sys.stderr, flush=True)

    def first(ratio):
        return next((s for s, r in table.items() if r.get(ratio, 0) > 1), None)

    return {
        "rows": table,
        "sketch_faster_from": first("time_ratio_exact_over_sketch"),
        "sketch_smaller_from": first("memory_ratio_exact_over_sketch"),
        "n_train": n_train,
        "n_query": n_query,
        "device": device,
    }


def smollm2_jobs(run_dir: str, device: str = "cpu") -> dict:
    """Scores/s of TracIn and EK-FAC `interp attribute` jobs on the fine-tuned SmolLM2, in-process vs Ray (2
    workers)."""
    import tempfile
    from pathlib import Path

    from safetensors.torch import load_file

    import attribution.jobs as jobs
    from attribution.jobs import AttributeConfig, run_attribution
    from interp.infra.jobs import clear_worker_cache

    root = Path(run_dir)
    if not (root / "run").is_dir():
        return {
            "skipped": f"no fine-tuning run in {run_dir}: python -m attribution.experiments.smollm2 --out {run_dir}"
        }
    timed = {}
    real = jobs._run_shards

    def timing(cfg, store, train, prep, todo, progress, *ray):
        t0 = time.perf_counter()
        real(cfg, store, train, prep, todo, progress, *ray)
        timed["score_seconds"] = time.perf_counter() - t0

    jobs._run_shards = timing
    steps = sorted(int(p.name[5:]) for p in (root / "run").glob("step_*"))
    common = dict(
        train=f"tokens:{root / 'train.safetensors'}",
        queries=f"tokens:{root / 'queries.safetensors'}",
        device=device,
        batch_size=8,
    )
    methods = {
        "tracin": dict(
            model="smollm2-135m",
            checkpoints=[str(root / "run")],
            modules=["*layers.2[6-9].self_attn.*"],
            sketch_dim=2048,
        ),
        "ekfac": dict(
            model="smollm2-135m", checkpoints=[f"{root / 'run'}@{steps[-1]}"], component="L27H3:qk", fit_samples=16
        ),
    }
    out = {}
    try:
        with tempfile.TemporaryDirectory() as d:
            for method, kw in methods.items():
                for executor in ("inprocess", "ray"):
                    clear_worker_cache()
                    n = len(load_file(str(root / "train.safetensors"))["tokens"])
                    cfg = AttributeConfig(
                        method=method,
                        out=f"{d}/{method}_{executor}",
                        executor=executor,
                        num_workers=2 if executor == "ray" else None,
                        shard_size=(n + 1) // 2,
                        **common,
                        **kw,
                    )
                    t0 = time.perf_counter()
                    summary = run_attribution(cfg, progress=False)
                    job_s = time.perf_counter() - t0
                    out[f"{method}_{executor}"] = {
                        "n_train": n,
                        "n_queries": summary["n_queries"],
                        "job_seconds": job_s,
                        "score_seconds": timed["score_seconds"],
                        "scores_per_second": n * summary["n_queries"] / timed["score_seconds"],
                        "train_per_second": n / timed["score_seconds"],
                    }
                    print(
                        json.dumps({f"{method}_{executor}": out[f"{method}_{executor}"]}), file=sys.stderr, flush=True
                    )
                out[f"{method}_ray_over_inprocess"] = (
                    out[f"{method}_ray"]["scores_per_second"] / out[f"{method}_inprocess"]["scores_per_second"]
                )
    finally:
        jobs._run_shards = real
    return out


def influence_throughput(n_train: int) -> dict:
    import interp
    from attribution.influence import HeadComponent, fit_ekfac, influence_scores, lm_loss, mean_gradient
    from interp.models.pythia import random_pythia

    torch.set_num_threads(1)
    # A Pythia-shaped model: Kronfluence needs modules that are called (the looped GPT's shared Linears
    # are used through per-step proxies, so Kronfluence sees no activations there).
    hf = random_pythia(
        "14m",
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=512,
        vocab_size=257,
        max_position_embeddings=64,
    )
    model = interp.HookedModel(hf, None)
    g = torch.Generator().manual_seed(0)
    train, queries = torch.randint(0, 257, (n_train, 64), generator=g), torch.randint(0, 257, (4, 64), generator=g)
    comp = HeadComponent(1, 0, "qk")
    t0 = time.perf_counter()
    factors = fit_ekfac(model, comp, train[:32])
    fit_s = time.perf_counter() - t0
    probe = mean_gradient(model, comp, queries, lambda m, i, k: -lm_loss(m, i, k))
    t0 = time.perf_counter()
    influence_scores(model, factors, train, probe)
    score_s = time.perf_counter() - t0
    out = {"ours_head_qk": {"fit_seconds": fit_s, "score_seconds": score_s, "train_per_second": n_train / score_s}}
    out["kronfluence"] = _kronfluence(hf, train, queries)
    return out


def _kronfluence(hf, train, queries) -> dict:
    """Kronfluence EK-FAC pairwise scores over layer 1's whole q|k|v projection, if it is installed."""
    try:
        from kronfluence.analyzer import Analyzer, prepare_model
        from kronfluence.arguments import FactorArguments, ScoreArguments
        from kronfluence.task import Task
    except Exception as e:  # noqa: BLE001 - optional comparison
        return {"skipped": f"kronfluence not importable: {e}"}
    import tempfile

    import torch.nn.functional as F

    class LMTask(Task):
        def compute_train_loss(self, batch, model, sample=False):
            logits = model(input_ids=batch).logits[:, :-1].flatten(0, 1)
            if sample:
                with torch.no_grad():
                    labels = torch.multinomial(logits.softmax(-1), 1).flatten()
            else:
                labels = batch[:, 1:].flatten()
            return F.cross_entropy(logits, labels, reduction="sum")

        def compute_measurement(self, batch, model):
            return self.compute_train_loss(batch, model)

        def get_influence_tracked_modules(self):
            return ["gpt_neox.layers.1.attention.query_key_value"]

    class DS(torch.utils.data.Dataset):
        def __init__(self, t):
            self.t = t

        def __len__(self):
            return len(self.t)

        def __getitem__(self, i):
            return self.t[i]

    try:
        task = LMTask()
        model = prepare_model(hf, task)
        with tempfile.TemporaryDirectory() as d:
            analyzer = Analyzer("bench", model=model, task=task, output_dir=d, disable_tqdm=True, cpu=True)
            t0 = time.perf_counter()
            analyzer.fit_all_factors(
                "f",
                dataset=DS(train[:32]),
                per_device_batch_size=8,
                factor_args=FactorArguments(strategy="ekfac"),
                overwrite_output_dir=True,
            )
            fit_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            analyzer.compute_pairwise_scores(
                "s",
                factors_name="f",
                query_dataset=DS(queries),
                train_dataset=DS(train),
                per_device_query_batch_size=4,
                per_device_train_batch_size=8,
                score_args=ScoreArguments(),
                overwrite_output_dir=True,
            )
            score_s = time.perf_counter() - t0
        return {
            "fit_seconds": fit_s,
            "score_seconds": score_s,
            "train_per_second": len(train) / score_s,
            "note": "EK-FAC over the whole fused q|k|v Linear of layer 1 (all heads, q, k and v)",
        }
    except Exception as e:  # noqa: BLE001
        return {"failed": f"{type(e).__name__}: {str(e)[:300]}"}


def scaling(ns: list[int]) -> dict:
    from attribution.sdi import looped_featurizer
    from attribution.tracin import features

    torch.set_num_threads(1)
    model = _model("small")
    feat = looped_featurizer(model, 2048)
    g = torch.Generator().manual_seed(0)
    queries = torch.randint(0, 257, (4, 64), generator=g)
    fq = features(model, feat, queries)
    rows = []
    for n in ns:
        train = torch.randint(0, 257, (n, 64), generator=g)
        t0 = time.perf_counter()
        torch.einsum("id,jtd->ijt", features(model, feat, train, batch_size=8).sum(1), fq)
        s = time.perf_counter() - t0
        rows.append({"n_train": n, "seconds": s, "ms_per_sample": 1000 * s / n})
    return {"rows": rows, "per_sample_ratio_largest_to_smallest": rows[-1]["ms_per_sample"] / rows[0]["ms_per_sample"]}


def _tiled_store(src, dst, times: int):
    """A copy of the gradient store `src` whose training set is `times` copies of src's (rows re-indexed)."""
    from dataclasses import replace

    from interp.store import ActivationStore, write_shard_file

    a = ActivationStore.open(src)
    data = dict(
        a.meta.data,
        n_train=times * a.meta.data["n_train"],
        train=f"{a.meta.data['train']} x{times}",
        row_hashes=a.meta.data["row_hashes"] * times,
    )
    order = a.shard_indices
    b = ActivationStore.open_or_create(dst, replace(a.meta, data=data), n_shards_planned=times * len(order))
    n = len(a)
    for t in range(times):
        for j, i in enumerate(order):
            sh = a.read_shard(i)
            sh["seq"] = sh["seq"] + t * n
            b.commit_shard(write_shard_file(dst, t * len(order) + j, sh))
    b.close()


def store_query_rss(store: str, queries: str) -> dict:
    """Queries against `store` in this (fresh) process: the whole process's peak RSS, and the RSS growth during a
    second query's streamed search (sampled every millisecond: the part that would grow with the store)."""
    import threading

    import psutil

    from attribution import gradstore
    from attribution.gradstore import QueryConfig
    from attribution.resident import query_store

    torch.set_num_threads(1)
    cfg = QueryConfig(store=store, queries=queries, top=10, device="cpu")
    query_store(cfg)  # warm: model loaded, projection matrices made
    proc, samples, stop = psutil.Process(), [], threading.Event()
    real = gradstore.streamed_topk

    def sample():
        while not stop.is_set():
            samples.append(proc.memory_info().rss)
            time.sleep(0.001)

    def sampled(*a, **kw):
        base = proc.memory_info().rss
        thread = threading.Thread(target=sample)
        thread.start()
        try:
            return real(*a, **kw)
        finally:
            stop.set()
            thread.join()
            samples.append(base)
            samples[:] = [max(samples) - base]

    gradstore.streamed_topk = sampled
    t0 = time.perf_counter()
    query_store(cfg)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "peak_rss_mb": round(peak / 2**20, 1),
        "search_rss_growth_mb": round(samples[0] / 2**20, 2) if samples else None,
        "query_seconds": round(seconds, 4),
    }


def serial_queries(work: str, n_train: int = 10_000, n_sets: int = 10, per_set: int = 8, dim: int = 512) -> dict:
    """Item 7: ten query sets through the store vs recomputing the training side for the tenth."""
    from pathlib import Path

    from transformers.utils import logging as hf_logging

    from attribution.gradstore import BuildConfig, Projection, QueryConfig, build_store, exact_topk
    from attribution.jobs import save_tokens
    from attribution.lds_task import LMTaskConfig, build_tokens, new_model
    from attribution.resident import query_store
    from attribution.train import train_lm

    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    root = Path(work)
    task = LMTaskConfig(kind="looped", n_train=n_train, n_query=n_sets * per_set)
    train, queries = build_tokens(task)
    model = new_model(task)
    train_lm(model.hf_model, train[:1024], steps=64, batch_size=16, lr=3e-3, save_steps=(64,), out=root / "model")
    spec = f"looped-gpt:{root / 'model'}@64"
    save_tokens(root / "train.safetensors", train, "interp/byte-level")
    t0 = time.perf_counter()
    built = build_store(
        BuildConfig(
            model=spec,
            train=f"tokens:{root / 'train.safetensors'}",
            out=str(root / "store"),
            projection="random",
            dim=dim,
            shard_size=500,
            batch_size=50,
            device="cpu",
        ),
        progress=False,
    )
    build_s = time.perf_counter() - t0
    sets = []
    for k in range(n_sets):
        save_tokens(root / f"q{k}.safetensors", queries[k * per_set : (k + 1) * per_set], "interp/byte-level")
        t = time.perf_counter()
        res = query_store(
            QueryConfig(store=str(root / "store"), queries=f"tokens:{root / f'q{k}.safetensors'}", top=10, device="cpu")
        )
        sets.append({"seconds": time.perf_counter() - t, "search_seconds": res["search_seconds"]})
    from attribution.resident import GradientIndex

    t = time.perf_counter()
    index = GradientIndex(str(root / "store"), top=10, device="cpu")
    index_open_s = time.perf_counter() - t
    index_sets = []
    for k in range(n_sets):
        t = time.perf_counter()
        held = index.query(f"tokens:{root / f'q{k}.safetensors'}")
        index_sets.append(time.perf_counter() - t)
    last = f"tokens:{root / f'q{n_sets - 1}.safetensors'}"
    t = time.perf_counter()
    cli = subprocess.run(
        [sys.executable, "-m", "interp", "attribute", "query", "--store", str(root / "store"), "--queries", last]
        + ["--top", "10", "--device", "cpu"],
        capture_output=True,
        text=True,
    )
    cli_s = time.perf_counter() - t
    t = time.perf_counter()
    vals, idx = exact_topk(
        spec, train, queries[(n_sets - 1) * per_set :], [], Projection("random", dim, 0), 10, batch_size=50
    )
    direct_s = time.perf_counter() - t
    for m in (2, 4):
        _tiled_store(root / "store", root / f"store_x{m}", m)
    rss = {}
    for name in ("store", "store_x2", "store_x4"):
        out = subprocess.run(
            [sys.executable, __file__, "--store-rss", str(root / name), f"tokens:{root / 'q0.safetensors'}"],
            capture_output=True,
            text=True,
        )
        rss[name] = (
            json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {"failed": out.stderr[-300:]}
        )
    peak = {k: v.get("peak_rss_mb") for k, v in rss.items()}
    store_mb = {k: round(sum(f.stat().st_size for f in (root / k).glob("shard_*")) / 2**20, 1) for k in rss}
    tenth = sets[-1]["seconds"]
    return {
        "n_train": n_train,
        "query_sets": n_sets,
        "queries_per_set": per_set,
        "projection": built["projection"],
        "store_dim": built["dim"],
        "n_params": built["n_params"],
        "build_seconds": round(build_s, 2),
        "query_set_seconds": [round(x["seconds"], 3) for x in sets],
        "tenth_query_set_seconds": round(tenth, 3),
        "tenth_recomputed_seconds": round(direct_s, 2),
        "ratio_recompute_over_store": round(direct_s / tenth, 1),
        "top10_identical": bool(torch.equal(res["rows"], idx)),
        "resident_index_open_seconds": round(index_open_s, 2),
        "resident_query_set_seconds": [round(x, 4) for x in index_sets],
        "resident_search": held["search"],
        "resident_top10_identical": bool(torch.equal(held["rows"], res["rows"])),
        "cli_call_seconds": round(cli_s, 2) if cli.returncode == 0 else f"failed: {cli.stderr[-200:]}",
        "ratio_cli_call_over_resident_tenth": round(cli_s / index_sets[-1], 1) if cli.returncode == 0 else None,
        "max_abs_score_diff": float((res["scores"] - vals).abs().max()),
        "store_mb": store_mb,
        "query_peak_rss_mb": peak,
        "query_rss": rss,
        "peak_rss_ratio_x2": round(peak["store_x2"] / peak["store"], 3) if all(peak.values()) else None,
        "peak_rss_ratio_x4": round(peak["store_x4"] / peak["store"], 3) if all(peak.values()) else None,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--one", nargs=5, help=argparse.SUPPRESS)
    p.add_argument(
        "--sizes", default=None, help="comma-separated looped-GPT sizes (default: all; --quick: small..large)"
    )
    p.add_argument("--smollm2-run", default=None, help="fine-tuning output folder for the SmolLM2 job rows")
    p.add_argument("--only", default=None, help="comma-separated parts: crossover,scaling,influence,smollm2")
    p.add_argument("--store", action="store_true", help="serial queries through the gradient store (item 7) only")
    p.add_argument("--n-train", type=int, default=10_000, help="--store: training sequences")
    p.add_argument("--store-rss", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.store_rss:
        print(json.dumps(store_query_rss(*args.store_rss)))
        return
    if args.store:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="bench_store.") as work:
            print(json.dumps({"serial_queries": serial_queries(work, args.n_train)}, indent=1))
        return
    if args.one:
        size, mode, n_train, n_query, device = args.one
        print(json.dumps(one(size, mode, int(n_train), int(n_query), device)))
        return
    parts = set((args.only or "crossover,scaling,influence,smollm2").split(","))
    sizes = args.sizes.split(",") if args.sizes else list(QUICK_SIZES if args.quick else SIZES)
    n_train, n_query = (16, 4) if args.quick else (8, 2)
    report = {}
    if "crossover" in parts:
        report["sdi_sketch_vs_exact"] = crossover(sizes, n_train, n_query)
    if "scaling" in parts:
        report["time_vs_n_train"] = scaling([8, 16, 32] if args.quick else [16, 32, 64, 128])
        print(json.dumps(report["time_vs_n_train"]), file=sys.stderr, flush=True)
    if "influence" in parts:
        report["influence_throughput"] = influence_throughput(32 if args.quick else 128)
    if "smollm2" in parts and args.smollm2_run:
        report["smollm2_jobs"] = smollm2_jobs(args.smollm2_run)
    if torch.cuda.is_available():
        report["gpu"] = {"crossover": crossover(sizes, n_train, n_query, "cuda")}
        if args.smollm2_run:
            report["gpu"]["smollm2_jobs"] = smollm2_jobs(args.smollm2_run, "cuda")
    else:
        report["gpu"] = {"skipped": "no CUDA device here; the GPU rows run where one is present"}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
