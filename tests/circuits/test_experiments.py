"""Every experiment of circuits/README.md runs in its --quick form, and the curve command's --quick runs too."""

import json
import sys

import pytest
import torch
from typer.testing import CliRunner

from circuits.cli import app
from circuits.evaluation.faithfulness import random_connected_masks, random_masks
from circuits.finders.prune import PruneConfig, TargetNotReached, prune
from circuits.model.residual_graph import EdgeGraph
from circuits.tasks.binary import get_task
from tests.circuits.conftest import make_model


def _main(monkeypatch, module, args):
    monkeypatch.setattr(sys, "argv", [module.__name__, *args])
    module.main()


@pytest.mark.slow
def test_sparse_vs_dense_quick_runs_and_reports_every_circuit(monkeypatch, tmp_path):
    from circuits.experiments import sparse_vs_dense

    _main(monkeypatch, sparse_vs_dense, ["--quick", "--out", str(tmp_path)])
    res = json.loads((tmp_path / "results.json").read_text())
    for name in ("dense", "sparse", "random_sparse"):
        assert {"necessity_loss", "n_nodes", "n_edges", "reached_target"} <= set(res[name]["circuit"])


@pytest.mark.slow
def test_backdoor_quick_runs(monkeypatch, tmp_path):
    from circuits.experiments import backdoor

    _main(monkeypatch, backdoor, ["--quick", "--out", str(tmp_path)])
    assert (tmp_path / "results.json").exists()


@pytest.mark.slow
def test_smollm2_faithfulness_quick_runs_on_a_tiny_model(monkeypatch, tmp_path):
    from circuits.experiments import smollm2_faithfulness

    _main(monkeypatch, smollm2_faithfulness, ["--quick", "--out", str(tmp_path)])
    res = json.loads((tmp_path / "results.json").read_text())
    assert set(res["tasks"]["quotes"]["curves"]) == {"eap", "eap-ig", "safeseek", "prune"}
    assert (tmp_path / "curves.html").exists()


def test_prune_early_exit_has_the_searched_circuits_keys():
    model = make_model("gpt_neox_seq")
    with pytest.raises(TargetNotReached) as exc:
        prune(model, get_task("quotes"), PruneConfig(target_loss=1e-6, steps=1, n_train=8, n_eval=8), progress=False)
    m = exc.value.best.metrics
    assert {"necessity_loss", "sufficiency_loss", "lambda", "lambda_history", "task_loss", "n_edges"} <= set(m)
    assert m["reached_target"] is False and m["lambda"] is None


def test_random_connected_circuits_join_the_input_to_the_logits():
    graph = EdgeGraph(n_layers=3, n_heads=4, n_kv=2, parallel=False)
    for mask in random_connected_masks(graph, 25, draws=5, seed=1):
        assert int(mask.sum()) == 25 and not (mask & ~graph.valid).any()
        assert mask[0].any() and mask[:, graph.logits_down].any()  # leaves the input, reaches the logits
    # plain random edges of that size rarely touch both ends; connected ones always do
    assert all(int(m.sum()) == 25 for m in random_masks(graph, 25, 3, seed=1))
    assert not torch.equal(
        random_connected_masks(graph, 25, 1, seed=1)[0], random_connected_masks(graph, 25, 1, seed=2)[0]
    )


@pytest.mark.parametrize("method", ["eap", "prune"])
def test_curve_quick_writes_a_table_a_plot_and_intervals(tmp_path, method):
    r = CliRunner().invoke(app, ["curve", "--quick", "--method", method, "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    curve = json.loads((tmp_path / "curve.json").read_text())
    series = {p["series"] for p in curve["points"]}
    assert series == {method, "random", "random-connected"}
    for p in curve["points"]:
        assert p["faithfulness_ci"][0] <= p["faithfulness_ci"][1] and p["complement_ci"][0] <= p["complement_ci"][1]
        assert len(p["per_seed"] if p["series"] == method else p["per_draw"]) == 2  # seeds; control draws
    assert (tmp_path / "curve.md").read_text().startswith("| series |")
    assert "plotly" in (tmp_path / "curve.html").read_text()[:200_000].lower()


def test_curve_whole_graph_recovers_the_metric_exactly():
    """At the full graph's size the method's circuit is the whole model: faithfulness 1, complement 0."""
    from circuits.evaluation.curve import CurveConfig, faithfulness_curve

    model = make_model("gpt_neox_seq")
    graph = EdgeGraph.of(model)
    curve = faithfulness_curve(
        model,
        get_task("quotes"),
        CurveConfig(method="eap", sizes=(graph.n_edges,), seeds=1, n_prompts=4, n_eval=4, n_boot=20),
    )
    p = next(p for p in curve["points"] if p["series"] == "eap")
    assert abs(p["faithfulness"] - 1) < 1e-5 and abs(p["complement"]) < 1e-5


def test_graph_scores_quick(tmp_path):
    """The graph table's script end to end on the tiny model: every prompt scored, the induction rank and the
    ablations reported."""
    from circuits.experiments import graph_scores

    graph_scores.main(["--quick", "--out", str(tmp_path)])
    d = json.loads((tmp_path / "scores.json").read_text())
    assert [r["task"] for r in d["rows"]] == ["ioi", "agreement", "capital", "induction"]
    assert all(0 <= r["replacement"] <= 1 and 0 <= r["completeness"] <= 1 for r in d["rows"])
    assert d["rows"][-1]["copied_token_rank"] >= 1
    assert len(d["rows"][2]["interventions"]["ablations"]) == 3
