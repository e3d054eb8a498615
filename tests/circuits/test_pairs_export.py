"""Prompt files, metrics, baselines, the circuit-tracer export and the graph page, on tiny models."""

import json

import pytest
import torch

import interp
from circuits.evaluation.baseline import TaskTooHard, baseline, require_ability
from circuits.finders.eap import eap
from circuits.format.circuit import Circuit, Edge, Node
from circuits.format.circuit_tracer import (
    check_circuit_tracer,
    from_circuit_tracer,
    to_circuit_tracer,
    write_circuit_tracer,
)
from circuits.format.graph_html import page_data, to_html
from circuits.tasks.binary import get_task
from circuits.tasks.metrics import metric_rows
from circuits.tasks.pairs import PairError, encode_pairs, read_prompt_file
from interp.data import byte_tokenizer
from tests.tiny import tiny_hf

TOK = byte_tokenizer()


def test_prompt_rows_that_must_align_are_refused_with_the_row_and_counts():
    rows = [
        {"clean": "abc", "corrupt": "abd", "answer": "x", "wrong": "y"},
        {"clean": "abcd", "corrupt": "ab", "answer": "x", "wrong": "y"},
    ]
    with pytest.raises(PairError, match=r"row 1: the clean prompt has \d+ tokens and the corrupted one \d+"):
        encode_pairs(TOK, rows, align=True)
    b = encode_pairs(TOK, rows, align=False)  # padded independently where alignment is not needed
    assert not b.aligned and b.clean_pos.tolist() != b.corrupt_pos.tolist()
    assert b.clean_mask.sum(1).tolist() == [len(TOK("abc")["input_ids"]), len(TOK("abcd")["input_ids"])]


def test_rows_of_different_lengths_align_row_by_row_and_are_padded():
    rows = [
        {"clean": "ab", "corrupt": "ac", "answer": "x", "wrong": "y"},
        {"clean": "abcdef", "corrupt": "abcdeg", "answer": ["x", "z"], "wrong": "y"},
    ]
    b = encode_pairs(TOK, rows, align=True)
    assert b.aligned and b.clean.shape == b.corrupt.shape and torch.equal(b.clean_pos, b.corrupt_pos)
    assert b.answer_w.tolist() == [[1.0, 0.0], [1.0, 1.0]]
    logits = torch.zeros(2, b.clean.shape[1], 257)
    logits[1, b.clean_pos[1], b.answers[1, 1]] = 4.0  # "z" up by 4: mean of the answer set up by 2
    assert metric_rows(logits, b, "logit-diff").tolist() == [0.0, 2.0]
    assert metric_rows(logits, b, "kl", ref=logits[torch.arange(2), b.clean_pos]).abs().max() < 1e-6


def test_prompt_file_forms_and_errors(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "hello", "answer": " w"}\n\n{"prompt": "abc", "answer": "d"}\n')
    rows = read_prompt_file(f)
    b = encode_pairs(TOK, rows, align=False)
    assert b.corrupt is None and not b.has_wrong
    task = get_task(f"prompts:{f}")
    assert task.default_metric == "prob" and len(task.rows(10, 0)) == 2
    with pytest.raises(PairError, match='no "corrupt"'):
        encode_pairs(TOK, rows, align=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"clean": "a", "answer": "b"}\n{"clean": "a", "answr": "b"}\n')
    with pytest.raises(PairError, match=r"bad.jsonl:2: unknown field"):
        read_prompt_file(bad)
    bad.write_text('{"clean": "a", "answer": "b"\n')
    with pytest.raises(PairError, match=r"bad.jsonl:1 is not valid JSON"):
        read_prompt_file(bad)
    with pytest.raises(FileNotFoundError):
        get_task(f"prompts:{tmp_path / 'none.jsonl'}")


def test_baseline_refuses_a_task_the_model_cannot_do_with_its_number():
    model = interp.HookedModel(tiny_hf("llama"), TOK)
    batch = encode_pairs(TOK, [{"clean": f"ab{c}", "corrupt": f"ax{c}", "answer": "q", "wrong": "r"} for c in "cdefgh"])
    rep = baseline(model, batch)
    assert set(rep) >= {"clean_metric", "clean_accuracy", "corrupt_metric"}
    with pytest.raises(TaskTooHard, match=r"accuracy 0\.\d\d < 1\.01|accuracy .* < "):
        require_ability(rep, "toy", min_accuracy=1.01 if rep["clean_accuracy"] >= 1 else 0.99)


def _edge_circuit():
    model = interp.HookedModel(tiny_hf("llama"), TOK)
    batch = encode_pairs(TOK, [{"clean": f"ab{c}d", "corrupt": f"ax{c}d", "answer": "q", "wrong": "r"} for c in "cdef"])
    return eap(model, batch).to_circuit(top_n=25, provenance={"task": "<b>toy</b>"})


def test_circuit_tracer_export_round_trip(tmp_path):
    c = _edge_circuit()
    path = write_circuit_tracer(c, tmp_path / "g.json")
    d = json.loads(path.read_text())
    check_circuit_tracer(d)
    kinds = {n["feature_type"] for n in d["nodes"]}
    assert kinds <= {"embedding", "attention head", "key/value head", "mlp", "logit"} and "logit" in kinds
    back = from_circuit_tracer(d)
    assert back.nodes == c.nodes and back.edges == c.edges
    broken = dict(d, links=d["links"] + [{"source": "nope", "target": d["nodes"][0]["node_id"], "weight": 1.0}])
    with pytest.raises(ValueError, match="not a node_id"):
        check_circuit_tracer(broken)
    with pytest.raises(ValueError, match="missing field 'slug'"):
        check_circuit_tracer(dict(d, metadata={}))
    units = Circuit([Node(0, "neuron", 3), Node(1, "q", 5)], [Edge(0, 1, 0.5)])
    check_circuit_tracer(to_circuit_tracer(units))


def test_graph_page_has_labels_colour_bar_controls_and_escapes_text():
    c = _edge_circuit()
    data = page_data(c)
    assert {n["label"] for n in data["nodes"]} >= {"embed", "logits"}
    assert all(abs(a[2]) >= abs(b[2]) for a, b in zip(data["edges"], data["edges"][1:]))  # by |score|
    page = to_html(c, include_plotlyjs=False)
    assert 'id="topk"' in page and "colorbar" in page and "plotly_click" in page
    assert "<b>toy</b>" not in page and "&lt;b&gt;toy" in page.replace("\\u0026", "&")
    assert "<iframe" in c._repr_html_()


def test_circuit_tracer_data_folder_meets_what_their_page_assumes(tmp_path):
    """graph-metadata.json + <slug>.json, a file-name-safe slug from a prompt-file task, the logit clerp their JS
    parses, numbers in influence and activation, ctx_idx inside prompt_tokens, honest feature types."""
    import json as _json

    from circuits.format.circuit_tracer import write_circuit_tracer_folder

    c = _edge_circuit()
    c.provenance.update({"task": "prompts:/some/dir/my pairs.jsonl", "method": "eap"})
    c.metrics["baseline"] = {"clean_answer_prob": 0.4321}
    path = write_circuit_tracer_folder(c, tmp_path)
    assert path.name == "eap-prompts-my-pairs.json"
    index = _json.loads((tmp_path / "graph-metadata.json").read_text())
    assert [g["slug"] for g in index["graphs"]] == ["eap-prompts-my-pairs"]
    d = _json.loads(path.read_text())
    logit = next(n for n in d["nodes"] if n["feature_type"] == "logit")
    assert float(logit["clerp"].split("(p=")[1].split(")")[0]) == 0.432
    types = {n["feature_type"] for n in d["nodes"]}
    assert "cross layer transcoder" not in types and "attention head" in types
    assert all(
        isinstance(n["influence"], float) and 0 < n["influence"] <= 1
        for n in d["nodes"]
        if n["feature_type"] != "logit"
    )
    write_circuit_tracer_folder(c, tmp_path)  # a second export of the same slug replaces its entry
    assert len(_json.loads((tmp_path / "graph-metadata.json").read_text())["graphs"]) == 1


@pytest.mark.slow
def test_circuit_tracer_frontend_draws_our_export(tmp_path):
    """Their own page (circuit-tracer 0.5), served locally, in headless Chromium: no JS error, every node drawn."""
    from circuits.experiments.circuit_tracer_frontend import MissingTools, find_tools, render
    from circuits.format.circuit_tracer import write_circuit_tracer_folder

    try:
        find_tools()
    except MissingTools as exc:
        pytest.skip(str(exc))
    c = _edge_circuit()
    write_circuit_tracer_folder(c, tmp_path / "data")
    r = render(tmp_path / "data", tmp_path / "shot.png")
    assert r["errors"] == [] and r["nodes_drawn"] == r["nodes_expected"] == len(c.nodes)
    assert (tmp_path / "shot.png").stat().st_size > 10_000


def test_graph_page_draws_node_only_circuits_and_short_titles():
    units = Circuit(
        [Node(0, "head", 1), Node(1, "neuron", 3)],
        [],
        provenance={"method": "safeseek", "task": "prompts:/a/long/dir/pairs.jsonl"},
        extra={"node_scores": {"head_0": [0.5, -1.25], "neuron_1": [0.0, 0.0, 0.0, 2.0]}},
    )
    d = page_data(units)
    assert d["all_nodes"] and [n["value"] for n in d["nodes"]] == [-1.25, 2.0]
    assert "prompts:pairs.jsonl" in d["title"] and "/a/long" not in d["title"]
    page = to_html(units)
    assert "arrowhead" in page and "D.all_nodes" in page
    assert d["xaxis"]["ticktext"] == ["L0 attn", "L1 MLP"]  # columns named, not a bare number axis
    assert '<span style="">a node circuit' in page and '<span style="display:none">\n <label>top edges' in page
    crowded = Circuit([Node(0, "neuron", i) for i in range(20)] + [Node(1, "head", 0)], [], provenance={})
    shown = [n["show_label"] for n in page_data(crowded)["nodes"]]
    assert shown == [False] * 20 + [True]  # a crowded column names its nodes on hover only
    edge = _edge_circuit()
    assert not page_data(edge)["all_nodes"]  # an edge circuit shows the nodes its visible edges touch
