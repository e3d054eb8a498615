"""Dashboards of a 4k-latent SAE over 1M store rows: the toolkit against a plain torch pass, and peak memory
against the number of rows.

    .venv/bin/python benchmarks/bench_dashboards.py [--rows 1048576] [--d-sae 4096] [--memory-rows 131072,1048576]

A synthetic store is built once (bfloat16 rows of d_in 576, SmolLM2's width: sparse sums of 8,192 random
directions plus noise, 128-token sequences, random token ids) under --store; the SAE is a TopK
(k 32) SAE made by `sae.make_sae` (random weights: the cost does not depend on what it learnt).
Each path runs in its own process (so its peak RSS is its own), one after the other in one run:

- `toolkit`: `interp.dashboards` end to end: the `StoreSource` pass (store reads with read-ahead,
  encode, decode for FVU/L0) into `FeatureStats` (counts, sums, max, exact histograms, top-60 and a
  64-row sample per latent with their context windows, positions, co-activation over 262,144 rows),
  then records, HTML pages and JSON exports for every latent, and the index.
- `plain`: a plain torch loop over the shard files (safetensors `load_file`), the same encoder and
  decoder, and the statistics both compute, in the obvious torch ops: firing counts, sums, max,
  top-60 activations with their rows (`topk` over the running best and the chunk), firing counts per
  position, co-activation counts over the same rows (sparse matrix product), FVU/L0 sums. It has no
  histograms, samples, context windows, pages or exports: the toolkit does strictly more.

Prints JSON: wall and CPU seconds of each path (the toolkit's pass and its pages separately; on a
shared machine the CPU seconds are the comparable ones), the ratio toolkit pass / plain pass (goal
<= 1.3) and end-to-end / plain, the shared statistics checked equal,
and the peak RSS of the toolkit's pass at --rows and at each row count of --memory-rows (flat in rows is the goal).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HOOK = "blocks.15.hook_resid_post"


def cpu() -> float:
    """CPU seconds of this process, all threads (robust to other processes sharing the machine)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def build_store(path: Path, rows: int, d_in: int, ctx: int = 128, seqs_per_shard: int = 64, seed: int = 0):
    """The synthetic store (reused when it already holds at least `rows` rows of this width)."""
    from interp.store import ActivationStore, StoreMeta, write_shard_file

    per = ctx * seqs_per_shard
    n_shards = math.ceil(rows / per)
    meta = StoreMeta(
        model="synthetic",
        model_sha256="-",
        hooks={HOOK: [d_in]},
        dtype="bfloat16",
        tokenizer="-",
        ctx_len=ctx,
        data={"name": "bench_dashboards", "seed": seed},
    )
    st = ActivationStore.open_or_create(path, meta, n_shards_planned=n_shards)
    g = torch.Generator().manual_seed(seed)
    dirs = torch.randn(8192, d_in, generator=g) / math.sqrt(d_in)
    for i in st.missing(range(n_shards)):
        gi = torch.Generator().manual_seed(seed * 1000 + i)
        idx = torch.randint(0, 8192, (per, 16), generator=gi)
        coef = torch.rand(per, 16, generator=gi) * 4
        x = torch.einsum("nk,nkd->nd", coef, dirs[idx]) + 0.1 * torch.randn(per, d_in, generator=gi)
        st.commit_shard(
            write_shard_file(
                st.path,
                i,
                {
                    HOOK: x.to(torch.bfloat16),
                    "tokens": torch.randint(0, 49152, (per,), generator=gi, dtype=torch.int32),
                    "seq": torch.arange(i * seqs_per_shard, (i + 1) * seqs_per_shard).repeat_interleave(ctx),
                    "pos": torch.arange(ctx, dtype=torch.int32).repeat(seqs_per_shard),
                },
            )
        )
    return st


def make(d_in: int, d_sae: int, k: int):
    from sae import make_sae

    torch.manual_seed(0)
    s = make_sae("topk", d_in=d_in, d_sae=d_sae, k=k)
    s.eval()
    return s


def run_toolkit(store_dir: str, rows: int, d_sae: int, k: int, out: str, pages: bool) -> dict:
    from interp.dashboards import DashboardConfig, StoreSource, Vocab, collect, write_folder
    from interp.store import ActivationStore
    from sae import metrics as M

    st = ActivationStore.open(store_dir)
    s = make(st.hooks[HOOK][0], d_sae, k)
    src = StoreSource(st, HOOK, rows=torch.arange(rows), encode=s.encode, decode=s.decode)
    t0, c0 = time.perf_counter(), cpu()
    with torch.no_grad():
        stats = collect(src, d_sae, progress=False)
    t1, c1 = time.perf_counter(), cpu()
    res = {
        "pass_s": t1 - t0,
        "pass_cpu_s": c1 - c0,
        "rows": stats.n_rows,
        "fvu": src.recon.result()["fvu"],
        "l0": src.recon.result()["l0"],
        "count": stats.count.tolist()[:64],
        "max": stats.max_value.tolist()[:64],
        "top5_f0": [v for v, _, _ in stats.top.entries(0)][:5],
        "peak_rss_mb_pass": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if pages:
        cfg = DashboardConfig(top=d_sae)
        write_folder(out, stats, src, Vocab(), cfg, directions=M.decoder_directions(s).detach())
        res["pages_s"] = time.perf_counter() - t1
        res["pages_cpu_s"] = cpu() - c1
        res["n_pages"] = len(list((Path(out) / "features").glob("*.html")))
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return res


def run_plain(
    store_dir: str, rows: int, d_sae: int, k: int, chunk: int = 4096, K: int = 60, coact_rows: int = 262_144
) -> dict:
    from safetensors.torch import load_file

    from interp.store import ActivationStore

    st = ActivationStore.open(store_dir)
    s = make(st.hooks[HOOK][0], d_sae, k)
    t0, c0 = time.perf_counter(), cpu()
    F = d_sae
    count = torch.zeros(F, dtype=torch.int64)
    total = torch.zeros(F, dtype=torch.float64)
    mx = torch.zeros(F)
    best_v, best_r = torch.zeros(0, F), torch.zeros(0, F, dtype=torch.int64)
    pos_counts = torch.zeros(F, 128, dtype=torch.int64)
    coact = torch.zeros(F, F)
    se, l0, s1, s2, n, seen = 0.0, 0.0, 0.0, 0.0, 0, 0
    with torch.no_grad():
        for i in st.shard_indices:
            if seen >= rows:
                break
            data = load_file(str(st.shard_path(i)))
            x_all, pos_all = data[HOOK].float(), data["pos"].long()
            for a in range(0, len(x_all), chunk):
                if seen >= rows:
                    break
                x, pos = x_all[a : a + chunk][: rows - seen], pos_all[a : a + chunk][: rows - seen]
                z = s.encode(x)
                xh = s.decode(z)
                se += float((xh - x).square().sum())
                s1 = s1 + x.sum(0)
                s2 = s2 + x.square().sum(0)
                fires = z > 0
                l0 += float(fires.sum())
                n += len(x)
                count += fires.sum(0)
                total += z.sum(0).double()
                mx = torch.maximum(mx, z.max(0).values)
                rid = torch.arange(seen, seen + len(x))[:, None].expand(-1, F)
                v, j = torch.cat([best_v, z]).topk(min(K, len(best_v) + len(z)), dim=0)
                best_r = torch.cat([best_r, rid]).gather(0, j)
                best_v = v
                r, f = fires.nonzero(as_tuple=True)
                pos_counts.view(-1).index_add_(0, f * 128 + pos[r], torch.ones_like(f))
                if seen < coact_rows:
                    sp = fires[: coact_rows - seen].float().to_sparse()
                    coact += (sp.t() @ sp).to_dense()
                seen += len(x)
    fvu = se / float((s2 - s1.square() / n).sum())
    return {
        "pass_s": time.perf_counter() - t0,
        "pass_cpu_s": cpu() - c0,
        "rows": n,
        "fvu": fvu,
        "l0": l0 / n,
        "count": count.tolist()[:64],
        "max": mx.tolist()[:64],
        "top5_f0": best_v[:5, 0].tolist(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def child(args: list[str]) -> dict:
    res = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_048_576)
    ap.add_argument("--d-in", type=int, default=576)
    ap.add_argument("--d-sae", type=int, default=4096)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument(
        "--memory-rows",
        default="131072",
        help="Further row counts at which the toolkit pass's peak RSS is measured (--rows is always one).",
    )
    ap.add_argument("--store", default="/work/runs/dash/bench_store")
    ap.add_argument("--out", default="/work/runs/dash/bench_pages")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child", choices=["toolkit", "plain", "memory"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.child == "toolkit":
        print(json.dumps(run_toolkit(a.store, a.rows, a.d_sae, a.k, a.out, pages=True)))
        return
    if a.child == "memory":
        print(json.dumps(run_toolkit(a.store, a.rows, a.d_sae, a.k, a.out, pages=False)))
        return
    if a.child == "plain":
        print(json.dumps(run_plain(a.store, a.rows, a.d_sae, a.k)))
        return
    mem_rows = sorted({int(r) for r in a.memory_rows.split(",")})
    t = time.perf_counter()
    build_store(Path(a.store), max([a.rows, *mem_rows]), a.d_in)
    store_s = time.perf_counter() - t
    common = ["--store", a.store, "--d-sae", str(a.d_sae), "--k", str(a.k), "--threads", str(a.threads), "--out", a.out]
    plain = child(["--child", "plain", "--rows", str(a.rows), *common])
    tool = child(["--child", "toolkit", "--rows", str(a.rows), *common])
    memory = {
        r: child(["--child", "memory", "--rows", str(r), *common])["peak_rss_mb"] for r in mem_rows if r != a.rows
    }
    memory[a.rows] = tool["peak_rss_mb_pass"]
    memory = dict(sorted(memory.items()))
    same = {
        "count": tool["count"] == plain["count"],
        "max": all(abs(x - y) <= 1e-5 * max(1, abs(y)) for x, y in zip(tool["max"], plain["max"])),
        "top5_f0": all(abs(x - y) <= 1e-5 * max(1, abs(y)) for x, y in zip(tool["top5_f0"], plain["top5_f0"])),
        "fvu": abs(tool["fvu"] - plain["fvu"]) <= 1e-4 * plain["fvu"],
        "l0": abs(tool["l0"] - plain["l0"]) < 1e-9,
    }
    print(
        json.dumps(
            {
                "rows": a.rows,
                "d_in": a.d_in,
                "d_sae": a.d_sae,
                "k": a.k,
                "threads": a.threads,
                "store_build_s": round(store_s, 1),
                "wall_s": {
                    "plain_pass": round(plain["pass_s"], 1),
                    "toolkit_pass": round(tool["pass_s"], 1),
                    "toolkit_pages": round(tool["pages_s"], 1),
                },
                "cpu_s": {
                    "plain_pass": round(plain["pass_cpu_s"], 1),
                    "toolkit_pass": round(tool["pass_cpu_s"], 1),
                    "toolkit_pages": round(tool["pages_cpu_s"], 1),
                },
                "toolkit_pages": tool["n_pages"],
                "ratio_pass_cpu": round(tool["pass_cpu_s"] / plain["pass_cpu_s"], 3),
                "ratio_pass_wall": round(tool["pass_s"] / plain["pass_s"], 3),
                "ratio_end_to_end_cpu": round((tool["pass_cpu_s"] + tool["pages_cpu_s"]) / plain["pass_cpu_s"], 3),
                "same_statistics": same,
                "fvu": round(tool["fvu"], 4),
                "l0": round(tool["l0"], 3),
                "peak_rss_mb_toolkit_pass_by_rows": {str(r): round(m) for r, m in memory.items()},
                "peak_rss_mb": {"plain": round(plain["peak_rss_mb"]), "toolkit_with_pages": round(tool["peak_rss_mb"])},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
