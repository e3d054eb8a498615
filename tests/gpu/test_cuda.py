"""Parity on the GPU: the same numbers on `device` as on the CPU, for the core and each family's main path.

Run on a GPU machine with `pytest -m cuda tests/gpu` (benchmarks/gpu_check.py does); without CUDA every
test here is skipped, and `INTERP_TEST_DEVICE=cpu pytest -m cuda tests/gpu` runs them on the CPU.
"""

import pytest
import torch

import interp
from interp.data import byte_tokenizer
from tests.tiny import ARCHS, tiny_hf

pytestmark = pytest.mark.cuda


def close(a, b, rtol=1e-4):
    a, b = a.detach().float().cpu(), b.detach().float().cpu()
    scale = b.abs().max().item() or 1.0
    torch.testing.assert_close(a, b, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("arch", ARCHS)
def test_logits_and_cache_match_the_cpu(arch, device):
    hf = tiny_hf(arch)
    ids = torch.randint(0, 257, (2, 12), generator=torch.Generator().manual_seed(0))
    cpu = interp.HookedModel(hf, byte_tokenizer())
    ref_logits, ref = cpu.run_with_cache(ids, names="blocks.*.hook_resid_post")
    gpu = interp.HookedModel(tiny_hf(arch).to(device), byte_tokenizer())
    logits, cache = gpu.run_with_cache(ids, names="blocks.*.hook_resid_post")
    assert logits.device.type == torch.device(device).type
    close(logits, ref_logits)
    for name in ref.keys():
        close(cache[name], ref[name])


def test_load_model_puts_weights_and_inputs_on_the_device(device):
    model = interp.load_model("pythia-14m-init", device=device)
    assert model.device.type == torch.device(device).type
    ids = model.to_tokens("hello world")
    assert ids.device == model.device
    close(model(ids), interp.load_model("pythia-14m-init")(ids.cpu()))


def test_cache_rows_match_the_cpu(tmp_path, device):
    from interp.cache.caching import CacheConfig, cache_activations

    rows = {}
    for dev in ("cpu", device):
        cfg = CacheConfig(
            out=str(tmp_path / dev),
            model="pythia-14m-init",
            hooks=["blocks.2.hook_resid_post"],
            data="synthetic:repeat",
            ctx_len=16,
            max_tokens=512,
            seqs_per_shard=8,
            batch_size=4,
            device=dev,
        )
        st, _ = cache_activations(cfg, progress=False)
        rows[dev] = st.get_rows(slice(0, len(st)))
    assert torch.equal(rows["cpu"]["tokens"], rows[device]["tokens"])
    close(rows[device]["blocks.2.hook_resid_post"], rows["cpu"]["blocks.2.hook_resid_post"])


def test_sae_training_matches_the_cpu(tmp_path, device):
    pytest.importorskip("sae_lens")
    from interp.cache.caching import CacheConfig, cache_activations
    from sae.train import TrainConfig, train_sae

    cfg = CacheConfig(
        out=str(tmp_path / "store"),
        model="pythia-14m-init",
        hooks=["blocks.2.hook_resid_post"],
        data="synthetic:repeat",
        ctx_len=16,
        max_tokens=2048,
        seqs_per_shard=32,
        batch_size=8,
    )
    store, _ = cache_activations(cfg, progress=False)
    reports = {}
    for dev in ("cpu", device):
        tc = TrainConfig(arch="topk", d_sae=256, k=8, total_tokens=2048, batch_size=256, checkpoint_every=4, device=dev)
        sae, reports[dev] = train_sae(store, tc, tmp_path / f"sae_{dev}", progress=False)
        assert next(sae.parameters()).device.type == torch.device(dev).type
    assert reports[device]["steps"] == reports["cpu"]["steps"] == 8
    fa, fb = reports["cpu"]["final_losses"], reports[device]["final_losses"]
    for k in fa:
        assert abs(fa[k] - fb[k]) <= 1e-3 * max(1.0, abs(fa[k])), (k, fa[k], fb[k])


def test_sdi_job_matches_the_cpu(tmp_path, device):
    from attribution.jobs import AttributeConfig, load_scores, run_attribution, save_tokens
    from attribution.looped import random_looped_gpt
    from attribution.train import train_lm

    model = random_looped_gpt(
        hidden_size=32, num_attention_heads=2, num_hidden_layers=3, intermediate_size=64, max_position_embeddings=32
    )
    pool = torch.randint(0, 257, (24, 16), generator=torch.Generator().manual_seed(0))
    train_lm(model, pool, steps=4, batch_size=8, lr=1e-3, save_steps=(2, 4), out=tmp_path / "run")
    save_tokens(tmp_path / "train.safetensors", pool[:12], "interp/byte-level")
    save_tokens(tmp_path / "queries.safetensors", pool[12:14], "interp/byte-level")
    for dev in ("cpu", device):
        run_attribution(
            AttributeConfig(
                method="sdi",
                model=f"looped-gpt:{tmp_path / 'run'}",
                train=f"tokens:{tmp_path / 'train.safetensors'}",
                queries=f"tokens:{tmp_path / 'queries.safetensors'}",
                out=str(tmp_path / dev),
                shard_size=6,
                sketch_dim=256,
                device=dev,
            ),
            progress=False,
        )
    got, want = load_scores(tmp_path / device)["sdi"], load_scores(tmp_path / "cpu")["sdi"]
    assert (
        got.shape == want.shape and got.shape[:2] == (12, 2) and bool(torch.isfinite(got).all())
    )  # [train, query, step]
    close(got, want, rtol=1e-3)


def test_cli_cache_honours_the_device(tmp_path, device):
    from typer.testing import CliRunner

    from interp.cli.main import app
    from interp.store import ActivationStore

    res = CliRunner().invoke(
        app,
        [
            "cache",
            "--model",
            "pythia-14m-init",
            "--hooks",
            "blocks.0.hook_resid_post",
            "--ctx-len",
            "16",
            "--max-tokens",
            "64",
            "--device",
            device,
            "--out",
            str(tmp_path / "s"),
        ],
    )
    assert res.exit_code == 0, res.output
    st = ActivationStore.open(tmp_path / "s")
    assert st.meta.extra["config"]["device"] == device and st.verify().ok


def test_sae_eval_on_the_device_matches_the_cpu(tmp_path, device):
    import json

    from typer.testing import CliRunner

    from sae.cli import app
    from sae.synthetic import write_store

    g = torch.Generator().manual_seed(0)
    write_store(
        tmp_path / "store",
        torch.relu(torch.randn(2048, 24, generator=g)) @ torch.randn(24, 16, generator=g),
        rows_per_shard=1024,
    )
    runner = CliRunner()
    r = runner.invoke(
        app,
        [
            "train",
            "--store",
            str(tmp_path / "store"),
            "--arch",
            "batchtopk",
            "--k",
            "4",
            "--d-sae",
            "32",
            "--max-tokens",
            "2048",
            "--batch-size",
            "256",
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "sae"),
        ],
    )
    assert r.exit_code == 0, r.output
    res = {}
    for dev in ("cpu", device):
        r = runner.invoke(
            app, ["eval", "--sae", str(tmp_path / "sae"), "--store", str(tmp_path / "store"), "--device", dev]
        )
        assert r.exit_code == 0, r.output
        res[dev] = json.loads(r.stdout)
    assert res[device]["device"].startswith(torch.device(device).type)
    for key in ("fvu", "l0", "dead_frac", "rows"):
        assert abs(res[device][key] - res["cpu"][key]) <= 1e-4 * max(1.0, abs(res["cpu"][key])), key
