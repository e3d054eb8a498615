"""Unreadable input files are named in a one-line error (issue 17 cause 13)."""

from __future__ import annotations

import os

import pytest
import torch
from safetensors.torch import save_file

from interp.infra.tensor_file import TensorFileError, read_tensors


@pytest.fixture
def files(tmp_path):
    (tmp_path / "random.safetensors").write_bytes(os.urandom(256))
    (tmp_path / "truncated.safetensors").write_bytes(b'\x10\x00\x00\x00\x00\x00\x00\x00{"a":')
    save_file({"acts": torch.ones(5)}, str(tmp_path / "flat.safetensors"))
    save_file({"other": torch.ones(5, 2)}, str(tmp_path / "nokey.safetensors"))
    return tmp_path


@pytest.mark.parametrize(
    "name, match",
    [
        ("random.safetensors", "cannot read"),
        ("truncated.safetensors", "cannot read"),
        ("flat.safetensors", r"shape \[5\]; expected 2 dimensions"),
        ("nokey.safetensors", "no tensor 'acts'"),
    ],
)
def test_bad_files_are_named(files, name, match):
    with pytest.raises(TensorFileError, match=match) as err:
        read_tensors(files / name, what="--acts", need={"acts": 2})
    assert str(files / name) in str(err.value) and "\n" not in str(err.value)


def test_attribution_token_files_name_the_file(files):
    from attribution.jobs import load_tokens

    for name in ("random.safetensors", "nokey.safetensors"):
        with pytest.raises(ValueError, match=name):
            load_tokens(f"tokens:{files / name}", None, 16, 4, 0)


def test_attribution_prepared_state_names_the_file(files):
    from attribution.jobs import _load_prepared

    with pytest.raises(ValueError, match="random.safetensors"):
        _load_prepared(files / "random.safetensors")


def test_dashboard_acts_of_random_bytes_is_one_line(files, tmp_path):
    from typer.testing import CliRunner

    from interp.cli.main import app
    from sae.synthetic import write_store

    write_store(tmp_path / "store", torch.randn(64, 8), rows_per_shard=64)
    r = CliRunner().invoke(
        app,
        [
            "dashboard",
            "--store",
            str(tmp_path / "store"),
            "--acts",
            str(files / "random.safetensors"),
            "--out",
            str(tmp_path / "d.html"),
        ],
    )
    assert r.exit_code == 2 and "random.safetensors" in r.output and "Traceback" not in r.output, r.output
