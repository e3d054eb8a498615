import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from attribution.lds import dattri_lds, lds, random_subsets, retrain_subsets
from tests.attribution.lds_tasks import AdditiveTask, RidgeTask

ROOT = Path(__file__).resolve().parents[2]


def test_lds_is_one_for_an_exactly_additive_model_and_minus_one_with_the_sign_flipped(tmp_path):
    task = AdditiveTask()
    masks = random_subsets(task.n_train, 50, 0.5, seed=0)
    losses = retrain_subsets(task, masks, tmp_path / "retrain", progress=False)
    exact = task.exact_scores()
    assert lds(exact, masks, losses).mean == pytest.approx(1.0, abs=1e-9)
    assert lds(-exact, masks, losses).mean == pytest.approx(-1.0, abs=1e-9)  # the metric can fail
    assert abs(lds(torch.randn_like(exact), masks, losses).mean) < 0.3


def test_lds_of_exact_influence_on_ridge_regression_is_high_and_random_scores_are_not(tmp_path):
    task = RidgeTask()
    masks = random_subsets(task.n_train, 60, 0.5, seed=1)
    losses = retrain_subsets(task, masks, tmp_path / "retrain", progress=False)
    res = lds(task.influence(), masks, losses)
    assert res.mean > 0.85 and res.low <= res.mean <= res.high, res
    noise = lds(torch.randn(task.n_train, task.n_query, generator=torch.Generator().manual_seed(0)), masks, losses)
    assert abs(noise.mean) < 0.2 and noise.high < res.low


def test_dattri_lds_agrees_with_ours_when_installed(tmp_path):
    pytest.importorskip(
        "dattri",
        reason="dattri is not installed: put it on PYTHONPATH (ATTRIBUTION_ANCHORS, "
        "attribution/README.md) to check our LDS against its implementation",
    )
    task = RidgeTask()
    masks = random_subsets(task.n_train, 50, 0.5, seed=2)
    losses = retrain_subsets(task, masks, tmp_path / "retrain", progress=False)
    ours = lds(task.influence(), masks, losses)
    theirs = dattri_lds(task.influence(), masks, losses)
    assert theirs is not None
    torch.testing.assert_close(
        torch.tensor(theirs, dtype=torch.float64), torch.tensor(ours.per_query, dtype=torch.float64), atol=1e-4, rtol=0
    )


def test_subsets_are_seeded_and_bad_arguments_are_refused():
    a, b = random_subsets(40, 5, 0.25, seed=3), random_subsets(40, 5, 0.25, seed=3)
    assert torch.equal(a, b) and (a.sum(1) == 10).all()
    with pytest.raises(ValueError, match="at least 2 subsets"):
        random_subsets(40, 1, 0.5)
    for alpha in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            random_subsets(40, 5, alpha)


def test_a_store_for_other_subsets_is_refused(tmp_path):
    task = AdditiveTask()
    retrain_subsets(task, random_subsets(task.n_train, 4, 0.5, seed=0), tmp_path / "r", shard_size=2, progress=False)
    from interp.store import StoreMismatchError

    with pytest.raises(StoreMismatchError, match="data"):
        retrain_subsets(
            task, random_subsets(task.n_train, 4, 0.5, seed=1), tmp_path / "r", shard_size=2, progress=False
        )


_CHILD = """
import sys, torch
from attribution.lds import random_subsets, retrain_subsets
from tests.attribution.lds_tasks import RidgeTask
task = RidgeTask(delay=float(sys.argv[2]))
losses = retrain_subsets(task, random_subsets(task.n_train, 12, 0.5, seed=0), sys.argv[1], shard_size=2, progress=False)
torch.save(losses, sys.argv[1] + '.pt')
"""


def test_retraining_resumes_after_kill_9_with_nothing_lost_or_duplicated(tmp_path):
    out = tmp_path / "retrain"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(out), "0.4"], env=env, cwd=ROOT)
    deadline = time.time() + 120
    while time.time() < deadline and child.poll() is None:
        manifest = out / "manifest.json"
        if manifest.exists() and len(json.loads(manifest.read_text())["shards"]) >= 2:
            break
        time.sleep(0.05)
    assert child.poll() is None, "the run finished before it could be killed"
    child.send_signal(signal.SIGKILL)
    child.wait()
    done = len(json.loads((out / "manifest.json").read_text())["shards"])
    assert 2 <= done < 6
    (out / f"shard_{done:05d}.safetensors").write_bytes(b"half a file")  # an uncommitted, damaged shard file
    subprocess.run([sys.executable, "-c", _CHILD, str(out), "0"], env=env, cwd=ROOT, check=True)
    resumed = torch.load(str(out) + ".pt")
    task = RidgeTask()
    fresh = retrain_subsets(
        task, random_subsets(task.n_train, 12, 0.5, seed=0), tmp_path / "fresh", shard_size=2, progress=False
    )
    assert torch.equal(resumed, fresh)


@pytest.mark.parametrize(
    "args, message",
    [
        (["-m", "1"], "at least 2 subsets"),
        (["--alpha", "1.0"], "strictly between"),
        (["--alpha", "0"], "strictly between"),
        (["--task", "gpt9"], "neox, looped or model"),
        (["--task", "looped", "--model", "pythia-14m-init"], "pass one of them"),
        (["--model", "pythia-14m-init", "--ctx-len", "-4"], "--ctx-len and --lr must be positive"),
    ],
)
def test_cli_lds_refuses_bad_input_with_one_error_line_and_exit_2(tmp_path, args, message):
    from typer.testing import CliRunner

    from attribution.cli import app

    res = CliRunner().invoke(app, ["lds", "--out", str(tmp_path / "lds"), *args])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], res.output
    assert not (tmp_path / "lds").exists()


def test_lds_task_is_small_to_pickle_and_its_metric_run_is_reproducible(tmp_path):
    import pickle

    from attribution.lds import RetrainShard
    from attribution.lds_task import LMTaskConfig, make_task

    task = make_task(LMTaskConfig(n_train=64, n_query=4, epochs=1, batch=16), tmp_path)
    shard = RetrainShard(0, 0, (tuple(range(32)),), task, str(tmp_path))
    assert len(pickle.dumps(shard)) < 4000  # settings, paths and row indices; never the tokens
    a, b = task.train_and_eval(torch.arange(32)), task.train_and_eval(torch.arange(32))
    assert torch.equal(a, b) and a.shape == (4,)


def _fake_run(folder: Path, method: str = "sdi") -> dict:
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    save_file(
        {"scores": torch.randn(12, 2, generator=g), "sdi": torch.randn(12, 2, 3, generator=g)},
        str(folder / "scores.safetensors"),
    )
    result = {
        "method": method,
        "n_train": 12,
        "n_queries": 2,
        "identity": {
            "model": {"spec": "looped-gpt:x"},
            "data": {
                "train": "tokens:train.safetensors",
                "train_tokens_sha256": "a" * 64,
                "queries": "tokens:q",
                "queries_tokens_sha256": "b" * 64,
            },
        },
    }
    (folder / "result.json").write_text(json.dumps(result))
    (folder / "texts.json").write_text(
        json.dumps({"train": [f"row {i} text" for i in range(12)], "queries": ["q0", "q1"]})
    )
    return result


def test_show_gives_the_lds_of_the_method_when_one_was_computed_for_the_task(tmp_path):
    from attribution.report import html_report, text_report

    _fake_run(tmp_path / "sdi")
    assert "LDS" not in text_report(tmp_path / "sdi")
    lds_json = {
        "task": {"train_tokens_sha256": "a" * 64, "query_tokens_sha256": "b" * 64},
        "methods": {"sdi": {"lds": 0.321, "ci95": [0.2, 0.4]}, "tracin": {"lds": 0.5, "ci95": [0.4, 0.6]}},
    }
    (tmp_path / "lds").mkdir()
    (tmp_path / "lds" / "lds.json").write_text(json.dumps({**lds_json, "task": {"train_tokens_sha256": "c" * 64}}))
    assert "LDS" not in text_report(tmp_path / "sdi")  # another task's LDS is not shown
    (tmp_path / "lds" / "lds.json").write_text(json.dumps(lds_json))
    assert "LDS of sdi on this task: +0.321 (95% CI +0.200 to +0.400" in text_report(tmp_path / "sdi")
    page = html_report(tmp_path / "sdi", top=3).read_text()
    assert "LDS of sdi on this task: +0.321" in page


def test_report_heatmap_text_is_left_aligned_and_histogram_has_a_y_axis_and_row_marks(tmp_path):
    from attribution.report import html_report

    _fake_run(tmp_path / "sdi")
    page = html_report(tmp_path / "sdi", top=3).read_text()
    assert ".heat td.txt{text-align:left}" in page and "<td class=txt>#" in page
    assert page.count(">count</text>") == 2  # one y axis per query's histogram
    assert page.count('stroke="#d62728"') == 2 * 3 and page.count('stroke="#1f77b4"') == 2 * 3  # top / bottom rows


def test_cli_lds_runs_on_a_user_s_model(tmp_path):
    """`--model SPEC`: the user's model fine-tuned from its own weights on each subset, its tokenizer, the harness."""
    from typer.testing import CliRunner

    from attribution.cli import app

    out = tmp_path / "mine"
    args = ["lds", "--out", str(out), "--model", "pythia-14m-init", "-m", "3", "--n-train", "12", "--n-query", "2"]
    res = CliRunner().invoke(app, [*args, "--ctx-len", "12", "--epochs", "1", "--methods", "grad_dot"])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "lds.json").read_text())
    assert set(summary["methods"]) == {"grad_dot"}
    assert json.loads((out / "settings.json").read_text())["task"]["settings"]["model"] == "pythia-14m-init"
