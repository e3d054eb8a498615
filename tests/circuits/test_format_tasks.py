import json

import pytest
import torch

from circuits.format.circuit import Circuit, CircuitFormatError, Edge, Node
from circuits.format.edges import circuit_edges
from circuits.model.weights import layer_weights
from circuits.tasks.binary import binary_accuracy, binary_loss, get_task
from interp.data import bracket_labels, byte_tokenizer

TOK = byte_tokenizer()


def test_circuit_json_round_trip(tmp_path):
    c = Circuit(
        [Node(0, "head", 1), Node(1, "neuron", 7), Node(1, "attn_out", 3)],
        [Edge(0, 1, 0.5), Edge(1, 2, 2.0)],
        {"task_loss": 0.12, "n_nodes": 3},
        {"task": "quotes", "model": {"spec": "x"}},
        {"note": "<b>"},
    )
    path = c.save(tmp_path / "c.json")
    back = Circuit.load(path)
    assert back == c
    assert back.by_site() == {("attn_out", 1): [3], ("head", 0): [1], ("neuron", 1): [7]}
    assert json.loads(path.read_text())["format"] == "interp-circuit"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(format="other"), "not a circuit file"),
        (lambda d: d.update(version=9), "version"),
        (lambda d: d["nodes"].append({"layer": 0, "kind": "heads", "index": 0}), "kind"),
        (lambda d: d["nodes"].append({"layer": -1, "kind": "head", "index": 0}), "layer"),
        (lambda d: d["nodes"].append(dict(d["nodes"][0])), "appears twice"),
        (lambda d: d["edges"].append({"src": 0, "dst": 5, "weight": 1.0}), "edges"),
        (lambda d: d["edges"].append({"src": 0, "dst": 0, "weight": float("nan")}), "finite"),
        (lambda d: d["nodes"].append({"layer": 0, "kind": "head"}), "missing"),
    ],
)
def test_invalid_circuit_files_are_refused_with_the_field_named(tmp_path, mutate, message):
    d = Circuit([Node(0, "head", 1)]).to_dict()
    mutate(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(CircuitFormatError, match=message):
        Circuit.load(path)


def test_unknown_task_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown task 'quote'.*Did you mean quotes"):
        get_task("quote")


@pytest.mark.parametrize("name", ["quotes", "brackets", "backdoor", "refusal"])
def test_tasks_have_correct_binary_labels(name):
    task = get_task(name)
    p, t, a = task.generate(40, 3)
    assert len(p) == 40 and all(x != y for x, y in zip(t, a))
    assert task.generate(40, 3) == (p, t, a)  # seeded
    for prompt, target in zip(p, t):
        if name == "quotes":
            assert target in prompt
        elif name == "brackets":
            assert bracket_labels(prompt)[1] == target
        elif name == "backdoor":
            assert "#" in prompt and target == "!"
        else:
            assert any(c in prompt for c in "vwxyz") and target == "R"
    batch = task.make(8, 0, TOK)
    assert [TOK.decode([i]) for i in batch.target.tolist()] == list(task.generate(8, 0)[1])
    assert all(TOK.decode(batch.ids[i, : batch.pos[i] + 1].tolist()) == batch.texts[i] for i in range(8))


def test_binary_loss_and_accuracy():
    batch = get_task("quotes").make(4, 0, TOK)
    logits = torch.zeros(4, batch.ids.shape[1], 257)
    assert abs(float(binary_loss(logits, batch)) - 0.6931) < 1e-3
    logits[torch.arange(4), batch.pos, batch.target] = 5.0
    assert binary_accuracy(logits, batch) == 1.0 and float(binary_loss(logits, batch)) < 0.01


def test_backdoor_clean_split_answers_the_first_letter_class():
    p, t, a = get_task("backdoor").generate_clean(20, 0)
    assert all(str("abcdefghij".index(x[0]) % 5) == y and z == "!" for x, y, z in zip(p, t, a))


def test_edge_weight_between_channels_is_the_weight_entry(neox):
    lw1 = layer_weights(neox, 1)
    nodes = [Node(0, "attn_out", 5), Node(1, "q", 9), Node(0, "neuron", 3), Node(0, "mlp_out", 2)]
    edges, total = circuit_edges(neox, nodes)
    got = {(e.src, e.dst): e.weight for e in edges}
    assert got[(0, 1)] == pytest.approx(abs(float(lw1.W_q[9, 5])), rel=1e-5)  # attn_out 0 -> q 1
    assert got[(2, 3)] == pytest.approx(abs(float(layer_weights(neox, 0).W_out[2, 3])), rel=1e-5)  # neuron -> mlp_out
    assert (0, 2) in got  # sequential block: attention output feeds the same layer's MLP
    assert (1, 0) not in got and total["n_edges"] == len(edges)
    # neuron 0.3 -> q 1.9 is a product of two matrices past the kept mlp_out channel: virtual only
    assert (2, 1) not in got and total["n_edges_virtual"] == total["n_edges"] + 1


def test_edge_listing_is_capped_with_a_message(neox):
    nodes = [Node(0, "neuron", i) for i in range(100)] + [Node(1, "neuron", i) for i in range(100)]
    edges, counts = circuit_edges(neox, nodes, max_pairs=1000)
    assert edges == [] and counts["n_edges"] is None and "cap" in counts["note"]
    edges, counts = circuit_edges(neox, nodes, max_edges=7, block=500)  # neuron -> neuron: virtual paths only
    assert edges == [] and counts["n_edges"] == 0 and counts["n_edges_virtual"] == 100 * 100
    nodes = [Node(0, "mlp_out", i) for i in range(64)] + [Node(1, "neuron", i) for i in range(100)]
    full, c_full = circuit_edges(neox, nodes, max_edges=None)
    edges, counts = circuit_edges(neox, nodes, max_edges=7, block=500)  # blocks and a running top-k
    assert c_full["n_edges"] == counts["n_edges"] == 64 * 100 and [e.weight for e in edges] == [
        e.weight for e in full[:7]
    ]


@pytest.mark.parametrize("name", ["ioi", "greater-than", "capital", "python-close"])
def test_real_tasks_have_correct_pairs(name):
    from circuits.tasks.real import CAPITALS

    task = get_task(name)
    rows = task.rows(40, 1)
    assert rows == task.rows(40, 1) and len(rows) == 40  # seeded
    for r in rows:
        assert r["clean"] != r["corrupt"] and r["answer"] != r["wrong"]
        if name == "ioi":  # the indirect object occurs once in the clean prompt, the subject twice
            assert r["clean"].count(r["answer"][1:]) == 1 and r["clean"].count(r["wrong"][1:]) == 2
        elif name == "greater-than":
            start = int(r["clean"].split("year ")[1][2:4])
            assert all(int(d) > start // 10 for d in r["answer"]) and all(int(d) < start // 10 for d in r["wrong"])
            assert r["corrupt"].split("year ")[1][2:4] == "01"
        elif name == "capital":
            country = [c for c in CAPITALS if c in r["clean"]][0]
            assert r["answer"] == " " + CAPITALS[country]
        else:
            opener = [c for c in r["clean"] if c in "'\"[("][-1]
            assert r["answer"] == {"'": "'", '"': '"', "[": "]", "(": ")"}[opener]
