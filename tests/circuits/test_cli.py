import json
import os
import pickle

import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from circuits.cli import app
from circuits.format.circuit import Circuit, Node
from circuits.format.graph_html import write_html
from circuits.model.checkpoint import CheckpointError, load_checkpoint
from tests.circuits.conftest import make_model

runner = CliRunner()


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt")
    model = make_model("gpt_neox_seq")
    model.hf_model.save_pretrained(folder)
    return folder, model


def test_extract_ablate_show_end_to_end(ckpt, tmp_path):
    folder, _ = ckpt
    out = tmp_path / "c.json"
    r = runner.invoke(
        app,
        [
            "extract",
            "--checkpoint",
            str(folder),
            "--task",
            "quotes",
            "--method",
            "prune",
            "--out",
            str(out),
            "--steps",
            "3",
            "--lambda-steps",
            "1",
            "--target-loss",
            "5",
            "--min-accuracy",
            "0",
        ],
    )
    assert r.exit_code == 0, r.output
    c = Circuit.load(out)
    assert c.provenance["method"] == "prune" and c.provenance["task"] == "quotes" and c.metrics["reached_target"]
    r = runner.invoke(
        app, ["ablate", "--circuit", str(out), "--checkpoint", str(folder), "--n", "16", "--n-random", "2"]
    )
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert {"original", "necessity", "sufficiency", "random_necessity", "random_sufficiency"} <= set(report)
    assert report["n_nodes"] == len(c.nodes) and report["ablation"] == "mean"  # the ablation the circuit was found with
    assert len(report["random_necessity"]["runs"]) == 2 and "metric_quantiles" in report["random_necessity"]
    r = runner.invoke(app, ["show", str(out), "--out-file", str(tmp_path / "g.html")])
    assert r.exit_code == 0 and 'src="plotly.min.js"' in (tmp_path / "g.html").read_text()
    assert (tmp_path / "plotly.min.js").stat().st_size > 1_000_000  # plotly.js beside the page, offline


def test_extract_safeseek_from_a_safetensors_file(ckpt, tmp_path):
    folder, model = ckpt
    single = tmp_path / "single"
    single.mkdir()
    (single / "config.json").write_text((folder / "config.json").read_text())
    save_file({k: v.contiguous() for k, v in model.hf_model.state_dict().items()}, str(single / "w.safetensors"))
    out = tmp_path / "s.json"
    r = runner.invoke(
        app,
        [
            "extract",
            "--checkpoint",
            str(single / "w.safetensors"),
            "--task",
            "backdoor",
            "--method",
            "safeseek",
            "--out",
            str(out),
            "--steps",
            "2",
            "--min-accuracy",
            "0",
        ],
    )
    assert r.exit_code == 0, r.output
    m = Circuit.load(out).metrics
    assert (
        m["objective"] == "backdoor" and m["h_circuit_nodes"] is None and m["forwards_per_step"] == 2
    )  # head code: no H
    assert any("short run" in w for w in m["warnings"])
    loaded = load_checkpoint(single / "w.safetensors")
    ids = torch.tensor([[1, 2, 3, 4]])
    assert torch.equal(loaded(ids), model(ids))


def test_unknown_task_is_refused_before_loading_and_writes_nothing(ckpt, tmp_path):
    out = tmp_path / "c.json"
    r = runner.invoke(app, ["extract", "--checkpoint", str(ckpt[0]), "--task", "quote", "--out", str(out)])
    assert r.exit_code == 2 and "unknown task 'quote'" in r.output and "quotes" in r.output
    assert not out.exists()


def test_unsupported_architecture_is_a_clear_error(tmp_path):
    from transformers import BertConfig

    BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    ).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match="'bert' model.*supported model types: .*gpt_neox"):
        load_checkpoint(tmp_path)
    r = runner.invoke(
        app, ["extract", "--checkpoint", str(tmp_path), "--task", "quotes", "--out", str(tmp_path / "c.json")]
    )
    assert r.exit_code == 2 and "bert" in r.output and not (tmp_path / "c.json").exists()


def test_unreachable_target_saves_the_best_circuit_and_says_so(ckpt, tmp_path):
    out = tmp_path / "c.json"
    r = runner.invoke(
        app,
        [
            "extract",
            "--checkpoint",
            str(ckpt[0]),
            "--task",
            "quotes",
            "--method",
            "prune",
            "--out",
            str(out),
            "--steps",
            "2",
            "--lambda-steps",
            "1",
            "--target-loss",
            "0.0001",
            "--min-accuracy",
            "0",
        ],
    )
    assert r.exit_code == 2 and "no circuit reached task loss 0.0001" in r.output and "saved in" in r.output
    assert "Raise --target-loss above" in r.output
    assert Circuit.load(out).metrics["reached_target"] is False


class Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_pickle_checkpoint_never_runs(ckpt, tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "config.json").write_text((ckpt[0] / "config.json").read_text())
    bad = tmp_path / "model.pt"
    bad.write_bytes(pickle.dumps({"w": Exploit(marker)}))
    with pytest.raises(CheckpointError, match="refusing to unpickle"):
        load_checkpoint(bad)
    with pytest.raises(CheckpointError, match="weights_only=True"):
        load_checkpoint(bad, allow_torch_load=True)
    r = runner.invoke(
        app,
        [
            "extract",
            "--checkpoint",
            str(bad),
            "--task",
            "quotes",
            "--out",
            str(tmp_path / "c.json"),
            "--allow-torch-load",
        ],
    )
    assert r.exit_code == 2
    assert not marker.exists()


def test_a_plain_state_dict_pickle_loads_with_weights_only(ckpt, tmp_path):
    folder, model = ckpt
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    torch.save(model.hf_model.state_dict(), tmp_path / "model.pt")
    loaded = load_checkpoint(tmp_path / "model.pt", allow_torch_load=True)
    ids = torch.tensor([[5, 6, 7]])
    assert torch.equal(loaded(ids), model(ids))


def test_graph_html_escapes_labels(tmp_path):
    c = Circuit(
        [Node(0, "head", 1), Node(1, "neuron", 3)],
        [],
        {"n_nodes": 2},
        {"model": {"spec": "<script>alert(1)</script>"}, "task": "<img src=x onerror=alert(2)>", "method": "prune"},
    )
    page = write_html(c, tmp_path / "g.html").read_text()
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)" in page and "&lt;img src=x" in page


def test_eap_from_a_prompts_file_on_a_run_step_then_export(ckpt, tmp_path):
    folder, model = ckpt
    run = tmp_path / "run"
    model.hf_model.save_pretrained(run / "step_5")
    rows = tmp_path / "pairs.jsonl"
    rows.write_text(
        "\n".join(
            json.dumps({"clean": f"x = '{w}", "corrupt": f'x = "{w}', "answer": "'", "wrong": '"'})
            for w in ("ab", "cd", "ef", "gh")
        )
    )
    out = tmp_path / "eap"
    r = runner.invoke(
        app,
        [
            "extract",
            "--model",
            f"{run}@5",
            "--task",
            f"prompts:{rows}",
            "--method",
            "eap-ig",
            "--ig-steps",
            "2",
            "--top",
            "12",
            "--out",
            str(out),
            "--min-accuracy",
            "0",
            "--device",
            "cpu",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "baseline:" in r.output  # reported before the search
    c = Circuit.load(out / "circuit.json")
    assert len(c.edges) == 12 and c.provenance["ablation"] == "corrupt" and c.provenance["model_spec"] == f"{run}@5"
    assert (
        c.metrics["faithfulness"] == c.metrics["faithfulness"]
        and len(c.extra["edge_scores"]) == c.metrics["n_edges_graph"]
    )
    r = runner.invoke(
        app, ["ablate", "--circuit", str(out / "circuit.json"), "--model", f"{run}@5", "--n", "4", "--n-random", "2"]
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["n_edges"] == 12 and len(rep["random_sufficiency"]["runs"]) == 2
    r = runner.invoke(app, ["export", str(out / "circuit.json"), "--out-file", str(tmp_path / "ct.json")])
    assert r.exit_code == 0, r.output
    assert len(json.loads((tmp_path / "ct.json").read_text())["links"]) == 12


def test_a_task_the_model_cannot_do_is_refused_with_its_number_and_nothing_written(ckpt, tmp_path):
    out = tmp_path / "c"
    r = runner.invoke(
        app, ["extract", "--model", str(ckpt[0]), "--task", "brackets", "--method", "prune", "--out", str(out)]
    )
    assert r.exit_code == 2 and "cannot do task 'brackets'" in r.output and "accuracy 0." in r.output
    assert not out.exists()
    rows = tmp_path / "bad.jsonl"
    rows.write_text('{"clean": "abc", "corrupt": "abcdef", "answer": "x", "wrong": "y"}\n')
    r = runner.invoke(
        app, ["extract", "--model", str(ckpt[0]), "--task", f"prompts:{rows}", "--method", "eap", "--out", str(out)]
    )
    assert r.exit_code == 2 and "row 0: the clean prompt has" in r.output and not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_curve_quick_refuses_cuda_without_cuda(tmp_path):
    r = CliRunner().invoke(app, ["curve", "--out", str(tmp_path / "c"), "--quick", "--device", "cuda"])
    assert r.exit_code == 2 and "without CUDA" in r.output and not (tmp_path / "c").exists(), r.output


def test_graph_pages_share_one_plotly_js_per_folder(tmp_path):
    c = Circuit([Node(0, "head", 1), Node(1, "neuron", 3)], [], {"n_nodes": 2}, {"task": "t", "method": "prune"})
    pages = [write_html(c, tmp_path / f"g{i}.html").read_text() for i in range(2)]
    assert (tmp_path / "plotly.min.js").stat().st_size > 1_000_000  # once, beside the pages
    assert all(len(p) < 200_000 and 'src="plotly.min.js"' in p for p in pages)
