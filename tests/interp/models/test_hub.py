"""Hub ids and revisions in `load_model`, from a fabricated HF cache (offline): weights, provenance, routing."""

import pytest
import torch
from transformers import BertConfig, LlamaConfig, Qwen2Config, T5Config

import interp
from interp.adapters import ADAPTERS
from interp.models import hub
from tests.interp.models.hf_fakes import config_repo, fabricate, hub_env, save_repo
from tests.tiny import VOCAB


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An HF cache holding org/tiny at main and step3 (different weights), offline: (HF models, shas, cache)."""
    monkeypatch.setenv("INTERP_HOME", str(tmp_path / "home"))
    refs = {
        "main": save_repo(tmp_path / "src" / "main", seed=0),
        "step3": save_repo(tmp_path / "src" / "step3", seed=1),
    }
    shas = fabricate(tmp_path / "hf", "org/tiny", {rev: tmp_path / "src" / rev for rev in refs})
    hub_env(monkeypatch, tmp_path / "hf")
    return refs, shas, tmp_path / "hf"


X = torch.randint(0, VOCAB, (1, 9), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    "spec, kw, rev",
    [
        ("org/tiny", {}, "main"),
        ("org/tiny", {"revision": "step3"}, "step3"),
        ("org/tiny@step3", {}, "step3"),
        ("hf:org/tiny@step3", {"revision": "step3"}, "step3"),
    ],
)
def test_hub_id_and_revision_load_their_weights(cache, spec, kw, rev):
    refs, shas, root = cache
    model = interp.load_model(spec, **kw)
    assert torch.equal(model(X), refs[rev](X).logits)
    prov = model.provenance
    want = {"repo_id": "org/tiny", "revision": rev, "commit_sha": shas[rev], "source": "hf-cache"}
    assert {k: prov[k] for k in want} == want
    assert prov["spec"] == spec and prov["model_type"] == "llama" and len(prov["weights_sha256"]) == 64
    assert "@sha256:" in prov["tokenizer"] and model.tokenizer.vocab_size == VOCAB - 1


def test_a_commit_sha_is_a_revision_and_the_cache_is_left_as_it_was(cache):
    refs, shas, root = cache
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    a = interp.load_model(f"org/tiny@{shas['step3']}", dtype=torch.bfloat16)
    assert a.provenance["commit_sha"] == shas["step3"] and a.provenance["dtype"] == "bfloat16"
    b = interp.load_model("org/tiny", revision="step3", device_map="auto")  # passed through to from_pretrained
    assert b.provenance["device_map"] == "auto" and torch.equal(b(X), refs["step3"](X).logits)
    assert a.provenance["weights_sha256"] == b.provenance["weights_sha256"]  # the same file, remembered outside
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


def test_pythia_names_map_to_the_eleutherai_repo(cache, tmp_path, monkeypatch):
    refs, _, root = cache
    main = save_repo(tmp_path / "p" / "main", arch="gpt_neox", seed=2)
    step = save_repo(tmp_path / "p" / "step3", arch="gpt_neox", seed=3)
    fabricate(root, "EleutherAI/pythia-14m", {"main": tmp_path / "p" / "main", "step3": tmp_path / "p" / "step3"})
    assert torch.equal(interp.load_model("pythia-14m")(X), main(X).logits)
    m = interp.load_model("pythia-14m@step3")
    assert torch.equal(m(X), step(X).logits) and m.provenance["repo_id"] == "EleutherAI/pythia-14m"
    assert torch.equal(interp.load_model("pythia-14m", revision="step3")(X), step(X).logits)
    rows = {r["spec"]: r for r in interp.models.list_models()}
    assert "in the HF cache (main, step3)" in rows["pythia-14m"]["where"]
    # a local folder wins for the bare name; a revision still means the hub
    from interp.models.pythia import random_pythia

    local = random_pythia("14m", seed=4, vocab_size=VOCAB)
    local.save_pretrained(tmp_path / "home" / "models" / "pythia-14m")
    assert torch.equal(interp.load_model("pythia-14m")(X), local(X).logits)
    assert torch.equal(interp.load_model("pythia-14m@step3")(X), step(X).logits)
    with pytest.raises(ValueError, match="needs trained weights.*hf download EleutherAI/pythia-31m.*pythia-31m-init"):
        interp.load_model("pythia-31m")


def test_a_path_on_disk_is_never_a_hub_id(cache, tmp_path, monkeypatch):
    refs, shas, _ = cache
    monkeypatch.chdir(tmp_path)
    mine = save_repo(tmp_path / "org" / "tiny", seed=5)
    save_repo(tmp_path / "runs" / "r" / "step_10", arch="gpt2", seed=6)
    assert torch.equal(interp.load_model("org/tiny")(X), mine(X).logits)  # exists on disk: a path
    assert torch.equal(interp.load_model("hf:org/tiny")(X), refs["main"](X).logits)  # forced hub
    assert interp.load_model("runs/r@10").provenance["step"] == 10  # PATH@N: a step of a local run
    with pytest.raises(FileNotFoundError, match="no such model path"):
        interp.load_model("./org/other")  # forced path
    with pytest.raises(ValueError, match="revision= is for hub ids"):
        interp.load_model("org/tiny", revision="step3")


def expect(spec, *needles, **kw):
    with pytest.raises(ValueError) as err:
        interp.load_model(spec, **kw)
    for n in needles:
        assert n in str(err.value), (n, str(err.value))
    return err.value


def test_not_in_the_cache_offline_says_how_to_get_it(cache):
    err = expect(
        "org/missing", "org/missing revision main", "HF_HUB_OFFLINE=1", "hf download org/missing --revision main"
    )
    assert isinstance(err, hub.NotCachedError) and "--local-dir DIR" in str(err)
    expect("org/tiny@step9", "org/tiny revision step9", "cached revisions: main, step3", "--revision step9")
    expect("org/tiny@main", "two revisions", revision="step3")
    expect("smollm2-135m@x", "has no revisions")
    expect("org/tiny", "dtype 'int8'", dtype="int8")


def test_models_that_cannot_be_hooked_are_refused_before_any_weights(cache, tmp_path, monkeypatch):
    _, _, root = cache
    monkeypatch.delitem(ADAPTERS, "qwen2", raising=False)  # a causal LM type with no adapter, whatever ships
    small = dict(vocab_size=300, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)
    repos = {
        "org/t5": (T5Config(d_model=8, d_ff=16, num_layers=1, num_heads=2, d_kv=4), ()),
        "org/bert": (BertConfig(**small, architectures=["BertForMaskedLM"]), ("model.safetensors",)),
        "org/qwen": (Qwen2Config(**small), ("model.safetensors",)),
        "org/pickled": (LlamaConfig(**small), ("pytorch_model.bin",)),
        "org/notok": (LlamaConfig(**small), ("model.safetensors",)),
        "org/remote": (LlamaConfig(**small, auto_map={"AutoModelForCausalLM": "m.M"}), ("model.safetensors",)),
    }
    for repo, (config, files) in repos.items():
        config_repo(tmp_path / repo, config, files)  # empty weight files: reading one would fail
        fabricate(root, repo, {"main": tmp_path / repo})
    errors = [
        expect("org/t5", "org/t5@main is a sequence-to-sequence (encoder-decoder) model (t5)"),
        expect("org/bert", "org/bert@main is not a causal language model", "'bert' is encoder-only"),
        expect("org/qwen", "no hook adapter for model type 'qwen2'", "interp/adapters/qwen2.py", "register_adapter"),
        expect("org/pickled", "pickle", "safetensors only"),
        expect("org/notok", "no tokenizer files", "300 tokens"),
        expect("org/remote", "auto_map", "never runs code"),
    ]
    assert all("\n" not in str(e) for e in errors)  # each one line, as the CLI prints it


def cli(*args):
    """`interp ARGS` in this process: (exit status, stderr)."""
    from typer.testing import CliRunner

    from interp.cli.main import app

    res = CliRunner().invoke(app, list(args), prog_name="interp")
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.stderr


CACHE = ["cache", "--ctx-len", "16", "--max-tokens", "64", "--hooks", "blocks.0.hook_resid_post"]


@pytest.mark.parametrize(
    "model, needles",
    [
        ("org/missing", ["org/missing revision main is not in the HF cache", "hf download org/missing"]),
        ("org/tiny@step9", ["org/tiny revision step9", "cached revisions: main, step3"]),
        ("hf:bad//id", ["'bad//id' is not a hub id"]),
    ],
)
def test_the_cli_says_it_in_one_error_line_and_writes_nothing(cache, tmp_path, model, needles):
    out = tmp_path / "store"
    code, err = cli(*CACHE, "--model", model, "--out", str(out))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert all(n in lines[0] for n in needles), lines[0]
    assert not out.exists()


def test_the_cli_caches_a_hub_revision(cache, tmp_path):
    from interp.store import ActivationStore

    out = tmp_path / "store"
    code, err = cli(*CACHE, "--model", "org/tiny@step3", "--out", str(out))
    assert code == 0, err
    assert ActivationStore.open(out).meta.model == "org/tiny@step3"


def test_the_environment_alone_points_a_fresh_process_at_the_cache(cache):
    """HF_HUB_CACHE and HF_HUB_OFFLINE as a user sets them, read by huggingface_hub at import (no patching)."""
    import json
    import os
    import subprocess
    import sys

    refs, shas, root = cache
    code = (
        "import json, torch, interp; torch.set_num_threads(1); m = interp.load_model('org/tiny@step3'); "
        "x = torch.arange(9)[None]; print(json.dumps([m.provenance, m(x)[0, -1, :4].tolist()]))"
    )
    env = {**os.environ, "HF_HUB_CACHE": str(root), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    prov, logits = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (prov["commit_sha"], prov["source"]) == (shas["step3"], "hf-cache")
    with torch.no_grad():
        assert logits == pytest.approx(refs["step3"](torch.arange(9)[None]).logits[0, -1, :4].tolist(), abs=1e-5)


def test_what_a_hub_model_needs_is_read_from_its_headers_and_checked_before_it_loads(cache, monkeypatch, caplog):
    from interp.models import memory

    refs, _, _ = cache
    n = sum(p.numel() for p in refs["main"].parameters())  # tied weights once, as the file holds them
    with caplog.at_level("INFO", logger="interp.models.hub"):
        model = interp.load_model("org/tiny")
    assert model.provenance["parameters"] == n and model.provenance["memory_gb"] == round(4 * n / 1e9, 3)
    assert any("~" in r.message and "as float32" in r.message for r in caplog.records)
    monkeypatch.setattr(memory, "machine_memory_gb", lambda: 1e-6)
    with pytest.raises(ValueError, match="does not fit.*bfloat16.*device_map='auto'"):
        interp.load_model("org/tiny")
    spread = interp.load_model("org/tiny", device_map="cpu")  # spread over devices: the check is theirs
    assert spread.provenance["device_map"] == "cpu"


@pytest.mark.parametrize(
    "content",
    [
        b"\x80\x04\x95" + b"pickle" * 10,  # a pickle under a safetensors name
        (2**60).to_bytes(8, "little") + b"{}",  # a header claiming 2^60 bytes
        (12).to_bytes(8, "little") + b"not json at all",
    ],
)
def test_a_weights_file_that_is_not_safetensors_is_refused_by_name(tmp_path, content):
    from interp.models.memory import parameter_count

    bad = tmp_path / "model.safetensors"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match="model.safetensors is not a readable safetensors file"):
        parameter_count([bad])
