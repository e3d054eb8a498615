"""The three commands a researcher runs first, on a hub-id model of a newly supported family, from the HF cache."""

import json

import pytest
from typer.testing import CliRunner

from interp.cli.main import app
from interp.data import byte_tokenizer
from interp.store import ActivationStore
from tests.interp.models.hf_fakes import fabricate, hub_env
from tests.tiny import tiny_family


@pytest.fixture
def qwen3_cache(tmp_path, monkeypatch):
    """org/tiny-qwen3 at revision step3 in a fabricated HF cache, offline."""
    monkeypatch.setenv("INTERP_HOME", str(tmp_path / "home"))
    folder = tmp_path / "src"
    model = tiny_family("qwen3", max_position_embeddings=256)
    model.config.architectures = [type(model).__name__]
    model.save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    fabricate(tmp_path / "hf", "org/tiny-qwen3", {"step3": folder})
    hub_env(monkeypatch, tmp_path / "hf")
    return tmp_path


def run(*args):
    res = CliRunner().invoke(app, [str(a) for a in args], prog_name="interp")
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    assert res.exit_code == 0, res.stderr
    return res


@pytest.mark.slow
def test_cache_then_sae_train_then_circuits_extract_on_a_hub_revision(qwen3_cache):
    tmp = qwen3_cache
    spec = "org/tiny-qwen3@step3"
    store = tmp / "store"
    run("cache", "--model", spec, "--hooks", "blocks.0.hook_resid_post", "--ctx-len", "32", "--max-tokens", "2048",
        "--seqs-per-shard", "16", "--out", store)  # fmt: skip
    extra = ActivationStore.open(store).meta.extra
    parity = extra["parity"]
    assert parity["adapter"] == "interp/adapters/qwen3.py" and parity["logits_max_abs_diff"] == 0.0
    assert parity["hooks"] == {"blocks.0.hook_resid_post": 0.0}  # equal to HF's hidden state there
    assert extra["provenance"]["revision"] == "step3"

    sae_out = tmp / "sae"
    run("sae", "train", "--store", store, "--arch", "topk", "--d-sae", "64", "--k", "4", "--max-tokens", "1024",
        "--batch-tokens", "256", "--out", sae_out, "--threads", "1")  # fmt: skip
    assert (sae_out / "cfg.json").exists()

    circuit = tmp / "circuit"
    run("circuits", "extract", "--model", spec, "--task", "greater-than", "--method", "eap", "--top", "5",
        "--max-rows", "4", "--min-accuracy", "0", "--out", circuit, "--threads", "1")  # fmt: skip
    graph = json.loads((circuit / "circuit.json").read_text())
    assert graph
