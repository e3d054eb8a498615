"""Dashboard folders (issue 29 causes 1, 2 and 9): a half-written folder never blocks a rerun, a second
writer is refused by name, and options are checked before anything is written."""

from __future__ import annotations

import fcntl
import json
import os
import shutil

import pytest

from tests.reliability.refusals import assert_refused, invoke, snapshot, token_store

HOOK = "blocks.0.hook_resid_post"


@pytest.fixture
def store(tmp_path):
    token_store(tmp_path / "store")
    return tmp_path / "store"


def _dash(store, out, *extra):
    return invoke(["dashboard", "--store", store, "--hook", HOOK, "--out", out, "--top", "3", *extra])


def test_a_half_written_dashboard_is_rebuilt_with_or_without_overwrite(store, tmp_path):
    out = tmp_path / "dash"
    (out / ".features.partial").mkdir(parents=True)  # what kill -9 while writing pages leaves
    (out / ".features.partial" / "3.html").write_text("<html>half")
    (out / "index.html").write_text("old")
    r = _dash(store, out)
    assert r.exit_code == 0, r.output
    assert (out / "dashboard.json").is_file() and not (out / ".features.partial").exists()
    shutil.rmtree(out / "features")
    (out / "dashboard.json").unlink()  # killed after the pages, before the index: --overwrite works too
    assert _dash(store, out, "--overwrite").exit_code == 0
    assert_refused(_dash(store, out), "already holds a dashboard", "--overwrite")  # a finished one is protected


def test_a_failure_while_writing_pages_leaves_no_folder(store, tmp_path, monkeypatch):
    import errno

    import interp.dashboards.build as B

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "dash" / ".features.partial" / "0.html"))

    monkeypatch.setattr(B, "feature_fragment", full)
    assert_refused(_dash(store, tmp_path / "dash"), "disk full")
    assert not (tmp_path / "dash").exists()


def test_other_content_is_still_refused(store, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    before = snapshot(out)
    assert_refused(_dash(store, out, "--overwrite"), "other content", "notes.txt")
    assert snapshot(out) == before


@pytest.mark.parametrize("command", ["dashboard", "sae dashboard", "sae train"])
def test_a_second_writer_is_refused_by_name_and_touches_nothing(store, tmp_path, command):
    out = tmp_path / "out"
    out.mkdir()
    temp = "checkpoint.tmp" if command == "sae train" else ".features.partial"  # the first writer's work
    (out / temp).mkdir()
    (out / temp / "0.part").write_text("the first writer's bytes")
    fd = os.open(out / ".writer.lock", os.O_RDWR | os.O_CREAT)  # another open file: another writer
    os.write(fd, json.dumps({"pid": 4242, "host": "elsewhere", "since": 0}).encode())
    fcntl.flock(fd, fcntl.LOCK_EX)
    before = snapshot(out)
    try:
        if command == "dashboard":
            r = _dash(store, out, "--overwrite")
        elif command == "sae train":
            r = invoke(
                [
                    "sae",
                    "train",
                    "--store",
                    store,
                    "--arch",
                    "topk",
                    "--d-sae",
                    "16",
                    "--k",
                    "2",
                    "--out",
                    out,
                    "--max-tokens",
                    "256",
                    "--batch-size",
                    "64",
                    "--exclude",
                    "none",
                ]
            )
        else:
            sae = tmp_path / "sae"
            r = invoke(
                [
                    "sae",
                    "train",
                    "--store",
                    store,
                    "--arch",
                    "topk",
                    "--d-sae",
                    "16",
                    "--k",
                    "2",
                    "--out",
                    sae,
                    "--max-tokens",
                    "256",
                    "--batch-size",
                    "64",
                    "--exclude",
                    "none",
                ]
            )
            assert r.exit_code == 0, r.output
            r = invoke(["sae", "dashboard", "--sae", sae, "--store", store, "--out", out, "--top", "2", "--overwrite"])
        assert_refused(r, "is being written by pid 4242 on elsewhere", str(out))
        assert snapshot(out) == before
    finally:
        os.close(fd)


def test_dashboard_text_with_acts_is_refused_before_writing(store, tmp_path):
    import torch
    from safetensors.torch import save_file

    save_file({"acts": torch.rand(128, 5)}, str(tmp_path / "acts.safetensors"))
    r = invoke(
        [
            "dashboard",
            "--store",
            store,
            "--acts",
            tmp_path / "acts.safetensors",
            "--text",
            "hello",
            "--out",
            tmp_path / "dash",
        ]
    )
    assert_refused(r, "--text needs --hook")
    assert not (tmp_path / "dash").exists()
