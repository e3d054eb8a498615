"""SAE training throughput: sae-lens's trainer (the toolkit's path) vs a bare torch loop of the same maths,
per variant, on the same data, in one run; and step time against the matmul FLOP bound of this machine.

    .venv/bin/python benchmarks/bench_sae.py [--quick] [--threads N]

Paths timed per variant (interleaved, median of repeats):
- `toolkit`: `sae.train.train_sae` on an ActivationStore (store reads, outlier filter, sae-lens's
  `SAETrainer.step`, NaN checks); the training path of `interp sae train`.
- `trainer`: sae-lens's `SAETrainer.step` on in-memory batches.
- `bare`: a plain torch loop (functional encode/decode, the variant's loss, backward, grad clip, Adam)
  on the same parameter shapes, no sae-lens objects.
Prints JSON: tokens/s of each, toolkit/bare ratio, and each variant's cost relative to its baseline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sae import make_sae  # noqa: E402
from sae.c2r import c2r_loss  # noqa: E402
from sae.coherence import coh_loss  # noqa: E402
from sae.synthetic import write_store  # noqa: E402
from sae.train import TrainConfig, train_sae  # noqa: E402

VARIANTS = {  # name: (arch, settings)
    "relu": ("relu", {}),
    "topk": ("topk", {"k": 32}),
    "batchtopk": ("batchtopk", {"k": 32}),
    "c2r": ("c2r", {"k": 32, "c2r_interval": 1}),  # penalty on every step: the worst case (default m=5)
    "poly": ("poly", {"k": 32, "rank2": 64, "rank3": 64}),
    "coh": ("coh", {}),
}


def matmul_gflops(B: int, d: int, n: int, reps: int = 5) -> float:
    a, w = torch.randn(B, d), torch.randn(d, n)
    a @ w
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); a @ w; ts.append(time.perf_counter() - t)
    return 2 * B * d * n / min(ts) / 1e9


def bare_step_fn(arch: str, settings: dict, d: int, n: int):
    """A plain torch SAE of the same maths: returns (params, step(x))."""
    g = torch.Generator().manual_seed(0)
    W_dec = torch.randn(n, d, generator=g)
    W_dec = (0.1 * W_dec / W_dec.norm(dim=-1, keepdim=True)).requires_grad_(True)
    W_enc = W_dec.detach().T.clone().requires_grad_(True)
    b_enc, b_dec = torch.zeros(n, requires_grad=True), torch.zeros(d, requires_grad=True)
    params = [W_enc, b_enc, W_dec, b_dec]
    if arch == "poly":
        r1, r2, r3 = d, settings["rank2"], settings["rank3"]
        U = torch.nn.init.orthogonal_(torch.empty(n, r1)).requires_grad_(True)
        Cs = [torch.nn.init.kaiming_uniform_(torch.empty(d, r)).requires_grad_(True) for r in (r1, r2, r3)]
        lam = [torch.tensor(-0.5, requires_grad=True), torch.tensor(0.5, requires_grad=True)]
        params = [W_enc, b_enc, b_dec, U, *Cs, *lam]
    opt = torch.optim.Adam(params, lr=3e-4)
    k = settings.get("k")

    def step(x):
        h = (x - b_dec) @ W_enc + b_enc
        if arch in ("topk", "poly"):
            v, i = h.topk(k, dim=-1)
            z = torch.zeros_like(h).scatter(-1, i, v.relu())
        elif arch in ("batchtopk", "c2r"):
            a = h.relu().flatten()
            v, i = a.topk(k * x.shape[0])
            z = torch.zeros_like(a).scatter(-1, i, v).view_as(h)
        else:
            z = h.relu()
        if arch == "poly":
            with torch.no_grad():
                q, r = torch.linalg.qr(U)
                U.copy_(q * torch.sign(torch.diagonal(r)))
            a = z @ U
            xh = b_dec + a @ Cs[0].T + lam[0] * (a[:, :r2] ** 2 @ Cs[1].T) + lam[1] * (a[:, :r3] ** 3 @ Cs[2].T)
        else:
            xh = z @ W_dec + b_dec
        loss = (xh - x).square().sum(-1).mean()
        if arch in ("relu", "coh"):
            loss = loss + 5.0 * (z * W_dec.norm(dim=-1)).sum(-1).mean()
        if arch == "c2r":
            loss = loss + 5.0 * c2r_loss(z, W_dec)
        if arch == "coh":
            loss = loss + 1e-3 * coh_loss(z)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad()
        return loss

    return step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    B, d, n, steps, reps = (1024, 576, 2304, 4, 2) if a.quick else (4096, 576, 4608, 6, 3)
    x = torch.randn(B * (steps + 2) * 2, d)
    peak = matmul_gflops(B, d, n)
    flops_step = 6 * B * d * n  # encoder + decoder, forward and backward
    res: dict = {"threads": torch.get_num_threads(), "batch": B, "d_in": d, "d_sae": n, "steps": steps,
                 "matmul_gflops": round(peak, 1), "flop_bound_ms": round(flops_step / peak / 1e6, 1), "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        store = write_store(Path(tmp) / "store", x, rows_per_shard=B * 4)
        times: dict[str, dict[str, list[float]]] = {v: {"toolkit": [], "trainer": [], "bare": []} for v in VARIANTS}
        for rep in range(reps):
            for name, (arch, settings) in VARIANTS.items():
                # toolkit: the whole train_sae path (timing from its report: the step loop only)
                cfg = TrainConfig(arch=arch, d_sae=n, k=settings.get("k"), total_tokens=B * steps, batch_size=B,
                                  checkpoint_every=10_000, settings={k: v for k, v in settings.items() if k != "k"},
                                  normalize=False, outlier_norm_multiple=None)
                _, rep_ = train_sae(store, cfg, Path(tmp) / f"{name}{rep}", resume=False, progress=False)
                times[name]["toolkit"].append(rep_["seconds"] / steps)
                # sae-lens trainer on in-memory batches
                from sae_lens import SAETrainer
                from sae_lens.config import SAETrainerConfig
                sae = make_sae(arch, d, n, seed=0, **settings)
                tr = SAETrainer(cfg=SAETrainerConfig(total_training_samples=B * (steps + 1), train_batch_size_samples=B, lr_end=3e-4),
                                sae=sae, data_provider=iter(()))
                tr.step(x[:B]); tr.n_training_steps += 1
                t = time.perf_counter()
                for s in range(steps):
                    tr.step(x[(s + 1) * B:(s + 2) * B]); tr.n_training_steps += 1
                times[name]["trainer"].append((time.perf_counter() - t) / steps)
                bare = bare_step_fn(arch, settings, d, n)
                bare(x[:B])
                t = time.perf_counter()
                for s in range(steps):
                    bare(x[(s + 1) * B:(s + 2) * B])
                times[name]["bare"].append((time.perf_counter() - t) / steps)
    base_ms = {}
    for name, ts in times.items():
        med = {k: statistics.median(v) for k, v in ts.items()}
        row = {f"{k}_tokens_per_s": round(B / v) for k, v in med.items()}
        row.update({f"{k}_step_ms": round(1000 * v, 1) for k, v in med.items()})
        row["toolkit_over_bare"] = round(med["toolkit"] / med["bare"], 3)
        row["trainer_over_bare"] = round(med["trainer"] / med["bare"], 3)
        row["bare_over_flop_bound"] = round(med["bare"] * 1000 / res["flop_bound_ms"], 2)
        base_ms[name] = med["toolkit"]
        res["variants"][name] = row
    for name, base in (("c2r", "batchtopk"), ("poly", "topk"), ("coh", "relu")):
        res["variants"][name]["extra_cost_vs_" + base] = round(base_ms[name] / base_ms[base] - 1, 3)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
