import json

import pytest
import torch
from typer.testing import CliRunner

import attribution.jobs as jobs
from attribution.cli import app
from attribution.jobs import AttributeConfig, load_scores, run_attribution, save_tokens
from attribution.looped import random_looped_gpt
from attribution.train import train_lm
from interp.infra.jobs import clear_worker_cache
from interp.store.atomic import temp_path_for

BYTE = "interp/byte-level"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny looped GPT trained for 6 steps with checkpoints at 3 and 6, plus token files."""
    root = tmp_path_factory.mktemp("attr")
    model = random_looped_gpt(hidden_size=32, num_attention_heads=2, num_hidden_layers=3, intermediate_size=64,
                              max_position_embeddings=32)
    g = torch.Generator().manual_seed(0)
    pool = torch.randint(0, 257, (40, 24), generator=g)
    train_lm(model, pool, steps=6, batch_size=8, lr=1e-3, save_steps=(3, 6), out=root / "run")
    save_tokens(root / "train.safetensors", pool[:20], BYTE)
    save_tokens(root / "queries.safetensors", pool[20:23], BYTE)
    save_tokens(root / "other.safetensors", pool[20:23], "gpt2")
    return root


def _cfg(root, out, method="sdi", **kw):
    return AttributeConfig(method=method, model=f"looped-gpt:{root / 'run'}", train=f"tokens:{root / 'train.safetensors'}",
                           queries=f"tokens:{root / 'queries.safetensors'}", out=str(root / out), shard_size=6,
                           sketch_dim=256, device="cpu", **kw)


def test_sdi_job_matches_direct_computation_and_sums_to_tracin(run):
    summary = run_attribution(_cfg(run, "sdi"), progress=False)
    assert summary["shards"] == 4
    s = load_scores(run / "sdi")
    assert s["scores"].shape == (20, 3) and s["sdi"].shape == (20, 3, 3)
    torch.testing.assert_close(s["sdi"].sum(-1), s["scores"], rtol=1e-4, atol=1e-4 * s["scores"].abs().max().item())
    from attribution.sdi import step_decomposed_influence
    from attribution.tracin import checkpoints_from, run_checkpoints
    from interp import load_model

    model = load_model(f"looped-gpt:{run / 'run'}").hf_model
    toks = {k: __import__("safetensors.torch").torch.load_file(str(run / f"{k}.safetensors"))["tokens"]
            for k in ("train", "queries")}
    ref = step_decomposed_influence(model, checkpoints_from(run_checkpoints(run / "run")), toks["train"],
                                    toks["queries"], sketch_dim=256)
    torch.testing.assert_close(s["sdi"], ref.sdi, rtol=1e-4, atol=1e-5 * ref.sdi.abs().max().item())


def test_killed_job_resumes_to_the_same_scores(run, monkeypatch):
    run_attribution(_cfg(run, "full", method="tracin"), progress=False)
    real = jobs.score_shard
    calls = {"n": 0}

    def dies_on_third(task):
        calls["n"] += 1
        if calls["n"] == 3:
            temp_path_for(run / "killed" / "shard_00002.safetensors").write_bytes(b"half written")
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(jobs, "score_shard", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        run_attribution(_cfg(run, "killed", method="tracin"), progress=False)
    monkeypatch.setattr(jobs, "score_shard", real)
    summary = run_attribution(_cfg(run, "killed", method="tracin"), progress=False)
    assert summary["shards_computed_now"] == 2  # two shards were committed before the kill
    assert sorted(p.name for p in (run / "killed").iterdir() if p.name.startswith(".") and p.name != ".writer.lock") == []  # no temp files
    torch.testing.assert_close(load_scores(run / "killed")["scores"], load_scores(run / "full")["scores"])


@pytest.mark.slow
def test_ray_executor_gives_the_same_scores(run):
    clear_worker_cache()
    run_attribution(_cfg(run, "inproc", method="tracin"), progress=False)
    run_attribution(_cfg(run, "ray", method="tracin", executor="ray", num_workers=1), progress=False)
    torch.testing.assert_close(load_scores(run / "ray")["scores"], load_scores(run / "inproc")["scores"])


def test_bad_inputs_are_refused_before_anything_is_written(run):
    with pytest.raises(ValueError, match="different tokenizers"):
        run_attribution(_cfg(run, "bad1", queries=None) if False else AttributeConfig(
            method="tracin", model=f"looped-gpt:{run / 'run'}", train=f"tokens:{run / 'train.safetensors'}",
            queries=f"tokens:{run / 'other.safetensors'}", out=str(run / "bad1")), progress=False)
    assert not (run / "bad1").exists()
    nolr = run / "nolr"
    nolr.mkdir()
    import shutil

    shutil.copytree(run / "run" / "step_3", nolr / "step_3")
    (nolr / "step_3" / "training_state.json").unlink()
    with pytest.raises(ValueError, match="no learning rate"):
        run_attribution(_cfg(run, "bad2", method="tracin", checkpoints=[str(nolr)]), progress=False)
    assert not (run / "bad2").exists()
    with pytest.raises(ValueError, match="layer 7 does not exist"):
        run_attribution(_cfg(run, "bad3", method="ekfac", component="L7H0:qk"), progress=False)
    with pytest.raises(ValueError, match="head 5 does not exist"):
        run_attribution(_cfg(run, "bad4", method="ekfac", component="L0H5"), progress=False)
    assert not (run / "bad3").exists() and not (run / "bad4").exists()


def test_cli_runs_ekfac_and_dra_and_reports_errors(run):
    runner = CliRunner()
    base = ["--model", f"looped-gpt:{run / 'run'}", "--train", f"tokens:{run / 'train.safetensors'}",
            "--queries", f"tokens:{run / 'queries.safetensors'}", "--shard-size", "8", "--device", "cpu"]
    res = runner.invoke(app, ["run", "--method", "ekfac", "--component", "L1H1:qk", "--fit-samples", "8",
                              "--out", str(run / "ek"), *base])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n_train"] == 20
    assert load_scores(run / "ek")["scores"].shape == (20, 3)
    res = runner.invoke(app, ["run", "--method", "dra", "--out", str(run / "dra"), *base])
    assert res.exit_code == 0, res.output
    assert load_scores(run / "dra")["scores"].shape == (20, 1)
    res = runner.invoke(app, ["run", "--method", "ekfac", "--component", "L0H9", "--out", str(run / "ek2"), *base])
    assert res.exit_code == 2 and "head 9 does not exist" in res.output


def test_overwrite_starts_over_and_replaces_a_run_with_other_settings(run):
    first = run_attribution(_cfg(run, "ow", method="tracin"), progress=False)
    again = run_attribution(_cfg(run, "ow", method="tracin"), progress=False)
    assert again["shards_computed_now"] == 0  # resume by default: nothing left to do
    with pytest.raises(ValueError, match="other settings"):
        run_attribution(_cfg(run, "ow", method="sdi"), progress=False)
    redone = run_attribution(_cfg(run, "ow", method="sdi"), progress=False, overwrite=True)
    assert redone["shards_computed_now"] == first["shards"] and "sdi" in load_scores(run / "ow")


@pytest.mark.parametrize("n_train", [1_000, 40_000])
def test_a_pickled_shard_task_carries_only_its_own_rows(n_train):
    """A Ray task is pickled: its rows are a view of the whole training tensor, and a pickled view would carry
    the whole storage (8 rows of 40,000 x 64 int64 = 20 MB). The bytes must not grow with the training set."""
    import pickle

    train = torch.zeros(n_train, 64, dtype=torch.long)
    task = jobs.ShardTask(3, 24, train[24:32], AttributeConfig(method="tracin", model="m", train="t", queries="q", out="o"),
                          "out", {})
    size = len(pickle.dumps(task))
    assert size < 8 * 64 * 8 + 4_000
    back = pickle.loads(pickle.dumps(task))
    assert torch.equal(back.tokens, train[24:32]) and back.index == 3 and back.start == 24
    assert task.tokens.untyped_storage().data_ptr() == train.untyped_storage().data_ptr()  # in-process: no copy


def test_checkpoints_are_loaded_once_per_worker_not_once_per_shard(run, monkeypatch):
    from attribution.tracin import Checkpoint

    loads = []
    real = Checkpoint.load
    monkeypatch.setattr(Checkpoint, "load", lambda self, model: loads.append(self.path) or real(self, model))
    clear_worker_cache()
    run_attribution(_cfg(run, "tracin-memo", method="tracin"), progress=False)  # 4 shards, 2 checkpoints
    scoring = loads[2:]  # the first two loads compute the query features in `prepare`
    assert len(loads) == 4 and sorted(scoring) == sorted(set(scoring))


def test_damping_and_label_samples_reach_the_ekfac_fit(run, monkeypatch):
    import attribution.influence as influence

    seen = {}
    real = influence.fit_ekfac
    monkeypatch.setattr(influence, "fit_ekfac", lambda *a, **kw: seen.update(kw) or real(*a, **kw))
    base = ["--model", f"looped-gpt:{run / 'run'}", "--train", f"tokens:{run / 'train.safetensors'}",
            "--queries", f"tokens:{run / 'queries.safetensors'}", "--shard-size", "10", "--device", "cpu",
            "--method", "ekfac", "--component", "L1H1:qk", "--fit-samples", "8"]
    res = CliRunner().invoke(app, ["run", *base, "--damping", "1.0", "--label-samples", "2", "--out", str(run / "ekd")])
    assert res.exit_code == 0, res.output
    assert seen["damping_alpha"] == 1.0 and seen["label_samples"] == 2
    res = CliRunner().invoke(app, ["run", *base, "--damping", "0", "--out", str(run / "ekd0")])
    assert res.exit_code == 2 and "damping must be positive" in res.output and not (run / "ekd0").exists()


def test_the_old_group_form_runs_the_job_with_a_deprecation_warning(tmp_path):
    """`interp attribute --method ...` (options on the group, before `run`) still reaches `run`, with a warning."""
    res = CliRunner().invoke(app, ["--method", "tracin", "--overwrite", "--model", "pythia-14m-init"])
    assert res.exit_code == 2
    assert "warning: `interp attribute --method ...` is deprecated" in res.stderr
    assert "missing --train, --queries, --out" in res.stderr
    assert not list(tmp_path.iterdir())
