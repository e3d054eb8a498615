"""One prepared GPU check: parity tests on CUDA, then each family's main job at a GPU-sized scale; one JSON.

    python benchmarks/gpu_check.py               # on a machine with one GPU: sized to finish in < 5 minutes
    python benchmarks/gpu_check.py --dry-run     # the same steps, CPU-sized, on the CPU (checks the script)

Steps (each timed; a failing step is reported and the others still run):
1. `parity`: `pytest -m cuda tests/gpu tests/attribution/test_cuda.py` (logits/caches per architecture, `interp
   cache` rows, SAE training, SDI job, CLI, attribution's EK-FAC / jobs / bf16, each against the CPU); with
   --dry-run the same tests with INTERP_TEST_DEVICE=cpu.
2. `cache`: `interp cache` throughput (tokens/s) on the default model (SmolLM2-135M, layer 15 residual).
3. `sae`: TopK SAE training step rate (steps/s, tokens/s) on that store, d_sae 8 x d_model, batch 4096.
4. `sdi`: an SDI attribution job (TensorSketch) on a looped GPT of ~25M parameters trained here for a
   few steps; reports rows/s and how exactly the loop steps sum to TracIn.
4b. `tracin`, `dra`: the same looped model's TracIn job (3 checkpoints, TensorSketch) and DRA job (hidden
   states, denoised); `ekfac`: an EK-FAC job on a Pythia-shaped model at init (one head's q|k|v, stdlib-docs
   data): rows/s each, and each job's scores finite.
5. `decoupling`: the probes' decoupling experiment (pre/post/sandwich norms) at a scale the CPU cannot
   reach in minutes, with its table.
6. `mda`: the MDA induction-head experiment (train, EK-FAC ranking, three retrainings) at GPU scale.

Every GPU timing is taken after `torch.cuda.synchronize` (`interp.infra.devices.synchronize`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

GPU = {
    "cache_model": "smollm2-135m",
    "cache_hook": "blocks.15.hook_resid_post",
    "cache_tokens": 262_144,
    "ctx": 256,
    "cache_batch": 64,
    "sae_steps": 200,
    "sae_batch": 4096,
    "sae_mult": 8,
    "sdi_hidden": 512,
    "sdi_loops": 8,
    "sdi_train": 1024,
    "sdi_queries": 16,
    "sdi_ctx": 128,
    "sdi_sketch": 4096,
    "dec": [
        "--steps",
        "3000",
        "--d-model",
        "256",
        "--n-layers",
        "6",
        "--n-heads",
        "8",
        "--batch-size",
        "64",
        "--ctx-len",
        "128",
        "--max-tokens",
        "4000000",
        "--warmup",
        "200",
    ],
    "mda": ["--pool", "8192", "--steps", "3000", "--batch", "64", "--eval-every", "100"],
    "ekfac_model": "pythia-160m-init",
    "ekfac_train": 512,
    "ekfac_queries": 16,
    "ekfac_component": "L6H3:qkv",
}
DRY = {
    "cache_model": "pythia-14m-init",
    "cache_hook": "blocks.3.hook_resid_post",
    "cache_tokens": 4096,
    "ctx": 32,
    "cache_batch": 8,
    "sae_steps": 10,
    "sae_batch": 256,
    "sae_mult": 2,
    "sdi_hidden": 32,
    "sdi_loops": 3,
    "sdi_train": 16,
    "sdi_queries": 2,
    "sdi_ctx": 32,
    "sdi_sketch": 256,
    "dec": ["--quick"],
    "mda": ["--quick"],
    "ekfac_model": "pythia-14m-init",
    "ekfac_train": 16,
    "ekfac_queries": 2,
    "ekfac_component": "L1H0:qkv",
}


def step(name: str, results: dict, fn) -> None:
    """Run one step, record its result or its error, and its wall time."""
    t0 = time.perf_counter()
    print(f"[gpu_check] {name} ...", file=sys.stderr, flush=True)
    try:
        results[name] = {"ok": True, **fn()}
    except Exception as exc:  # noqa: BLE001 - report and go on with the other steps
        results[name] = {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=4)[-1500:],
        }
    results[name]["seconds"] = round(time.perf_counter() - t0, 2)
    print(
        f"[gpu_check] {name}: {'ok' if results[name]['ok'] else 'FAILED'} in {results[name]['seconds']} s",
        file=sys.stderr,
        flush=True,
    )


def env_info(device: str) -> dict:
    import torch

    info = {"torch": torch.__version__, "device": device, "cuda_available": torch.cuda.is_available()}
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(torch.device(device))
        info.update(gpu=p.name, gpu_memory_gb=round(p.total_memory / 2**30, 1), capability=f"{p.major}.{p.minor}")
    return info


def parity(dry: bool, timeout: int) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if dry:
        env["INTERP_TEST_DEVICE"] = "cpu"
    tests = ["tests/gpu", "tests/attribution/test_cuda.py"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "cuda", *tests, "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error)", tail)}
    return {
        "returncode": proc.returncode,
        "summary": tail,
        **counts,
        **({"failures": proc.stdout[-3000:]} if proc.returncode else {}),
    }


def cache_step(cfg: dict, device: str, work: Path, state: dict) -> dict:
    import interp
    from interp.cache.caching import CacheConfig, cache_activations
    from interp.infra.devices import synchronize

    t0 = time.perf_counter()
    try:
        model = interp.load_model(cfg["cache_model"], device=device)
        spec = cfg["cache_model"]
    except (FileNotFoundError, ValueError) as exc:  # the GGUF package missing on a bare machine: say so, go on
        spec = "pythia-160m-init"
        print(f"[gpu_check] {cfg['cache_model']} unavailable ({exc}); using {spec}", file=sys.stderr)
        model = interp.load_model(spec, device=device)
        cfg = {**cfg, "cache_hook": "blocks.6.hook_resid_post"}
    load_s = time.perf_counter() - t0
    ccfg = CacheConfig(
        out=str(work / "store"),
        model=spec,
        hooks=[cfg["cache_hook"]],
        data="stdlib-docs",
        max_tokens=cfg["cache_tokens"],
        ctx_len=cfg["ctx"],
        seqs_per_shard=256,
        batch_size=cfg["cache_batch"],
        device=device,
    )
    synchronize(device)
    t1 = time.perf_counter()
    store, report = cache_activations(ccfg, model=model, progress=False)
    synchronize(device)
    dt = time.perf_counter() - t1
    state["store"], state["hook"] = store, cfg["cache_hook"]
    return {
        "model": spec,
        "quantization": model.provenance.get("quantization"),
        "load_seconds": round(load_s, 2),
        "tokens": len(store),
        "cache_seconds": round(dt, 2),
        "tokens_per_second": round(len(store) / dt),
        "verified": store.verify().ok,
    }


def sae_step(cfg: dict, device: str, work: Path, state: dict) -> dict:
    from sae.train import TrainConfig, train_sae

    store, hook = state["store"], state["hook"]
    d_in = store.hooks[hook][0]
    tc = TrainConfig(
        arch="topk",
        d_sae=cfg["sae_mult"] * d_in,
        k=32 if cfg["sae_mult"] >= 8 else 8,
        total_tokens=cfg["sae_steps"] * cfg["sae_batch"],
        batch_size=cfg["sae_batch"],
        checkpoint_every=max(cfg["sae_steps"], 2),
        device=device,
    )
    _, report = train_sae(store, tc, work / "sae", progress=False)  # float(loss) each step syncs the GPU
    steady = report.get("steady_seconds_per_step")
    return {
        "d_in": d_in,
        "d_sae": tc.d_sae,
        "k": tc.k,
        "batch": tc.batch_size,
        "steps": report["steps"],
        "steady_steps_per_second": round(1 / steady, 2) if steady else None,
        "steady_tokens_per_second": round(tc.batch_size / steady) if steady else None,
        "tokens_per_second_incl_first_step": report.get("tokens_per_second"),
        "final_losses": report.get("final_losses"),
    }


def _looped_run(cfg: dict, device: str, work: Path) -> dict:
    """A looped GPT trained here for 30 steps (checkpoints 10, 20, 30) and its token files (made once)."""
    import torch

    from attribution.jobs import save_tokens
    from attribution.looped import random_looped_gpt
    from attribution.train import train_lm
    from interp.data import byte_tokenizer, resolve_corpus

    marker = work / "looped" / "step_30"
    h = cfg["sdi_hidden"]
    if not marker.exists():
        n = cfg["sdi_train"] + cfg["sdi_queries"]
        tokens = resolve_corpus(
            "stdlib-docs", byte_tokenizer(), ctx_len=cfg["sdi_ctx"], max_tokens=(n + 64) * cfg["sdi_ctx"], seed=0
        ).tokens.long()
        model = random_looped_gpt(
            hidden_size=h,
            num_attention_heads=max(2, h // 64),
            num_hidden_layers=cfg["sdi_loops"],
            intermediate_size=4 * h,
            max_position_embeddings=cfg["sdi_ctx"],
        ).to(device)
        train_lm(model, tokens[:n], steps=30, batch_size=16, lr=1e-3, save_steps=(10, 20, 30), out=work / "looped")
        save_tokens(work / "train.safetensors", tokens[: cfg["sdi_train"]], "interp/byte-level")
        save_tokens(work / "queries.safetensors", tokens[cfg["sdi_train"] : n], "interp/byte-level")
        del model
        torch.cuda.empty_cache() if device.startswith("cuda") else None
    return dict(
        model=f"looped-gpt:{work / 'looped'}",
        train=f"tokens:{work / 'train.safetensors'}",
        queries=f"tokens:{work / 'queries.safetensors'}",
    )


def _timed_job(acfg) -> tuple[dict, float, object]:
    from attribution.jobs import load_scores, run_attribution
    from interp.infra.devices import synchronize

    synchronize(acfg.device)
    t0 = time.perf_counter()
    summary = run_attribution(acfg, progress=False)
    synchronize(acfg.device)
    return summary, time.perf_counter() - t0, load_scores(acfg.out)


def sdi_step(cfg: dict, device: str, work: Path) -> dict:
    from attribution.jobs import AttributeConfig

    data = _looped_run(cfg, device, work)
    acfg = AttributeConfig(
        method="sdi",
        out=str(work / "sdi"),
        sketch_dim=cfg["sdi_sketch"],
        shard_size=128,
        batch_size=16,
        device=device,
        **data,
    )
    summary, dt, s = _timed_job(acfg)
    gap = float((s["sdi"].sum(-1) - s["scores"]).abs().max() / s["scores"].abs().max().clamp_min(1e-30))
    h = cfg["sdi_hidden"]
    return {
        "hidden": h,
        "loops": cfg["sdi_loops"],
        "train_rows": cfg["sdi_train"],
        "queries": cfg["sdi_queries"],
        "ctx": cfg["sdi_ctx"],
        "sketch_dim": cfg["sdi_sketch"],
        "checkpoints": 3,
        "job_seconds": round(dt, 2),
        "train_rows_per_second": round(cfg["sdi_train"] / dt, 1),
        "steps_sum_to_tracin_max_gap": gap,
        "shards": summary.get("shards"),
    }


def attribution_job_step(method: str, cfg: dict, device: str, work: Path) -> dict:
    """TracIn / DRA on the looped run, EK-FAC on a Pythia-shaped model: rows/s and finite scores."""
    import torch

    from attribution.jobs import AttributeConfig

    if method == "ekfac":
        n = cfg["ekfac_train"]
        acfg = AttributeConfig(
            method="ekfac",
            model=cfg["ekfac_model"],
            train="stdlib-docs",
            queries="stdlib-docs",
            out=str(work / method),
            component=cfg["ekfac_component"],
            fit_samples=min(n, 64),
            ctx_len=cfg["ctx"],
            max_train=n,
            max_queries=cfg["ekfac_queries"],
            shard_size=128,
            batch_size=8,
            device=device,
        )
    else:
        n = cfg["sdi_train"]
        acfg = AttributeConfig(
            method=method,
            out=str(work / method),
            sketch_dim=cfg["sdi_sketch"],
            shard_size=128,
            batch_size=16,
            device=device,
            **_looped_run(cfg, device, work),
        )
    summary, dt, s = _timed_job(acfg)
    return {
        "method": method,
        "model": acfg.model,
        "train_rows": n,
        "queries": summary["n_queries"],
        "job_seconds": round(dt, 2),
        "train_rows_per_second": round(n / dt, 1),
        "scores_finite": bool(torch.isfinite(s["scores"]).all()),
        "shards": summary.get("shards"),
    }


def experiment(module: str, args: list[str], device: str, work: Path, timeout: int) -> dict:
    out = work / module.rsplit(".", 1)[-1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", module, "--out", str(out), "--device", device, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode:
        raise RuntimeError(f"{module} exited {proc.returncode}: {proc.stderr[-1500:]}")
    result = json.loads((out / ("results.json" if "decoupling" in module else "result.json")).read_text())
    if "decoupling" in module:
        return {
            "args": args,
            "table": result.get("table"),
            "train_seconds": {v: r["train"]["seconds"] for v, r in result["variants"].items()},
        }
    keep = {k: v for k, v in result.items() if not isinstance(v, (list, dict)) or k == "enrichment"}
    keep["runs"] = {
        name: {k: v for k, v in run.items() if k != "curve"} for name, run in result.get("runs", {}).items()
    }
    return {"args": args, "result": json.loads(json.dumps(keep, default=str))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="CPU-sized steps on the CPU (checks the script, no GPU)")
    ap.add_argument("--device", default=None, help="default: cuda (cpu with --dry-run)")
    ap.add_argument("--only", default="", help="comma-separated steps to run (default: all)")
    ap.add_argument("--out", default=None, help="work folder (default: a temporary one, removed)")
    args = ap.parse_args()

    import torch

    from interp.infra.devices import resolve_device

    device = resolve_device(args.device or ("cpu" if args.dry_run else "cuda"))
    if args.dry_run:
        torch.set_num_threads(1)
    cfg = DRY if args.dry_run else GPU
    wanted = {s.strip() for s in args.only.split(",") if s.strip()}
    results: dict = {"dry_run": args.dry_run, "env": env_info(device)}
    state: dict = {}
    tmp = tempfile.TemporaryDirectory(prefix="gpu_check.") if args.out is None else None
    work = Path(args.out or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    plan = [
        ("parity", lambda: parity(args.dry_run, 240)),
        ("cache", lambda: cache_step(cfg, device, work / "cache", state)),
        ("sae", lambda: sae_step(cfg, device, work / "sae", state)),
        ("sdi", lambda: sdi_step(cfg, device, work / "attribution")),
        ("tracin", lambda: attribution_job_step("tracin", cfg, device, work / "attribution")),
        ("dra", lambda: attribution_job_step("dra", cfg, device, work / "attribution")),
        ("ekfac", lambda: attribution_job_step("ekfac", cfg, device, work / "attribution")),
        ("decoupling", lambda: experiment("interp.probes.experiments.decoupling", cfg["dec"], device, work, 240)),
        ("mda", lambda: experiment("attribution.experiments.mda", cfg["mda"], device, work, 240)),
    ]
    for name, fn in plan:
        if wanted and name not in wanted:
            continue
        if name == "sae" and "store" not in state:
            results[name] = {"ok": False, "error": "needs the cache step's store"}
            continue
        step(name, results, fn)
    results["total_seconds"] = round(time.perf_counter() - t0, 1)
    results["all_ok"] = all(r.get("ok") for r in results.values() if isinstance(r, dict) and "ok" in r)
    print(json.dumps(results, indent=1, default=str))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
