"""Attribution on a CUDA device: the same scores as on the CPU (fp32), bf16 close to fp32, nothing crossing devices.

Marked `cuda`: skipped without a GPU; `INTERP_TEST_DEVICE=cpu pytest -m cuda tests/attribution` runs them on
the CPU as a dry run (tests/conftest.py).
"""

import os

import pytest
import torch

import interp
from attribution.influence import HeadComponent, fit_ekfac, influence_scores, mean_gradient
from attribution.jobs import AttributeConfig, load_scores, run_attribution, save_tokens
from attribution.mda import copy_target_probe
from interp.infra.jobs import clear_worker_cache
from tests.tiny import tiny_hf

pytestmark = pytest.mark.cuda
DEVICE = os.environ.get("INTERP_TEST_DEVICE", "cuda")


def _ekfac(model, device):
    g = torch.Generator().manual_seed(0)
    fit, train = torch.randint(0, 257, (8, 12), generator=g), torch.randint(0, 257, (6, 12), generator=g)
    probe_ids = torch.randint(1, 257, (4, 6), generator=g).repeat(1, 2)
    comp = HeadComponent(1, 3, "qkvo")
    probe = mean_gradient(model, comp, probe_ids.to(device), copy_target_probe())
    factors = fit_ekfac(model, comp, fit.to(device), batch_size=4)
    assert all(q.device.type == torch.device(device).type for q in factors.q_a.values())
    return influence_scores(model, factors, train.to(device), probe)[0].cpu()


@pytest.mark.parametrize("arch", ["llama", "gpt_neox", "gemma3"])
def test_ekfac_on_the_device_runs_and_agrees_with_bf16(arch):
    hf = tiny_hf(arch).to(DEVICE)
    s32 = _ekfac(interp.HookedModel(hf, None), DEVICE)
    s16 = _ekfac(interp.HookedModel(tiny_hf(arch).to(DEVICE, torch.bfloat16), None), DEVICE)
    assert torch.isfinite(s32).all() and torch.isfinite(s16).all()
    rho = torch.corrcoef(torch.stack([s32.argsort().argsort().float(), s16.argsort().argsort().float()]))[0, 1]
    assert rho > 0.5, (s32, s16)


def test_tracin_job_on_the_device_equals_the_cpu_job(tmp_path):
    run = tmp_path / "run"
    for s in (1, 2):
        m = tiny_hf("llama", seed=s)
        m.save_pretrained(run / f"step_{s}")
        (run / f"step_{s}" / "training_state.json").write_text('{"lr": 0.001}')
    tiny_hf("llama").save_pretrained(tmp_path / "model")
    g = torch.Generator().manual_seed(0)
    save_tokens(tmp_path / "t.safetensors", torch.randint(0, 257, (6, 10), generator=g), "interp/byte-level")
    save_tokens(tmp_path / "q.safetensors", torch.randint(0, 257, (2, 10), generator=g), "interp/byte-level")
    common = dict(
        method="tracin",
        model=str(tmp_path / "model"),
        checkpoints=[str(run)],
        sketch_dim=64,
        train=f"tokens:{tmp_path / 't.safetensors'}",
        queries=f"tokens:{tmp_path / 'q.safetensors'}",
    )
    clear_worker_cache()
    run_attribution(AttributeConfig(out=str(tmp_path / "cpu"), device="cpu", **common), progress=False)
    run_attribution(AttributeConfig(out=str(tmp_path / "dev"), device=DEVICE, **common), progress=False)
    run_attribution(
        AttributeConfig(out=str(tmp_path / "bf16"), device=DEVICE, dtype="bfloat16", **common), progress=False
    )
    cpu, dev, bf16 = (load_scores(tmp_path / k)["scores"] for k in ("cpu", "dev", "bf16"))
    torch.testing.assert_close(dev, cpu, rtol=1e-3, atol=1e-4 * float(cpu.abs().max()))
    assert bf16.dtype == torch.float32 and torch.isfinite(bf16).all()
    assert float((bf16 - cpu).norm() / cpu.norm()) < 0.2
