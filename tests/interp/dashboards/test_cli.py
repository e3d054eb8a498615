"""`interp dashboard` (registered by interp.cli.dashboard) on a store's channels."""

import torch
import typer
from typer.testing import CliRunner

from interp.cli.dashboard import register
from interp.store import ActivationStore, StoreMeta, write_shard_file


def _store(path):
    meta = StoreMeta(model="not-a-model", model_sha256="-", hooks={"h": [6]}, dtype="float32", tokenizer="-", ctx_len=8, data={})
    st = ActivationStore.open_or_create(path, meta, n_shards_planned=1)
    n = 64
    st.commit_shard(write_shard_file(st.path, 0, {"h": torch.randn(n, 6, generator=torch.Generator().manual_seed(0)),
                                                  "tokens": torch.arange(n, dtype=torch.int32), "seq": torch.arange(n) // 8,
                                                  "pos": (torch.arange(n) % 8).int()}))
    return st


def test_dashboard_command_on_hook_channels(tmp_path):
    app = typer.Typer()
    register(app)

    @app.command()
    def other() -> None:  # a second command keeps typer in multi-command mode
        pass

    _store(tmp_path / "store")
    runner = CliRunner()
    r = runner.invoke(app, ["dashboard", "--store", str(tmp_path / "store"), "--hook", "h", "--out", str(tmp_path / "d.html")])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "d.html").read_text()
    assert "feature 0" in page and "[7]" in page  # token ids shown when no tokenizer loads
    r = runner.invoke(app, ["dashboard", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "e.html")])
    assert r.exit_code == 2 and "exactly one of --hook" in r.output
