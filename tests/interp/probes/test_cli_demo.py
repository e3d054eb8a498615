"""The `interp probe` command and the demo step, on a tiny Llama saved as a local HF folder."""

import json

import pytest
import typer
from typer.testing import CliRunner

from interp.cli.probe import register
from interp.data import byte_tokenizer
from tests.tiny import tiny_hf


@pytest.fixture(scope="module")
def app():
    app = typer.Typer()
    register(app)

    @app.command()
    def _unused() -> None:  # a second command keeps typer in multi-command mode
        pass

    return app


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tinyllama") / "tiny"
    hf = tiny_hf("llama", seed=0, num_hidden_layers=3, max_position_embeddings=128)
    hf.config.architectures = ["LlamaForCausalLM"]
    hf.save_pretrained(path)
    byte_tokenizer().save_pretrained(path)
    return str(path)


ARGS = [
    "--n-seq",
    "4",
    "--ctx-len",
    "32",
    "--n-calib",
    "2",
    "--n-eval",
    "2",
    "--gu-len",
    "16",
    "--stream-ctx",
    "64",
    "--stream-window",
    "16",
    "--n-stream",
    "2",
    "--abs-threshold",
    "0.5",
    "--ratio-threshold",
    "5",
]


def test_probe_command_writes_report_and_figures(app, model_dir, tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["probe", "--model", model_dir, "--out", str(out), *ARGS])
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    assert report["headline"]["first_massive_layer"] is not None
    assert set(report["ablations"]) >= {"original", "zero", "mean", "random", "pos0_mean"}
    assert set(report["streaming"]) >= {"full", "window+0sink", "window+4sink"}
    assert (out / "plotly.min.js").stat().st_size > 1_000_000  # plotly.js once, beside the pages ...
    for name in ("layer_profile", "sink_heatmap", "ablations"):
        page = (out / f"{name}.html").read_text()
        assert len(page) < 200_000 and 'src="plotly.min.js"' in page  # ... read by each page
        assert '<script src="http' not in page  # ... never fetched
    # an existing report is not overwritten without --overwrite
    res = CliRunner().invoke(app, ["probe", "--model", model_dir, "--out", str(out), *ARGS])
    assert res.exit_code == 2 and "--overwrite" in res.output


@pytest.mark.parametrize(
    "bad, message",
    [
        (["--abs-threshold", "-1"], ">= 0"),
        (["--eps", "1.5"], "eps"),
        (["--data", "dir:/nonexistent/folder"], "nonexistent"),
    ],
)
def test_probe_command_bad_input_writes_nothing(app, model_dir, tmp_path, bad, message):
    out = tmp_path / "bad"
    res = CliRunner().invoke(app, ["probe", "--model", model_dir, "--out", str(out), *ARGS, *bad])
    assert res.exit_code == 2
    assert message in res.output
    assert not out.exists()


def test_demo_step(tmp_path):
    import interp
    from interp.probes import demo

    model = interp.HookedModel(tiny_hf("llama", seed=0, max_position_embeddings=512), byte_tokenizer())
    out = demo.step(model, tmp_path)
    assert (tmp_path / "probes" / "report.json").exists()
    assert set(out["figures"]) == {"layer_profile", "sink_heatmap", "ablations"}
    assert "sink_fraction" in out
