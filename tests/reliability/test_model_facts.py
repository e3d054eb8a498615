"""The model listing and loading facts (issue 29 cause 15): one weights fact per model, the quantisation
kept when a converted folder is loaded by path, memory needs compared with the machine's, current
download commands, and hub ids answered with how to make a local folder (the toolkit is offline)."""

from __future__ import annotations

import json

import pytest

from tests.reliability.refusals import assert_refused, invoke


def test_looped_gpt_says_random_init_once():
    import interp
    from interp.models import list_models

    m = interp.load_model("looped-gpt")
    assert m.provenance["weights"].startswith("random init") and "random" not in m.provenance["source"]
    row = {r["spec"]: r for r in list_models()}["looped-gpt"]
    assert row["weights"].startswith("random init")


def test_a_converted_gguf_folder_loaded_by_path_keeps_its_quantisation(tmp_path):
    import interp
    from tests.tiny import tiny_hf

    tiny_hf("llama").save_pretrained(tmp_path / "conv")
    (tmp_path / "conv" / "interp_source.json").write_text(
        json.dumps({"gguf": "/x/SmolLM2.Q4_1.gguf", "gguf_sha256": "ab" * 32, "quantization": "Q4_1"})
    )
    prov = interp.load_model(str(tmp_path / "conv")).provenance
    assert prov["quantization"] == "Q4_1" and prov["weights"].startswith("Q4_1 GGUF dequantised")
    assert prov["gguf_sha256"] == "ab" * 32


def test_models_compares_memory_with_the_machine(monkeypatch):
    from interp.models import memory, registry

    monkeypatch.setattr(memory, "machine_memory_gb", lambda: 24.0)
    rows = {r["spec"]: r for r in registry.list_models()}
    big = rows["pythia-12b-init"]
    assert not big["available"] and big["memory_gb"] > 40 and "this machine has 24 GB" in big["where"]
    assert rows["pythia-14m-init"]["available"] and rows["pythia-14m-init"]["memory_gb"] < 0.1


def test_the_pythia_hint_uses_hf_download_and_maps_revisions(tmp_path, monkeypatch):
    """Without a local folder, pythia-70m is the hub repo EleutherAI/pythia-70m: offline and not in the HF cache,
    the error says how to get it (hf download, a revision for a step) and the local-folder alternative."""
    import interp
    from tests.interp.models.hf_fakes import hub_env

    monkeypatch.setenv("INTERP_HOME", str(tmp_path))
    hub_env(monkeypatch, tmp_path / "empty-hf-cache")
    with pytest.raises(ValueError) as err:
        interp.load_model("pythia-70m@step3000")
    msg = str(err.value)
    assert "hf download EleutherAI/pythia-70m --revision step3000" in msg and "huggingface-cli" not in msg
    assert "pythia-70m:PATH" in msg


@pytest.mark.parametrize(
    "hub_id, needles",
    [
        ("EleutherAI/pythia-70m", ("not in the HF cache", "hf download EleutherAI/pythia-70m", "--local-dir DIR")),
        ("hf:gpt2", ("not in the HF cache", "hf download gpt2", "--local-dir DIR")),
        ("gpt2", ("unknown model spec 'gpt2'", "written hf:gpt2")),
    ],
)
def test_a_hub_id_not_in_the_cache_offline_says_how_to_get_it(tmp_path, monkeypatch, hub_id, needles):
    from tests.interp.models.hf_fakes import hub_env

    hub_env(monkeypatch, tmp_path / "empty-hf-cache")
    args = ["cache", "--model", hub_id, "--hooks", "blocks.0.hook_resid_post", "--max-tokens", "64"]
    r = invoke([*args, "--out", tmp_path / "s"])
    assert_refused(r, *needles)
    assert not (tmp_path / "s").exists()
