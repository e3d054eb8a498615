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

Also timed: the sae-lens bases added as baselines (JumpReLU, Matryoshka BatchTopK, Gated: `toolkit` and
`trainer` paths, and each toolkit step against BatchTopK's; their losses have no bare re-implementation here), and
evaluation throughput: rows/s of
`sae.evaluate.evaluate_store` (what `interp sae eval` runs: store reads, the row rule, inference codes,
FVU/L0/dead statistics) against a bare encode-decode pass (in-memory rows, plain matmuls, the same
threshold), on the same rows of a BatchTopK SAE (goal: eval/bare <= 1.2).
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
from sae.baselines import arch_name  # noqa: E402
from sae.c2r import c2r_loss, c2r_weight  # noqa: E402
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
EXTRA_BASES = {  # sae-lens bases added as baselines: toolkit and trainer paths only
    "jumprelu": ("jumprelu", {}),
    "matryoshka": ("matryoshka", {"k": 32}),
    "gated": ("gated", {}),
}


def eval_throughput(d: int, n: int, rows: int, reps: int, tmp: Path) -> dict:
    """rows/s of `evaluate_store` vs a bare thresholded encode-decode over the same rows."""
    from interp.store import ActivationStore, StoreMeta
    from interp.store.shards import write_shard_file
    from sae.evaluate import evaluate_store
    from sae.inference import to_inference

    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, d, generator=g)
    per = 8192
    meta = StoreMeta(
        model="synthetic",
        model_sha256="-",
        hooks={"h": [d]},
        dtype="float32",
        tokenizer="-",
        ctx_len=128,
        data={"name": "bench"},
    )
    st = ActivationStore.open_or_create(tmp / "evalstore", meta, n_shards_planned=rows // per)
    for i in range(rows // per):
        sl = slice(i * per, (i + 1) * per)
        st.commit_shard(
            write_shard_file(
                st.path,
                i,
                {
                    "h": x[sl].contiguous(),
                    "tokens": torch.zeros(per, dtype=torch.int32),
                    "seq": torch.arange(rows)[sl] // 128,
                    "pos": (torch.arange(rows)[sl] % 128).to(torch.int32),
                },
            )
        )
    train = make_sae("batchtopk", d, n, seed=0, k=32)
    train.topk_threshold.fill_(0.5)
    inf = to_inference(train)
    W_enc, b_enc, W_dec, b_dec, thr = (t.detach() for t in (inf.W_enc, inf.b_enc, inf.W_dec, inf.b_dec, inf.threshold))

    @torch.no_grad()
    def bare() -> None:
        for i in range(0, rows, 4096):
            xb = x[i : i + 4096]
            h = (xb - b_dec) @ W_enc + b_enc
            z = h.relu() * (h > thr)
            xh = z @ W_dec + b_dec
            float((xh - xb).square().sum()), float((z > 0).sum())

    ev, bt = [], []
    for _ in range(reps):
        t = time.perf_counter()
        evaluate_store(inf, st, None, "h", split="all", max_rows=rows, exclude="none")
        ev.append(time.perf_counter() - t)
        t = time.perf_counter()
        bare()
        bt.append(time.perf_counter() - t)
    e, b = statistics.median(ev), statistics.median(bt)
    return {
        "rows": rows,
        "eval_rows_per_s": round(rows / e),
        "bare_rows_per_s": round(rows / b),
        "eval_over_bare": round(e / b, 3),
    }


def trainer_step_times(
    arch: str, settings: dict, x: torch.Tensor, B: int, d: int, n: int, steps: int, reps: int
) -> list[float]:
    """Seconds per step of sae-lens's `SAETrainer.step` on in-memory batches (after one untimed step), `reps` times."""
    from sae_lens import SAETrainer
    from sae_lens.config import SAETrainerConfig

    out = []
    for _ in range(reps):
        sae = make_sae(arch, d, n, seed=0, **settings)
        tr = SAETrainer(
            cfg=SAETrainerConfig(total_training_samples=B * (steps + 1), train_batch_size_samples=B, lr_end=3e-4),
            sae=sae,
            data_provider=iter(()),
        )
        tr.step(x[:B])
        tr.n_training_steps += 1
        t = time.perf_counter()
        for s in range(steps):
            tr.step(x[(s + 1) * B : (s + 2) * B])
            tr.n_training_steps += 1
        out.append((time.perf_counter() - t) / steps)
    return out


def matmul_gflops(B: int, d: int, n: int, reps: int = 5) -> float:
    a, w = torch.randn(B, d), torch.randn(d, n)
    a @ w
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        a @ w
        ts.append(time.perf_counter() - t)
    return 2 * B * d * n / min(ts) / 1e9


def bare_step_fn(sae, lr: float = 3e-4):
    """A plain torch loop of exactly the maths of `sae` (a fresh sae-lens training SAE of any variant):
    its initial weights cloned into plain tensors, then per step the same encoder (b_dec subtracted from
    the input when the config says so; TopK-family pre-activations scaled by the decoder row norms, as
    sae-lens's `rescale_acts_by_decoder_norm` does), the same decoder (PolySAE's polynomial after the QR
    retraction of U), MSE summed over d and averaged over rows, the variant's losses (L1 on decoder-norm
    weighted codes, C²R on its schedule, Coh), BatchTopK's threshold update, grad-norm clip 1.0, Adam.
    No sae-lens objects, hooks, dead-latent bookkeeping or scaler; the AuxK loss is left out because no
    latent is dead in a short run (it is zero in sae-lens's step too). Returns step(x) -> loss."""
    cfg = sae.cfg
    arch = arch_name(sae)
    P = {k: v.detach().clone().requires_grad_(v.requires_grad) for k, v in sae.named_parameters()}
    trainable = [p for p in P.values() if p.requires_grad]
    opt = torch.optim.Adam(trainable, lr=lr)
    rescale = bool(getattr(cfg, "rescale_acts_by_decoder_norm", False))
    poly, relu_base = arch.startswith("poly"), arch in ("relu", "coh", "c2r_relu", "poly_relu")
    batch_topk = arch in ("batchtopk", "c2r", "poly_batchtopk", "coh_batchtopk")
    state = {"step": 0, "threshold": torch.tensor(0.0, dtype=torch.double)}

    def step(x):
        W_enc, b_enc, W_dec, b_dec = P["W_enc"], P["b_enc"], P["W_dec"], P["b_dec"]
        if poly and cfg.retract:
            with torch.no_grad():
                q, r = torch.linalg.qr(P["U"])
                sign = torch.sign(torch.diagonal(r))
                sign[sign == 0] = 1
                P["U"].copy_(q * sign)
        h = (x - b_dec if cfg.apply_b_dec_to_input else x) @ W_enc + b_enc
        if rescale:
            h = h * W_dec.norm(dim=-1)
        if batch_topk:
            a = h.relu().flatten()
            v, i = a.topk(int(cfg.k * x.shape[0]))
            z = torch.zeros_like(a).scatter(-1, i, v).view_as(h)
            with torch.no_grad():
                pos = z > 0
                if pos.any():
                    lr_t = cfg.topk_threshold_lr
                    state["threshold"] = (1 - lr_t) * state["threshold"] + lr_t * z[pos].min().double()
        elif relu_base:
            z = h.relu()
        else:
            v, i = h.topk(int(cfg.k), dim=-1)
            z = torch.zeros_like(h).scatter(-1, i, v.relu())
        if poly:
            _, r2, r3 = sae.ranks
            a = z @ P["U"]
            xh = (
                b_dec
                + a @ P["C1"].T
                + P["lambda2"] * (a[:, :r2].square() @ P["C2"].T)
                + P["lambda3"] * (a[:, :r3].pow(3) @ P["C3"].T)
            )
        else:
            xh = (z * (1 / W_dec.norm(dim=-1)) if rescale else z) @ W_dec + b_dec
        loss = (xh - x).square().sum(-1).mean()
        if relu_base:
            w = (P["U"] @ P["C1"].T).norm(dim=-1) if poly else W_dec.norm(dim=-1)
            loss = loss + (cfg.l1_coefficient * (z * w).norm(p=cfg.lp_norm, dim=-1)).mean()
        if arch.startswith("c2r"):
            wt = c2r_weight(state["step"], cfg.c2r_lambda, cfg.c2r_interval, cfg.c2r_start)
            if wt:
                if cfg.c2r_ref_batch is not None:  # normalised to the official batch (sae.c2r)
                    wt = wt * (cfg.c2r_ref_batch / x.shape[0]) ** (cfg.c2r_alpha / 2)
                loss = loss + wt * c2r_loss(z, W_dec, cfg.c2r_alpha, cfg.c2r_chunk_size)
        if arch.startswith("coh") and cfg.coh_lambda:
            loss = loss + cfg.coh_lambda * coh_loss(
                z, cfg.coh_tau, cfg.coh_row_frac, cfg.coh_col_frac, cfg.coh_scale, reduction=cfg.coh_reduction
            )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        opt.zero_grad()
        state["step"] += 1
        return loss

    step.params = P
    step.state = state
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
    res: dict = {
        "threads": torch.get_num_threads(),
        "batch": B,
        "d_in": d,
        "d_sae": n,
        "steps": steps,
        "matmul_gflops": round(peak, 1),
        "flop_bound_ms": round(flops_step / peak / 1e6, 1),
        "variants": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        store = write_store(Path(tmp) / "store", x, rows_per_shard=B * 4)
        times: dict[str, dict[str, list[float]]] = {v: {"toolkit": [], "trainer": [], "bare": []} for v in VARIANTS}
        for rep in range(reps):
            for name, (arch, settings) in VARIANTS.items():
                # toolkit: the whole train_sae path (timing from its report: the step loop only)
                cfg = TrainConfig(
                    arch=arch,
                    d_sae=n,
                    k=settings.get("k"),
                    total_tokens=B * (steps + 1),
                    batch_size=B,
                    checkpoint_every=10_000,
                    settings={k: v for k, v in settings.items() if k != "k"},
                    normalize=False,
                    exclude="none",
                    dead_window_steps=10_000,
                )  # no AuxK: as the bare loop
                _, rep_ = train_sae(store, cfg, Path(tmp) / f"{name}{rep}", resume=False, progress=False)
                times[name]["toolkit"].append(rep_["steady_seconds_per_step"])  # after a first step, like the others
                times[name]["trainer"] += trainer_step_times(arch, settings, x, B, d, n, steps, 1)
                bare = bare_step_fn(make_sae(arch, d, n, seed=0, **settings))
                bare(x[:B])
                t = time.perf_counter()
                for s in range(steps):
                    bare(x[(s + 1) * B : (s + 2) * B])
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
    with tempfile.TemporaryDirectory() as tmp:
        store = write_store(Path(tmp) / "store", x, rows_per_shard=B * 4)
        for name, (arch, settings) in EXTRA_BASES.items():
            tk = []
            for rep in range(reps):
                cfg = TrainConfig(
                    arch=arch,
                    d_sae=n,
                    k=settings.get("k"),
                    total_tokens=B * (steps + 1),
                    batch_size=B,
                    checkpoint_every=10_000,
                    normalize=False,
                    exclude="none",
                    dead_window_steps=10_000,
                )
                _, rep_ = train_sae(store, cfg, Path(tmp) / f"{name}{rep}", resume=False, progress=False)
                tk.append(rep_["steady_seconds_per_step"])
            med = statistics.median(tk)
            tr_med = statistics.median(trainer_step_times(arch, settings, x, B, d, n, steps, reps))
            res["variants"][name] = {
                "toolkit_tokens_per_s": round(B / med),
                "toolkit_step_ms": round(1000 * med, 1),
                "trainer_step_ms": round(1000 * tr_med, 1),
                "toolkit_over_trainer": round(med / tr_med, 3),
                "vs_batchtopk_toolkit": round(med / base_ms["batchtopk"], 3),
            }
        res["eval_throughput"] = eval_throughput(d, n, 8192 * (2 if a.quick else 4), reps, Path(tmp))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
