"""Feature circuits (`interp circuits features`) drawn and exported: `show` and `export` read feature_circuit.json,
and every feature circuit states what its error nodes carry (issue 37)."""

import json

import pytest
from typer.testing import CliRunner

from circuits.cli import app
from circuits.format.circuit_tracer import check_circuit_tracer, to_circuit_tracer
from circuits.format.feature_circuit import from_feature_circuit, load_drawable
from circuits.format.graph_html import page_data

HOOKS = [f"blocks.{i}.hook_resid_post" for i in range(3)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fc")
    r = CliRunner().invoke(app, ["features", "--quick", "--out", str(out), "--sizes", "1,10"])
    assert r.exit_code == 0, r.output
    return out, r.output


def test_features_output_states_the_error_nodes_share(run):
    out, text = run
    d = json.loads((out / "feature_circuit.json").read_text())
    curve = d["curve"]
    assert {"metric", "faithfulness"} <= set(curve["error_only"])
    for p in curve["points"]:
        assert {"faithfulness", "errors_kept", "latents_only"} <= set(p)
    assert curve["error_share"]["error_only"] == curve["error_only"]["faithfulness"]
    assert "Error nodes alone (every latent ablated) recover" in text and "errors ablated" in text
    assert d["split"]["n_eval_rows"] == 8 and "evaluation seed" in d["split"]["split"]


def test_show_and_export_read_a_feature_circuit(run, tmp_path):
    """Both answered 'not a circuit file' for the output of `features`."""
    out, _ = run
    file = str(out / "feature_circuit.json")
    r = CliRunner().invoke(app, ["show", "--circuit", file, "--out-file", str(tmp_path / "g.html")])
    assert r.exit_code == 0, r.output
    assert "62 nodes" in r.output  # 20 per hook (19 latents and the error node, as listed) + embed + logits
    r = CliRunner().invoke(app, ["export", "--circuit", file, "--out", str(tmp_path / "ct")])
    assert r.exit_code == 0, r.output
    g = json.loads((tmp_path / "ct" / "features-eap-quotes.json").read_text())
    check_circuit_tracer(g)
    types = {n["feature_type"] for n in g["nodes"]}
    assert types == {"sae latent", "mlp reconstruction error", "embedding", "logit"}
    errors = [n for n in g["nodes"] if n["feature_type"] == "mlp reconstruction error"]
    assert sorted(n["clerp"] for n in errors) == [f"SAE error at {h} (what the dictionary misses)" for h in HOOKS]
    logit = next(n for n in g["nodes"] if n["feature_type"] == "logit")["node_id"]
    into = [e for e in g["links"] if e["target"] == logit]
    last = {n["node_id"] for n in g["nodes"] if n.get("interp_node", {}).get("hook") == HOOKS[-1]}
    assert len(into) == 20 and {e["source"] for e in into} == last
    assert len({n["feature"] for n in g["nodes"]}) == len(g["nodes"])  # their page drops repeated feature ids


def test_feature_nodes_of_one_layer_stay_apart_and_are_laid_out_by_hook():
    d = {
        "method": "eap",
        "metric": "logit-diff",
        "task": "ioi",
        "model": "m",
        "hooks": ["blocks.1.hook_resid_mid", "blocks.1.hook_resid_post"],
        "nodes": [
            {"hook": "blocks.1.hook_resid_mid", "latent": 3, "score": 0.5, "page": "dash/3.html"},
            {"hook": "blocks.1.hook_resid_mid", "latent": "error", "score": -0.25},
            {"hook": "blocks.1.hook_resid_post", "latent": 3, "score": 2.0},
            {"hook": "blocks.1.hook_resid_post", "latent": "error", "score": 1.0},
        ],
        "edges": [
            {
                "up": {"hook": "blocks.1.hook_resid_mid", "latent": 3},
                "down": {"hook": "blocks.1.hook_resid_post", "latent": 3},
                "score": 0.75,
            }
        ],
        "curve": {"points": [{"n": 2, "faithfulness": 0.9, "latents_only": 0.1}], "error_only": {"faithfulness": 0.6}},
    }
    c = from_feature_circuit(d)
    assert len(c.nodes) == 6 and len({n.key for n in c.nodes}) == 6  # latent 3 at two hooks of layer 1
    assert c.metrics["error_only_faithfulness"] == 0.6 and c.metrics["latents_only_faithfulness"] == 0.1
    data = page_data(c)
    xs = {n["label"]: n["x"] for n in data["nodes"]}
    assert xs["L1 resid_mid #3"] < xs["L1 resid_post #3"]  # the sub-layer stage orders the columns
    assert "error_only_faithfulness 0.6" in data["subtitle"]
    assert {"L1 resid_mid", "L1 resid_post"} <= set(data["xaxis"]["ticktext"])
    g = to_circuit_tracer(c)
    check_circuit_tracer(g)
    assert [e["weight"] for e in g["links"]] == [0.75, 2.0, 1.0]  # the edge, then the last hook's nodes -> logits


def test_anything_else_is_refused_naming_both_file_kinds(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="feature circuit"):
        load_drawable(p)


@pytest.mark.slow
def test_circuit_tracer_frontend_draws_a_feature_circuit(run, tmp_path):
    """Their own page, served locally, in headless Chromium: no JS error, every node drawn."""
    from circuits.experiments.circuit_tracer_frontend import MissingTools, find_tools, render
    from circuits.format.circuit_tracer import write_circuit_tracer_folder

    try:
        find_tools()
    except MissingTools as exc:
        pytest.skip(str(exc))
    out, _ = run
    c = load_drawable(out / "feature_circuit.json")
    write_circuit_tracer_folder(c, tmp_path / "data")
    r = render(tmp_path / "data", tmp_path / "shot.png")
    assert r["errors"] == [] and r["nodes_drawn"] == r["nodes_expected"] == len(c.nodes)
