"""Checkpoints load through each architecture's own loader (tied embeddings, GPT-NeoX `embed_out`), never
into the model passed in; training-run folders as checkpoint lists; jobs in one process do not leak."""

import json

import pytest
import torch

from attribution.capture import GradientFeaturizer
from attribution.jobs import AttributeConfig, load_scores, run_attribution, save_tokens
from attribution.tracin import Checkpoint, checkpoints_from, expand_checkpoints, tracin
from interp.infra.jobs import clear_worker_cache
from interp.models.registry import state_sha256
from tests.tiny import ARCHS, tiny_hf


def _save_run(hf, root, steps, lr=1e-3):
    for s in steps:
        with torch.no_grad():
            for p in hf.parameters():
                p.add_(0.01 * torch.randn_like(p))
        hf.save_pretrained(root / f"step_{s}")
        (root / f"step_{s}" / "training_state.json").write_text(json.dumps({"lr": lr, "step": s}))


@pytest.mark.parametrize("arch", ARCHS)
def test_save_pretrained_checkpoint_round_trips_without_touching_the_model(arch, tmp_path):
    base = tiny_hf(arch, seed=0)
    before = state_sha256(base)
    trained = tiny_hf(arch, seed=1)
    _save_run(trained, tmp_path, [5])
    got = Checkpoint(str(tmp_path / "step_5"), 1e-3).load(base)
    assert got is not base and state_sha256(base) == before
    ids = torch.randint(0, 257, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(got(input_ids=ids).logits, trained(input_ids=ids).logits)
    if arch == "gpt_neox":  # transformers saves GPT-NeoX's head as embed_out
        from safetensors import safe_open

        with safe_open(str(tmp_path / "step_5" / "model.safetensors"), "pt") as f:
            assert any(k.startswith("embed_out") for k in f.keys())


def test_checkpoint_of_another_architecture_is_refused(tmp_path):
    _save_run(tiny_hf("gpt2"), tmp_path, [1])
    with pytest.raises(ValueError, match="'gpt2' model, not 'llama'"):
        Checkpoint(str(tmp_path / "step_1"), 1.0).load(tiny_hf("llama"))
    with pytest.raises(ValueError, match="n_embd 64 != 32"):
        Checkpoint(str(tmp_path / "step_1"), 1.0).load(tiny_hf("gpt2", n_embd=32))


def test_run_folder_specs_expand_to_step_folders(tmp_path):
    _save_run(tiny_hf("llama"), tmp_path / "run", [10, 2, 30])
    assert [p.rsplit("/", 1)[1] for p in expand_checkpoints([tmp_path / "run"])] == ["step_2", "step_10", "step_30"]
    assert expand_checkpoints([f"{tmp_path}/run@10", f"{tmp_path}/run@step_30"]) == [
        str(tmp_path / "run" / "step_10"),
        str(tmp_path / "run" / "step_30"),
    ]
    with pytest.raises(FileNotFoundError, match="step_2, step_10, step_30"):
        expand_checkpoints([f"{tmp_path}/run@7"])
    cks = checkpoints_from(expand_checkpoints([f"{tmp_path}/run@2"]))
    assert cks[0].lr == 1e-3


def test_tracin_on_llama_checkpoints_leaves_the_model_alone(tmp_path):
    model = tiny_hf("llama")
    _save_run(tiny_hf("llama", seed=3), tmp_path / "run", [1, 2])
    before = state_sha256(model)
    feat = GradientFeaturizer({n: [m] for n, m in model.named_modules() if n.endswith("self_attn.q_proj")}, 64)
    ids = torch.randint(0, 257, (3, 8), generator=torch.Generator().manual_seed(0))
    cks = checkpoints_from(expand_checkpoints([tmp_path / "run"]))
    s = tracin(model, cks, feat, ids, ids[:2])
    assert s.shape == (3, 2) and torch.isfinite(s).all() and state_sha256(model) == before
    # Diagonal of self-influence is positive (each gradient with itself).
    assert (torch.diagonal(s[:2]) > 0).all()


def test_two_jobs_in_one_process_score_as_in_fresh_processes(tmp_path):
    """TracIn (checkpoints) then DRA on the same model spec in one process, against each with a fresh memo."""
    run = tmp_path / "run"
    _save_run(tiny_hf("llama", seed=3), run, [1, 2])
    tiny_hf("llama", seed=0).save_pretrained(tmp_path / "model")
    g = torch.Generator().manual_seed(0)
    save_tokens(tmp_path / "train.safetensors", torch.randint(0, 257, (8, 12), generator=g), "interp/byte-level")
    save_tokens(tmp_path / "q.safetensors", torch.randint(0, 257, (3, 12), generator=g), "interp/byte-level")
    common = dict(
        model=str(tmp_path / "model"),
        train=f"tokens:{tmp_path / 'train.safetensors'}",
        queries=f"tokens:{tmp_path / 'q.safetensors'}",
        device="cpu",
        shard_size=4,
    )

    def job(method, out):
        extra = {"checkpoints": [str(run)], "sketch_dim": 128} if method == "tracin" else {}
        run_attribution(AttributeConfig(method=method, out=str(tmp_path / out), **common, **extra), progress=False)
        return load_scores(tmp_path / out)["scores"]

    clear_worker_cache()
    shared = [job("tracin", "a1"), job("dra", "b1"), job("tracin", "a2")]
    clear_worker_cache()
    fresh_dra = job("dra", "b2")
    clear_worker_cache()
    fresh_tracin = job("tracin", "a3")
    clear_worker_cache()
    assert torch.equal(shared[1], fresh_dra)
    assert torch.equal(shared[0], fresh_tracin) and torch.equal(shared[2], fresh_tracin)


def test_ekfac_at_a_checkpoint_equals_ekfac_on_that_folder(tmp_path):
    run = tmp_path / "run"
    _save_run(tiny_hf("llama", seed=3), run, [1, 2])
    tiny_hf("llama", seed=0).save_pretrained(tmp_path / "model")
    g = torch.Generator().manual_seed(0)
    save_tokens(tmp_path / "train.safetensors", torch.randint(0, 257, (6, 10), generator=g), "interp/byte-level")
    save_tokens(tmp_path / "q.safetensors", torch.randint(0, 257, (2, 10), generator=g), "interp/byte-level")
    common = dict(
        method="ekfac",
        component="L1H3:qk",
        fit_samples=4,
        train=f"tokens:{tmp_path / 'train.safetensors'}",
        queries=f"tokens:{tmp_path / 'q.safetensors'}",
        device="cpu",
        shard_size=3,
    )
    clear_worker_cache()
    run_attribution(
        AttributeConfig(model=str(tmp_path / "model"), checkpoints=[f"{run}@2"], out=str(tmp_path / "a"), **common),
        progress=False,
    )
    run_attribution(AttributeConfig(model=str(run / "step_2"), out=str(tmp_path / "b"), **common), progress=False)
    a, b = load_scores(tmp_path / "a")["scores"], load_scores(tmp_path / "b")["scores"]
    torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="one checkpoint"):
        run_attribution(
            AttributeConfig(model=str(tmp_path / "model"), checkpoints=[str(run)], out=str(tmp_path / "c"), **common),
            progress=False,
        )
    assert not (tmp_path / "c").exists()
