"""`interp dashboard` (registered by interp.cli.dashboard) on a store's channels."""

import json

import torch
import typer
from typer.testing import CliRunner

from interp.cli.dashboard import register
from interp.store import ActivationStore, StoreMeta, write_shard_file


def _store(path):
    meta = StoreMeta(
        model="not-a-model", model_sha256="-", hooks={"h": [6]}, dtype="float32", tokenizer="-", ctx_len=8, data={}
    )
    st = ActivationStore.open_or_create(path, meta, n_shards_planned=1)
    n = 64
    x = torch.randn(n, 6, generator=torch.Generator().manual_seed(0))
    x[::8] *= 100  # position 0: a massive-activation row, as in real models
    st.commit_shard(
        write_shard_file(
            st.path,
            0,
            {
                "h": x,
                "tokens": torch.arange(n, dtype=torch.int32),
                "seq": torch.arange(n) // 8,
                "pos": (torch.arange(n) % 8).int(),
            },
        )
    )
    return st, x


def _app():
    app = typer.Typer()
    register(app)

    @app.command()
    def other() -> None:  # a second command keeps typer in multi-command mode
        pass

    return app


def test_dashboard_command_on_hook_channels(tmp_path):
    _, x = _store(tmp_path / "store")
    runner, app = CliRunner(), _app()
    out = tmp_path / "d"
    r = runner.invoke(
        app, ["dashboard", "--store", str(tmp_path / "store"), "--hook", "h", "--out", str(out), "--features", "1,3"]
    )
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "dashboard.json").read_text())
    assert summary["pages"] == [1, 3] and summary["header"]["rows rule"].startswith("positions:0")
    rec = json.loads((out / "features" / "1.json").read_text())
    kept = x[torch.arange(64) % 8 != 0, 1]
    assert rec["n_rows"] == 56 and rec["signed"] and rec["min"] == float(kept.min())  # not clamped, sink rows out
    assert rec["count"] == int((kept > 0).sum())
    assert (
        "[7]" in (out / "index.html").read_text() or "[7]" in (out / "features" / "1.html").read_text()
    )  # ids without a tokenizer
    r = runner.invoke(app, ["dashboard", "--store", str(tmp_path / "store"), "--hook", "h", "--out", str(out)])
    assert r.exit_code == 2 and "--overwrite" in r.output
    r = runner.invoke(
        app,
        [
            "dashboard",
            "--store",
            str(tmp_path / "store"),
            "--hook",
            "h",
            "--out",
            str(out),
            "--overwrite",
            "--exclude",
            "none",
            "--top",
            "2",
            "--order",
            "max",
        ],
    )
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "dashboard.json").read_text())
    assert summary["header"]["rows rule"] == "none" and len(summary["pages"]) == 2
    assert sorted(p.name for p in (out / "features").glob("*.html")) == sorted(f"{f}.html" for f in summary["pages"])


def test_clear_errors_write_nothing(tmp_path):
    _store(tmp_path / "store")
    runner, app = CliRunner(), _app()
    cases = [
        (["--hook", "h", "--features", "2,6"], "--features 6 out of range: there are 6 features"),
        (["--hook", "h", "--features", "a,b"], "comma-separated integers"),
        (["--hook", "h", "--order", "best"], "--order must be one of"),
        (["--hook", "h", "--exclude", "sinks"], "bad row rule"),
        ([], "exactly one of --hook"),
    ]
    for args, msg in cases:
        r = runner.invoke(app, ["dashboard", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "e"), *args])
        assert r.exit_code == 2 and msg in r.output, (args, r.output)
        assert not (tmp_path / "e").exists()


def test_text_view_lists_dense_channels_last(tmp_path):
    """`interp dashboard --text`: a channel that fires on every store row is dense and goes after all the
    others, even when it is the one most active on the text (it used to be listed among the first)."""
    import re

    import interp
    from interp.dashboards.text import hook_activations
    from tests.tiny import tiny_hf

    hook, text = "blocks.0.hook_resid_post", "The cat sat on the mat."
    tiny_hf("llama").save_pretrained(tmp_path / "m")
    _, x, _ = hook_activations(interp.load_model(str(tmp_path / "m")), hook, text)
    c = int(x[1:].max(0).values.argmax())  # the channel most active on the text (position 0 is a special row)
    g = torch.Generator().manual_seed(0)
    n = 256
    rows = 0.3 * torch.randn(n, 64, generator=g) - 1  # every other channel fires on a few rows only
    rows[:, c] = 1 + torch.rand(n, generator=g)  # channel c fires on every row: dense
    meta = StoreMeta(
        model=str(tmp_path / "m"),
        model_sha256="-",
        hooks={hook: [64]},
        dtype="float32",
        tokenizer="-",
        ctx_len=8,
        data={},
    )
    st = ActivationStore.open_or_create(tmp_path / "store", meta, n_shards_planned=1)
    idx = {"tokens": torch.randint(0, 256, (n,), generator=g, dtype=torch.int32), "seq": torch.arange(n) // 8}
    st.commit_shard(write_shard_file(st.path, 0, {hook: rows, **idx, "pos": (torch.arange(n) % 8).int()}))
    out = tmp_path / "d"
    args = ["dashboard", "--store", str(tmp_path / "store"), "--hook", hook, "--out", str(out), "--text", text]
    r = CliRunner().invoke(_app(), args + ["--exclude", "none", "--top", "3"])
    assert r.exit_code == 0, r.output
    page = (out / "text.html").read_text()
    listed = [int(f) for f in re.findall(r'<tr><td>(?:<a href="[^"]*">)?(\d+)(?:</a>)?</td>', page)]
    assert len(listed) == 12 and c not in listed  # 12 non-dense channels fire on the text and come first
    assert json.loads((out / "dashboard.json").read_text())["header"]["dense (> 10%)"].startswith("1 ")
