"""Caching overhead, side by side in one run; prints JSON with times and ratios to the bare HF forward.

    .venv/bin/python benchmarks/bench_cache.py            # full run (a few minutes on 2 cores)
    .venv/bin/python benchmarks/bench_cache.py --quick    # smaller, for a smoke check

1. Forward passes on the same model and batch, interleaved and repeated, medians reported:
   bare HF forward; our `run_with_cache` of every `hook_resid_post` (with logits, and stopping early
   without them); TransformerLens `run_with_cache` of the same hooks (Pythia-shaped model only, built from
   the same weights); an nnsight trace saving the same layer outputs.
2. Store writes: `write_shard_file` (sha256 on the way, temp file, fsync, rename) against a bare
   `safetensors.torch.save_file` of the same tensors, each writing a new file.
3. Peak memory (max RSS of a fresh process) while `interp cache` writes N tokens to disk, for two N:
   it must not grow with the token count.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def timed(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def interleaved(cases: dict, reps: int, warmup: int = 1) -> dict[str, float]:
    """Median seconds per case, running the cases round-robin so machine noise hits all alike."""
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(reps):
        for name, fn in cases.items():
            samples[name] += timed(fn, 1)
    return {k: statistics.median(v) for k, v in samples.items()}


def interleaved_new_files(cases: dict, reps: int, folder: str) -> dict[str, float]:
    """Median seconds of write cases `fn(i)` that each create a new file, round-robin; the files are
    deleted between repetitions, outside the timing (a first round is a warm-up)."""
    samples: dict[str, list[float]] = {k: [] for k in cases}
    i = 0
    for rep in range(reps + 1):
        for name, fn in cases.items():
            i += 1
            t0 = time.perf_counter()
            fn(i)
            if rep:
                samples[name].append(time.perf_counter() - t0)
            for p in Path(folder).iterdir():
                p.unlink()
    return {k: statistics.median(v) for k, v in samples.items()}


def forward_cases(model, ids: torch.Tensor, with_tl: bool) -> dict:
    names = [f"blocks.{i}.hook_resid_post" for i in range(model.n_layers)]
    hf = model.hf_model
    cases = {
        "bare_hf_forward": lambda: hf(input_ids=ids, use_cache=False),
        "ours_run_with_cache": lambda: model.run_with_cache(ids, names=names),
        "ours_run_with_cache_no_logits": lambda: model.run_with_cache(ids, names=names, return_logits=False),
    }
    lm = model.nnsight
    envoy = lm
    for part in model.adapter.layers.split("."):  # nnsight envoys mirror the module tree
        envoy = getattr(envoy, part)

    def nnsight_trace():
        with lm.trace(ids):
            saved = [envoy[i].output.save() for i in range(model.n_layers)]  # noqa: F841

    cases["nnsight_trace_save"] = nnsight_trace
    if with_tl:
        tl = model.to_transformer_lens()
        cases["transformer_lens_run_with_cache"] = lambda: tl.run_with_cache(ids, names_filter=names)
    return cases


def bench_forward(spec: str, batch: int, pos: int, reps: int, with_tl: bool) -> dict:
    import interp

    model = interp.load_model(spec)
    ids = torch.randint(0, min(model.d_vocab, 49152), (batch, pos), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        med = interleaved(forward_cases(model, ids, with_tl), reps)
    base = med["bare_hf_forward"]
    return {
        "model": spec,
        "batch": batch,
        "pos": pos,
        "median_seconds": {k: round(v, 4) for k, v in med.items()},
        "ratio_to_bare": {k: round(v / base, 3) for k, v in med.items()},
    }


def bench_store_write(rows: int, d: int, reps: int) -> dict:
    from safetensors.torch import save_file

    from interp.store import write_shard_file
    from interp.store.safetensors_io import write_safetensors_hashed

    g = torch.Generator().manual_seed(0)
    tensors = {
        "blocks.0.hook_resid_post": torch.randn(rows, d, generator=g),
        "tokens": torch.zeros(rows, dtype=torch.int32),
        "seq": torch.zeros(rows, dtype=torch.int64),
        "pos": torch.zeros(rows, dtype=torch.int32),
    }
    mb = sum(t.numel() * t.element_size() for t in tensors.values()) / 1e6
    # Each write makes a new file, as a caching run does (replacing a file costs extra in both cases).
    with tempfile.TemporaryDirectory() as tmp:
        cases = {
            "bare_safetensors_save_file": lambda i: save_file(tensors, os.path.join(tmp, f"bare_{i}.safetensors")),
            "write_shard_file": lambda i: write_shard_file(tmp, i, tensors),
            # the same bytes and sha256, without the temp-file + fsync + rename that make it durable
            "hashed_write_no_fsync": lambda i: write_safetensors_hashed(Path(tmp) / f"h_{i}.safetensors", tensors),
        }
        med = interleaved_new_files(cases, reps, tmp)
    return {
        "megabytes": round(mb, 1),
        "median_seconds": {k: round(v, 4) for k, v in med.items()},
        "throughput_MBps": {k: round(mb / v, 1) for k, v in med.items()},
        "ratio_throughput_ours_to_bare": round(med["bare_safetensors_save_file"] / med["write_shard_file"], 3),
    }


def peak_rss_of_cache(tokens: int, workdir: str) -> dict:
    """Run `interp cache` in a fresh process and read its peak RSS (VmHWM: ru_maxrss survives exec on Linux)."""
    out = Path(workdir) / f"store_{tokens}"
    code = (
        "import sys, json\n"
        "from interp.cli.main import app\n"
        "try:\n    app(sys.argv[1:], standalone_mode=False)\n"
        "finally:\n"
        "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "    print(json.dumps({'maxrss_kb': int(hwm)}), file=sys.stderr)\n"
    )
    args = [
        "cache",
        "--model",
        "pythia-14m-init",
        "--hooks",
        "blocks.3.hook_resid_post",
        "--data",
        "synthetic:repeat",
        "--max-tokens",
        str(tokens),
        "--ctx-len",
        "256",
        "--seqs-per-shard",
        "64",
        "--batch-size",
        "32",
        "--out",
        str(out),
    ]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - t0
    maxrss = json.loads(proc.stderr.strip().splitlines()[-1])["maxrss_kb"]
    size = sum(p.stat().st_size for p in out.iterdir())
    return {
        "tokens": tokens,
        "peak_rss_MB": round(maxrss / 1024, 1),
        "store_MB": round(size / 1e6, 1),
        "seconds": round(seconds, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke check")
    args = ap.parse_args()
    torch.manual_seed(0)
    reps = 3 if args.quick else 9
    result = {"benchmark": "cache", "torch_threads": torch.get_num_threads()}
    result["forward_pythia"] = bench_forward("pythia-160m-init", 4, 256 if not args.quick else 64, reps, with_tl=True)
    result["forward_smollm2"] = bench_forward("smollm2-135m", 4, 256 if not args.quick else 64, reps, with_tl=False)
    result["store_write"] = bench_store_write(32_768 if not args.quick else 4096, 576, reps)
    sizes = (16_384, 65_536) if args.quick else (131_072, 1_048_576)
    with tempfile.TemporaryDirectory() as tmp:
        mem = [peak_rss_of_cache(n, tmp) for n in sizes]
    result["cache_peak_memory"] = {
        "runs": mem,
        "ratio_peak_rss_large_to_small": round(mem[1]["peak_rss_MB"] / mem[0]["peak_rss_MB"], 3),
    }
    result["own_peak_rss_MB"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
