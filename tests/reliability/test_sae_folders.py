"""Crafted or damaged SAE folders (issue 29 cause 3) are refused in one line naming the file, through
`load_sae`, `sae.from_pretrained` and `interp sae eval`; nothing is written."""

from __future__ import annotations

import json
import os

import pytest

from tests.reliability.refusals import assert_refused, invoke, snapshot, token_store


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    from sae import make_sae

    root = tmp_path_factory.mktemp("sae")
    make_sae("topk", d_in=12, d_sae=16, k=2).save_model(str(root / "good"))
    return root / "good"


def _cfg(good):
    return json.loads((good / "cfg.json").read_text())


def _damage(kind, good, folder):
    import shutil

    shutil.copytree(good, folder)
    cfg, weights = folder / "cfg.json", folder / "sae_weights.safetensors"
    edit = {
        "d_in_string": {"d_in": "12"},
        "d_sae_zero": {"d_sae": 0},
        "unknown_arch": {"architecture": "evil"},
        "k_string": {"k": "2"},
        "k_huge": {"k": 1000},
        "metadata_list": {"metadata": []},
        "shape_mismatch": {"d_in": 13},
    }
    if kind in edit:
        cfg.write_text(json.dumps({**_cfg(good), **edit[kind]}))
    elif kind == "cfg_list":
        cfg.write_text("[1, 2]")
    elif kind == "cfg_truncated":
        cfg.write_text(cfg.read_text()[:40])
    elif kind == "cfg_binary":
        cfg.write_bytes(b"\xff\xfe\x00garbage")
    elif kind == "weights_garbage":
        weights.write_bytes(os.urandom(512))
    elif kind == "weights_truncated":
        weights.write_bytes(weights.read_bytes()[:-40])
    elif kind == "weights_symlink_loop":
        weights.unlink()
        os.symlink(weights, weights)
    elif kind == "weights_symlink_dir":
        weights.unlink()
        os.symlink(folder, weights)
    elif kind == "weights_dangling":
        weights.unlink()
        os.symlink(folder / "gone", weights)
    return folder


KINDS = [
    "d_in_string",
    "d_sae_zero",
    "unknown_arch",
    "k_string",
    "k_huge",
    "metadata_list",
    "shape_mismatch",
    "cfg_list",
    "cfg_truncated",
    "cfg_binary",
    "weights_garbage",
    "weights_truncated",
    "weights_symlink_loop",
    "weights_symlink_dir",
    "weights_dangling",
]


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_sae_folder_is_one_error_naming_the_file(good, tmp_path, kind):
    import sae as S

    folder = _damage(kind, good, tmp_path / "bad")
    for load in (S.load_sae, S.from_pretrained):
        with pytest.raises((ValueError, FileNotFoundError)) as err:
            load(folder)
        assert str(folder) in str(err.value) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize("kind", ["cfg_list", "k_string", "weights_garbage", "weights_symlink_loop"])
def test_sae_eval_on_a_damaged_folder_exits_2(good, tmp_path, kind):
    folder = _damage(kind, good, tmp_path / "bad")
    token_store(tmp_path / "store", d=12)
    before = snapshot(tmp_path)
    r = invoke(["sae", "eval", "--sae", folder, "--store", tmp_path / "store", "--out", tmp_path / "m"])
    assert_refused(r, str(folder))
    assert snapshot(tmp_path) == before
