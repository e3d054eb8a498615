"""The throughput benchmark's bare torch loop computes exactly sae-lens's step for every variant, so
its tokens/s ratio compares the same maths (`benchmarks/bench_sae.py`)."""

import copy
import importlib.util
from pathlib import Path

import pytest
import torch
from sae_lens import SAETrainer
from sae_lens.config import SAETrainerConfig

from sae import make_sae

spec = importlib.util.spec_from_file_location("bench_sae", Path(__file__).parents[2] / "benchmarks" / "bench_sae.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


@pytest.mark.parametrize("name", list(bench.VARIANTS))
def test_bare_loop_equals_sae_lens_step(name):
    arch, settings = bench.VARIANTS[name]
    settings = {
        **settings,
        **({"k": 4} if "k" in settings else {}),
        **({"rank2": 4, "rank3": 4} if arch == "poly" else {}),
    }
    if arch == "coh":
        settings["coh_lambda"] = 1.0  # large enough that a wrong Coh term would show
    B, d, n = 64, 16, 48
    x = torch.randn(3 * B, d, generator=torch.Generator().manual_seed(1))
    sae = make_sae(arch, d, n, seed=0, **settings)
    bare = bare_step_fn = bench.bare_step_fn(copy.deepcopy(sae))
    tr = SAETrainer(
        cfg=SAETrainerConfig(total_training_samples=B * 10, train_batch_size_samples=B, lr_end=3e-4),
        sae=sae,
        data_provider=iter(()),
    )
    for s in range(3):
        loss_ref = tr.step(x[s * B : (s + 1) * B]).loss
        tr.n_training_steps += 1
        loss_bare = bare_step_fn(x[s * B : (s + 1) * B])
        assert torch.allclose(loss_bare, loss_ref, rtol=1e-5, atol=1e-6), (s, loss_bare, loss_ref)
    for k, p in sae.named_parameters():
        assert torch.allclose(bare.params[k], p, atol=1e-5), k
    if hasattr(sae, "topk_threshold"):
        assert torch.allclose(bare.state["threshold"], sae.topk_threshold)
