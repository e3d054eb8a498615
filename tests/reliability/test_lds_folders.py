"""`interp attribute lds` checks its whole output plan before its first write (issue 40 case 2): a finished or
interrupted run made with another --seed or --task, a store or other files in --out, a second `lds` writing there
and a planted lock path are each one `error:` line naming an option the command has, exit 2, with the disk as it
was. It used to retrain `full/` (and rewrite the tokens) first and be refused by the retraining store after, in
three lines advising `--wait`, an option `lds` does not have. A real run takes a few seconds (16 rows, M = 4)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.reliability.refusals import assert_refused, invoke, lock_holder, snapshot, token_store

TINY = ["--n-train", "16", "--n-query", "4", "--epochs", "1", "-m", "4", "--methods", "grad_dot", "--shard-size", "2"]


def _lds(out, *extra):
    return invoke(["attribute", "lds", "--out", out, *TINY, *extra])


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    import torch

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("lds") / "run"
    r = _lds(out)
    assert r.exit_code == 0, r.output
    return out


def _copy(finished, tmp_path, drop=()):
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    for name in drop:
        path = out / name
        if name == "retrain/shard_00001.safetensors":  # killed before this shard was committed
            manifest = json.loads((out / "retrain" / "manifest.json").read_text())
            manifest["shards"] = [s for s in manifest["shards"] if s["index"] != 1]
            manifest["n_shards"], manifest["n_rows"] = 1, sum(s["n_rows"] for s in manifest["shards"])
            (out / "retrain" / "manifest.json").write_text(json.dumps(manifest))
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return out


INTERRUPTED = {
    "finished": (),
    "killed while retraining": ("lds.json", "scores", "retrain/shard_00001.safetensors"),
    "killed after full/": ("lds.json", "scores", "retrain"),
    "made before settings.json": ("settings.json",),  # an older run: its other files record the settings
    "killed while training full/ (older run)": ("settings.json", "full", "retrain", "scores", "lds.json"),
}


OTHER = {"--seed": ["--seed", "1"], "--task": ["--task", "looped"]}
NAMED = {"--seed": "--seed 0 there, 1 here", "--task": "--task neox there, looped here"}


@pytest.mark.parametrize(
    "state, option",
    [(state, option) for state in INTERRUPTED for option in OTHER if not state.endswith("(older run)")]
    # an older run killed before `full/done.json` recorded only its tokens: another seed draws other ones
    + [("killed while training full/ (older run)", "--seed")],
)
def test_a_run_with_other_settings_is_refused_before_anything_is_written(finished, tmp_path, state, option):
    out = _copy(finished, tmp_path, INTERRUPTED[state])
    other, named = OTHER[option], "sha256" if state.endswith("(older run)") else NAMED[option]
    before = snapshot(tmp_path)
    line = assert_refused(_lds(out, *other), str(out), "other settings", named, "choose another --out")
    assert "--wait" not in line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("state", ["killed while retraining", "made before settings.json"])
def test_the_same_settings_resume(finished, tmp_path, state):
    out = _copy(finished, tmp_path, INTERRUPTED[state])
    (out / "tracin").mkdir()  # an `interp attribute run` on the task's tokens: where `attribute show` finds the LDS
    (out / "tracin" / "result.json").write_text("{}")
    r = _lds(out)
    assert r.exit_code == 0, r.output
    assert (out / "lds.json").is_file() and (out / "settings.json").is_file()


def test_another_option_is_named_by_its_flag(finished, tmp_path):
    out = _copy(finished, tmp_path)
    before = snapshot(tmp_path)
    assert_refused(_lds(out, "--alpha", "0.25"), "--alpha 0.5 there, 0.25 here")
    assert_refused(_lds(out, "--epochs", "2"), "--epochs 1 there, 2 here")
    assert snapshot(tmp_path) == before


def test_an_activation_store_or_other_files_in_out_are_refused(tmp_path):
    token_store(tmp_path / "store")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    before = snapshot(tmp_path)
    assert_refused(_lds(tmp_path / "store"), "holds a store (manifest.json", "not an LDS run", "--out")
    assert_refused(_lds(tmp_path / "mine"), "holds other files (notes.txt)", "--out")
    assert snapshot(tmp_path) == before


def test_a_second_lds_into_the_folder_is_refused_by_name(finished, tmp_path):
    out = _copy(finished, tmp_path, INTERRUPTED["killed after full/"])
    with lock_holder(out) as pid:
        before = snapshot(tmp_path)
        line = assert_refused(_lds(out), f"is being written by pid {pid}", "choose another --out")
        assert "--wait" not in line
        assert snapshot(tmp_path) == before


def test_a_planted_lock_link_is_refused(finished, tmp_path):
    victim = tmp_path / "bashrc"
    victim.write_text("the user's own file\n")
    out = _copy(finished, tmp_path)
    (out / ".writer.lock").unlink(missing_ok=True)
    os.symlink(victim, out / ".writer.lock")
    before = snapshot(tmp_path)
    assert_refused(_lds(out), "symbolic link", str(out / ".writer.lock"))
    assert snapshot(tmp_path) == before
