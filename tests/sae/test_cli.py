"""`interp sae` through typer's CliRunner: train, eval, dashboard, and clear errors."""

import json

import torch
from typer.testing import CliRunner

from sae.cli import app
from sae.synthetic import write_store

runner = CliRunner()


def _store(path, d=16, n=2048, seed=0):
    g = torch.Generator().manual_seed(seed)
    return write_store(path, torch.relu(torch.randn(n, 24, generator=g)) @ torch.randn(24, d, generator=g), rows_per_shard=1024)


def test_train_eval_dashboard(tmp_path):
    _store(tmp_path / "store")
    r = runner.invoke(app, ["train", "--store", str(tmp_path / "store"), "--arch", "coh", "--out", str(tmp_path / "sae"),
                            "--d-sae", "32", "--max-tokens", "1024", "--batch-tokens", "256", "--set", "coh_lambda=0.5"])
    assert r.exit_code == 0, r.output
    # cfg.json is the inference form plain sae-lens loads (coh on the ReLU base ships as "standard");
    # the training settings are in training_sae/
    assert json.loads((tmp_path / "sae" / "cfg.json").read_text())["architecture"] == "standard"
    assert json.loads((tmp_path / "sae" / "training_sae" / "cfg.json").read_text())["coh_lambda"] == 0.5
    r = runner.invoke(app, ["eval", "--sae", str(tmp_path / "sae"), "--store", str(tmp_path / "store"), "--out", str(tmp_path / "m")])
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert 0 < m["fvu"] < 2 and m["rows"] == 2048
    # with the same (default) options the dashboard reads the rows `sae eval` scores, with the same row
    # rule and codes, so its header's FVU and L0 are eval's
    r = runner.invoke(app, ["dashboard", "--sae", str(tmp_path / "sae"), "--store", str(tmp_path / "store"),
                            "--out", str(tmp_path / "d"), "--top", "4"])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "d" / "dashboard.json").read_text())
    assert summary["recon"]["rows"] == m["rows"] and summary["header"]["rows rule"] == m["row_rule"]["exclude"]
    assert abs(summary["recon"]["fvu"] - m["fvu"]) < 1e-4 and abs(summary["recon"]["l0"] - m["l0"]) < 1e-4
    assert len(list((tmp_path / "d" / "features").glob("*.html"))) == 4
    r = runner.invoke(app, ["dashboard", "--sae", str(tmp_path / "sae"), "--store", str(tmp_path / "store"),
                            "--out", str(tmp_path / "d2"), "--features", "3,32", "--exclude", "none"])
    assert r.exit_code == 2 and "--features 32 out of range: there are 32 features" in r.output
    assert not (tmp_path / "d2").exists()


def test_clear_errors(tmp_path):
    _store(tmp_path / "store")
    r = runner.invoke(app, ["train", "--store", str(tmp_path / "store"), "--arch", "polly", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "unknown SAE architecture 'polly'" in r.output and "poly" in r.output
    assert not (tmp_path / "x").exists()
    _store(tmp_path / "store32", d=32)
    r = runner.invoke(app, ["train", "--store", str(tmp_path / "store32"), "--arch", "topk", "--out", str(tmp_path / "s32"),
                            "--d-sae", "16", "--k", "2", "--max-tokens", "512", "--batch-tokens", "256"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["eval", "--sae", str(tmp_path / "s32"), "--store", str(tmp_path / "store")])
    assert r.exit_code == 2 and "d_model 16 but the SAE expects d_in 32" in r.output
    r = runner.invoke(app, ["archs"])
    assert "c2r" in r.output and "baseline: batchtopk" in r.output


def test_old_spellings_still_work_with_a_warning(tmp_path):
    _store(tmp_path / "store")
    r = runner.invoke(app, ["train", "--store", str(tmp_path / "store"), "--arch", "topk", "--out", str(tmp_path / "s"),
                            "--d-sae", "16", "--k", "2", "--tokens", "512", "--batch-tokens", "256", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert "--tokens is deprecated" in r.stderr and json.loads(r.stdout)["steps"] == 2
    r = runner.invoke(app, ["eval", "--sae", str(tmp_path / "s"), "--store", str(tmp_path / "store"), "--ce-seqs", "2",
                            "--out", str(tmp_path / "old.json")])
    assert r.exit_code == 0 and "deprecated" in r.stderr and (tmp_path / "old.json").is_file()


def test_a_moved_sae_run_still_finds_its_store(tmp_path):
    import shutil

    from sae.dashboard import sae_rows

    _store(tmp_path / "runs" / "store")
    r = runner.invoke(app, ["train", "--store", str(tmp_path / "runs" / "store"), "--arch", "topk", "--out",
                            str(tmp_path / "runs" / "sae"), "--d-sae", "16", "--k", "2", "--max-tokens", "512",
                            "--batch-tokens", "256"])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "runs" / "sae" / "train_config.json").read_text())["store"] == "../store"
    shutil.move(tmp_path / "runs", tmp_path / "moved")
    assert sae_rows(str(tmp_path / "moved" / "sae")).store.path.resolve() == (tmp_path / "moved" / "store").resolve()


def test_overwrite_replaces_a_run_with_other_settings(tmp_path):
    _store(tmp_path / "store")
    base = ["train", "--store", str(tmp_path / "store"), "--arch", "topk", "--out", str(tmp_path / "s"),
            "--k", "2", "--max-tokens", "512", "--batch-tokens", "256"]
    assert runner.invoke(app, [*base, "--d-sae", "16"]).exit_code == 0
    r = runner.invoke(app, [*base, "--d-sae", "32"])
    assert r.exit_code == 2 and "other settings" in r.stderr
    r = runner.invoke(app, [*base, "--d-sae", "32", "--restart"])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "s" / "cfg.json").read_text())["d_sae"] == 32


def test_eval_device_option(tmp_path):
    import pytest

    _store(tmp_path / "store")
    assert runner.invoke(app, ["train", "--store", str(tmp_path / "store"), "--arch", "topk", "--k", "4", "--d-sae", "16",
                               "--max-tokens", "1024", "--batch-tokens", "256", "--out", str(tmp_path / "s")]).exit_code == 0
    r = runner.invoke(app, ["eval", "--sae", str(tmp_path / "s"), "--store", str(tmp_path / "store"), "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["device"] == "cpu"
    r = runner.invoke(app, ["eval", "--sae", str(tmp_path / "s"), "--store", str(tmp_path / "store"), "--device", "gpu"])
    assert r.exit_code == 2 and "unknown device 'gpu'" in r.output
    if not torch.cuda.is_available():
        r = runner.invoke(app, ["eval", "--sae", str(tmp_path / "s"), "--store", str(tmp_path / "store"), "--device", "cuda"])
        assert r.exit_code == 2 and "--device cpu" in r.output
    else:
        pytest.skip("CUDA is present: tests/gpu covers --device cuda")
