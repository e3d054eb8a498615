"""`sae eval`, `sae dashboard` and `dashboard` read through the verified path: a flipped byte, a foreign
shard or two swapped shards stop them with one line naming the shard, and nothing is written (cause 1)."""

from __future__ import annotations

import shutil

import pytest
import torch
from typer.testing import CliRunner

from interp.cli.main import app as interp_app
from sae.cli import app as sae_app
from sae.synthetic import write_store
from sae.train import TrainConfig, train_sae

runner = CliRunner()


def _rows(n=1536, d=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.relu(torch.randn(n, 20, generator=g)) @ torch.randn(20, d, generator=g)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("readers")
    store = write_store(root / "store", _rows(), rows_per_shard=512)
    write_store(root / "foreign", _rows(seed=1), rows_per_shard=512)
    train_sae(
        store, TrainConfig(arch="topk", d_sae=16, k=2, total_tokens=512, batch_size=256), root / "sae", progress=False
    )
    return root


def _flip(store, root):
    p = store / "shard_00001.safetensors"
    data = bytearray(p.read_bytes())
    data[-2] ^= 0x01
    p.write_bytes(bytes(data))


def _foreign(store, root):
    shutil.copy(root / "foreign" / "shard_00001.safetensors", store / "shard_00001.safetensors")


def _swap(store, root):
    a, b, t = store / "shard_00000.safetensors", store / "shard_00001.safetensors", store / "t"
    a.rename(t), b.rename(a), t.rename(b)


COMMANDS = {
    "sae eval": lambda root, st, out: (
        sae_app,
        ["eval", "--sae", str(root / "sae"), "--store", str(st), "--out", str(out)],
    ),
    "sae dashboard": lambda root, st, out: (
        sae_app,
        ["dashboard", "--sae", str(root / "sae"), "--store", str(st), "--out", str(out), "--top", "2"],
    ),
    "dashboard": lambda root, st, out: (
        interp_app,
        ["dashboard", "--store", str(st), "--hook", "synthetic.hook_x", "--out", str(out), "--top", "2"],
    ),
}


@pytest.mark.parametrize("damage", [_flip, _foreign, _swap], ids=["flipped-byte", "foreign-shard", "swapped-shards"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_damaged_store_stops_the_reader_with_one_line(trained, tmp_path, command, damage):
    st = tmp_path / "store"
    shutil.copytree(trained / "store", st)
    damage(st, trained)
    out = tmp_path / "out"
    app, args = COMMANDS[command](trained, st, out)
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    assert "error:" in r.output and "shard_0000" in r.output and "Traceback" not in r.output, r.output
    assert not out.exists()
