"""Hub ids through a fake hub on 127.0.0.1: download two revisions into an empty HF cache, then load them offline."""

import socket

import pytest
import torch

import interp
from tests.interp.models.hf_fakes import FakeHub, commit_sha, hub_env, save_repo
from tests.tiny import VOCAB

X = torch.randint(0, VOCAB, (1, 7), generator=torch.Generator().manual_seed(1))


@pytest.fixture
def repos(tmp_path, monkeypatch):
    """org/tiny at main and step3 (different weights), a pickle-only repo and one whose type has no adapter."""
    monkeypatch.setenv("INTERP_HOME", str(tmp_path / "home"))
    src = tmp_path / "src"
    refs = {rev: save_repo(src / rev, seed=seed) for rev, seed in (("main", 0), ("step3", 1))}
    (src / "main" / "pytorch_model.bin").write_bytes(b"never fetched")  # beside the safetensors: left alone
    save_repo(src / "pickled", seed=2)
    (src / "pickled" / "model.safetensors").rename(src / "pickled" / "pytorch_model.bin")
    save_repo(src / "neox", arch="gpt_neox", seed=3)
    folders = {
        "org/tiny": {"main": src / "main", "step3": src / "step3"},
        "org/pickled": {"main": src / "pickled"},
        "org/neox": {"main": src / "neox"},
    }
    return refs, folders, tmp_path / "hf"


def test_two_revisions_download_then_load_offline(repos, monkeypatch):
    refs, folders, cache = repos
    with FakeHub(folders) as hub:
        hub_env(monkeypatch, cache, endpoint=hub.url, offline=False)
        for rev in ("main", "step3"):
            model = interp.load_model("org/tiny", revision=None if rev == "main" else rev)
            assert torch.equal(model(X), refs[rev](X).logits)
            prov = model.provenance
            assert (prov["source"], prov["revision"], prov["commit_sha"]) == ("hub", rev, commit_sha("org/tiny", rev))
        assert not torch.equal(refs["main"](X).logits, refs["step3"](X).logits)
        fetched = {path.rsplit("/", 1)[1] for method, path in hub.requests if "/resolve/" in path}
        assert "model.safetensors" in fetched and "pytorch_model.bin" not in fetched
    root = cache / "models--org--tiny"
    assert {p.name for p in (root / "refs").iterdir()} == {"main", "step3"}
    for rev in ("main", "step3"):
        snap = root / "snapshots" / commit_sha("org/tiny", rev)
        assert (snap / "model.safetensors").is_file() and not (snap / "pytorch_model.bin").exists()

    hub_env(monkeypatch, cache, offline=True)  # the hub is gone: the cache alone serves both revisions
    for spec, rev in (("org/tiny", "main"), ("org/tiny@step3", "step3")):
        model = interp.load_model(spec)
        assert torch.equal(model(X), refs[rev](X).logits) and model.provenance["source"] == "hf-cache"


def test_an_unreachable_hub_falls_back_to_the_cache(repos, monkeypatch):
    refs, folders, cache = repos
    with FakeHub(folders) as hub:
        hub_env(monkeypatch, cache, endpoint=hub.url, offline=False)
        interp.load_model("org/tiny@step3")
    with socket.socket() as s:  # a port nothing listens on: connection refused, as with no network
        s.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{s.getsockname()[1]}"
    hub_env(monkeypatch, cache, endpoint=gone, offline=False)
    model = interp.load_model("org/tiny@step3")
    assert torch.equal(model(X), refs["step3"](X).logits) and model.provenance["source"] == "hf-cache"
    with pytest.raises(ValueError, match=r"org/tiny revision step9 is not in the HF cache .* cannot be reached"):
        interp.load_model("org/tiny@step9")


def test_the_hub_answers_refusals_before_any_weights_are_fetched(repos, monkeypatch):
    from interp.adapters import ADAPTERS

    _, folders, cache = repos
    monkeypatch.delitem(ADAPTERS, "gpt_neox")  # a causal LM type with no adapter
    with FakeHub(folders) as hub:
        hub_env(monkeypatch, cache, endpoint=hub.url, offline=False)
        with pytest.raises(ValueError, match="org/tiny has no revision 'step9' on the hub"):
            interp.load_model("org/tiny@step9")
        with pytest.raises(ValueError, match="no model 'org/none' on the hub"):
            interp.load_model("org/none")
        with pytest.raises(ValueError, match=r"org/pickled@main has its weights only as pickle files \(pytorch_model"):
            interp.load_model("org/pickled")
        with pytest.raises(ValueError, match="no hook adapter for model type 'gpt_neox'.*interp/adapters/gpt_neox.py"):
            interp.load_model("org/neox")
        fetched = [path for method, path in hub.requests if "/resolve/" in path]
        assert fetched and not [p for p in fetched if p.endswith((".safetensors", ".bin"))]


def test_sharded_weights_are_the_shards_the_index_names(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_HOME", str(tmp_path / "home"))
    ref = save_repo(tmp_path / "sharded", seed=4, shard="40KB")
    shards = sorted(p.name for p in (tmp_path / "sharded").glob("model-*.safetensors"))
    (tmp_path / "sharded" / "consolidated.safetensors").write_bytes(b"another format: not loaded, not fetched")
    with FakeHub({"org/sharded": {"main": tmp_path / "sharded"}}) as hub:
        hub_env(monkeypatch, tmp_path / "hf", endpoint=hub.url, offline=False)
        model = interp.load_model("org/sharded")
        fetched = {path.rsplit("/", 1)[1] for method, path in hub.requests if method == "GET" and "/resolve/" in path}
    assert len(shards) > 1 and fetched >= set(shards) and "consolidated.safetensors" not in fetched
    assert torch.equal(model(X), ref(X).logits)
    hub_env(monkeypatch, tmp_path / "hf", offline=True)
    assert interp.load_model("org/sharded").provenance["weights_sha256"] == model.provenance["weights_sha256"]
