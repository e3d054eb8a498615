"""What AuxK costs per step: one BatchTopK training step (sae-lens's `SAETrainer.step`, the toolkit's SAE)
with AuxK idle (dead window 1,000 steps: no latent is dead yet, as in any sae-lens run under 1,000 steps)
against AuxK at work (half the latents held dead), same rows, interleaved. Prints one JSON object.

    python benchmarks/bench_auxk.py                     # d_in 576, d_sae 2304, batch 4096 (SmolLM2 layer 15)
    python benchmarks/bench_auxk.py --quick             # d_in 64, d_sae 256, batch 1024
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def trainer(d_in: int, d_sae: int, k: int, batch: int, window: int):  # type: ignore[no-untyped-def]
    from sae_lens.config import SAETrainerConfig
    from sae_lens.training.sae_trainer import SAETrainer

    from sae.baselines import make_sae

    cfg = SAETrainerConfig(
        total_training_samples=10**6 * batch,
        train_batch_size_samples=batch,
        dead_feature_window=window,
        lr=3e-4,
        lr_end=3e-4,
    )
    return SAETrainer(cfg=cfg, sae=make_sae("batchtopk", d_in, d_sae, seed=0, k=k), data_provider=iter(()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    d_in, d_sae, k, batch = (64, 256, 4, 1024) if a.quick else (576, 2304, 32, 4096)
    x = torch.randn(batch, d_in, generator=torch.Generator().manual_seed(0))
    idle, busy = trainer(d_in, d_sae, k, batch, 1000), trainer(d_in, d_sae, k, batch, 1)
    times: dict[str, list[float]] = {"auxk_idle": [], "auxk_active": []}
    aux = 0.0
    for i in range(a.steps + 2):  # the first two steps of each are warm-up, not timed
        for name, tr in (("auxk_idle", idle), ("auxk_active", busy)):
            if tr is busy:  # half the latents dead for AuxK at every step
                tr.n_forward_passes_since_fired[: d_sae // 2] = 0
                tr.n_forward_passes_since_fired[d_sae // 2 :] = 10
            t = time.perf_counter()
            out = tr.step(x)
            tr.n_training_steps += 1
            if i >= 2:
                times[name].append(time.perf_counter() - t)
            if tr is busy:
                aux = float(out.losses["auxiliary_reconstruction_loss"])
    med = {n: statistics.median(v) for n, v in times.items()}
    print(
        json.dumps(
            {
                "bench": "auxk",
                "d_in": d_in,
                "d_sae": d_sae,
                "k": k,
                "batch": batch,
                "steps": a.steps,
                "threads": a.threads,
                "median_step_s": {n: round(v, 4) for n, v in med.items()},
                "auxk_loss_when_active": round(aux, 3),
                "ratio_active_over_idle": round(med["auxk_active"] / med["auxk_idle"], 3),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
