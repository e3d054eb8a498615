"""Position-resolved EAP / EAP-IG: sums to the summed graph, matches per-position edge patching, exports positions."""

import json

import pytest
import torch
from typer.testing import CliRunner

import interp
from circuits.cli import app
from circuits.evaluation.edge_patching import patched_metric
from circuits.finders.eap import eap, eap_ig, scores_from_circuit, summed_scores
from circuits.finders.eap_positions import position_mask
from circuits.format.circuit import Circuit
from circuits.format.circuit_tracer import check_circuit_tracer, from_circuit_tracer, to_circuit_tracer
from circuits.format.edge_circuit import circuit_mask
from circuits.format.graph_html import page_data, to_html
from circuits.tasks.pairs import PairBatch
from interp.data import byte_tokenizer
from tests.circuits.test_eap import linear_toy, near_pairs, pairs
from tests.tiny import tiny_hf


def llama():
    return interp.HookedModel(tiny_hf("llama", tie_word_embeddings=False), byte_tokenizer())


def one_position_edge_effects(model, batch, graph, triples, cache=None):
    """Exact metric change when each (pos, up, down) edge alone is patched from the corrupted run at that position."""
    P = batch.clean.shape[1]
    full = graph.valid[None].expand(P, -1, -1).clone()
    base = patched_metric(model, batch, full, "logit-diff", "corrupt", graph=graph, cache=cache)["metric"].mean()
    out = []
    for p, u, d in triples:
        keep = full.clone()
        keep[p, u, d] = False
        m = patched_metric(model, batch, keep, "logit-diff", "corrupt", graph=graph, cache=cache)["metric"].mean()
        out.append(float(m - base))
    return torch.tensor(out)


@pytest.mark.parametrize("method", ["eap", "eap-ig"])
def test_position_scores_sum_over_positions_to_the_summed_graph(method):
    model, batch = llama(), pairs(n=5, length=6, seed=2)
    run = (
        (lambda **kw: eap(model, batch, **kw))
        if method == "eap"
        else (lambda **kw: eap_ig(model, batch, steps=3, **kw))
    )
    s, ps = run(), run(positions=True)
    assert ps.scores.shape == (6, *s.scores.shape)
    torch.testing.assert_close(ps.scores.sum(0), s.scores, atol=1e-5, rtol=0)
    torch.testing.assert_close(summed_scores(ps).scores, s.scores, atol=1e-5, rtol=0)
    per_pos = ps.scores.abs().sum((1, 2))
    assert int((per_pos > 1e-3 * per_pos.max()).sum()) >= 4  # the scores really are spread over positions
    # the logits are read at the last position only: their edges elsewhere score 0
    lg = ps.graph.logits_down
    assert float(ps.scores[:-1, :, lg].abs().max()) == 0.0 and float(ps.scores[-1, :, lg].abs().max()) > 0


def test_position_scores_equal_per_position_edge_patching_on_a_linear_toy():
    model, batch = linear_toy(False), pairs()
    ps = eap(model, batch, positions=True)
    g = ps.graph
    gen = torch.Generator().manual_seed(0)
    valid = torch.nonzero(ps.valid).tolist()
    top = ps.order()[:25]
    P, U, D = ps.scores.shape
    triples = [[int(i) // (U * D), int(i) % (U * D) // D, int(i) % D] for i in top]
    triples += [valid[int(i)] for i in torch.randperm(len(valid), generator=gen)[:25]]
    effects = one_position_edge_effects(model, batch, g, triples)
    est = torch.tensor([float(ps.scores[p, u, d]) for p, u, d in triples])
    scale = float(effects.abs().max())
    # patches at several positions, into k/v as well as q and MLPs: the indexing by the input's position is tested
    assert scale > 1e-4 and len({t[0] for t in triples[:25]}) >= 3
    assert any("<v>" in g.downstream[d] for _, _, d in triples[:25])
    torch.testing.assert_close(est / scale, effects / scale, atol=1e-4, rtol=1e-3)


def test_position_scores_match_patching_to_first_order_on_a_real_tiny_model():
    model = llama()
    errors = []
    for eps in (0.2, 0.02):
        batch = near_pairs(model, eps)
        ps = eap(model, batch, positions=True)
        P, U, D = ps.scores.shape
        triples = [[int(i) // (U * D), int(i) % (U * D) // D, int(i) % D] for i in ps.order()[:30]]
        effects = one_position_edge_effects(model, batch, ps.graph, triples)
        est = torch.tensor([float(ps.scores[p, u, d]) for p, u, d in triples])
        errors.append(float((est - effects).abs().max() / effects.abs().max()))
    # first order: the relative error falls with the size of the corruption
    assert errors[1] < 0.05 and errors[1] < errors[0] / 3, errors


def test_positions_need_prompts_of_one_length():
    b = pairs(n=3, length=5)
    mask = b.clean_mask.clone()
    mask[1, 4] = 0
    padded = PairBatch(
        b.clean, mask, b.clean_pos, b.corrupt, mask.clone(), b.corrupt_pos, b.answers, b.answer_w, b.wrongs,
        b.wrong_w, aligned=True,
    )  # fmt: skip
    with pytest.raises(ValueError, match="one token length.*row 1 has 4 tokens"):
        eap(llama(), padded, positions=True)


def test_position_circuit_round_trip_mask_and_circuit_tracer_export(tmp_path):
    model, batch = llama(), pairs(n=2, length=6, seed=3)
    ps = eap(model, batch, positions=True)
    c = ps.to_circuit(top_n=30, provenance={"task": "toy"})
    assert all(n.pos is not None for n in c.nodes) and c.metrics["n_edges"] == 30
    assert c.extra["positions"]["n"] == 6 and len(c.extra["positions"]["tokens"]) == 6
    back = Circuit.load(c.save(tmp_path / "c.json"))
    assert back.nodes == c.nodes and back.edges == c.edges
    assert torch.equal(position_mask(back), ps.top_mask(30))
    # every edge stays within one position
    assert all(c.nodes[e.src].pos == c.nodes[e.dst].pos for e in c.edges)
    torch.testing.assert_close(scores_from_circuit(back).scores, summed_scores(ps).scores, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="position-resolved"):
        circuit_mask(back)
    d = to_circuit_tracer(back)
    check_circuit_tracer(d)
    assert d["metadata"]["prompt_tokens"] == c.extra["positions"]["tokens"]
    ours = [n for n in d["nodes"] if not n.get("interp_column")]
    assert [n["ctx_idx"] for n in ours] == [n.pos for n in c.nodes]
    assert len({n["node_id"] for n in d["nodes"]}) == len(d["nodes"])
    # every token column has an embedding node (their page labels only those); the added ones have no links
    assert {n["ctx_idx"] for n in d["nodes"] if n["feature_type"] == "embedding"} == set(range(6))
    added = {n["node_id"] for n in d["nodes"] if n.get("interp_column")}
    assert added and not any(e["source"] in added or e["target"] in added for e in d["links"])
    assert all(n["node_id"].endswith(f"_{n['ctx_idx']}") for n in d["nodes"])
    same = [n["feature"] for n, m in zip(d["nodes"], c.nodes) if (m.layer, m.kind, m.index) == (0, "embed", 0)]
    assert len(same) >= 2 and len(set(same)) == 1  # one feature number per component, shared by its positions
    rt = from_circuit_tracer(d)
    assert rt.nodes == c.nodes and rt.extra["positions"]["tokens"] == c.extra["positions"]["tokens"]
    summed = to_circuit_tracer(eap(model, batch).to_circuit(top_n=30))  # the default export is unchanged
    assert {n["ctx_idx"] for n in summed["nodes"]} <= {0, 1} and len(summed["metadata"]["prompt_tokens"]) == 2


def test_graph_page_draws_positions_as_columns_with_escaped_tokens():
    ps = eap(llama(), pairs(n=2, length=6, seed=3), positions=True)
    c = ps.to_circuit(top_n=20)
    c.extra["positions"]["tokens"] = ["<b>", "a", "&", "c", "d", "'e"]
    data = page_data(c)
    assert data["xaxis"]["ticktext"] == ["&lt;b&gt;", "a", "&amp;", "c", "d", "'e"]
    assert data["xaxis"]["tickvals"] == list(range(6))
    for node, n in zip(data["nodes"], c.nodes):
        assert abs(node["x"] - n.pos) < 0.5  # each node sits in its token's column
    page = to_html(c, include_plotlyjs=False)
    assert "<b>" not in page.split('id="circuit-data">')[1].split("</script>")[0]


def test_cli_extract_positions_writes_a_position_circuit_and_exports_it(tmp_path):
    folder = tmp_path / "m"
    interp.HookedModel(tiny_hf("llama"), byte_tokenizer()).hf_model.save_pretrained(folder)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"clean": f"ab{c}d", "corrupt": f"ax{c}d", "answer": "q", "wrong": "r"}) + "\n" for c in "cde"
        )
    )
    out = tmp_path / "c"
    args = ["extract", "--model", str(folder), "--task", f"prompts:{rows}", "--method", "eap", "--top", "15"]
    r = CliRunner().invoke(app, [*args, "--positions", "--min-accuracy", "0", "--out", str(out), "--device", "cpu"])
    assert r.exit_code == 0, r.output
    c = Circuit.load(out / "circuit.json")
    tokens = c.extra["positions"]["tokens"]  # the rows are shuffled: their third tokens in any order
    assert tokens[:2] == ["a", "b"] and sorted(tokens[2].split("|")) == ["c", "d", "e"] and tokens[3] == "d"
    assert c.metrics["n_edges"] == 15 and c.provenance["positions"] is True
    assert c.metrics["full_metric"] == pytest.approx(c.metrics["baseline"]["clean_metric"], abs=1e-4)
    r = CliRunner().invoke(app, ["export", str(out / "circuit.json"), "--out", str(tmp_path / "ct")])
    assert r.exit_code == 0, r.output
    d = json.loads(next(p for p in (tmp_path / "ct").glob("*.json") if p.name != "graph-metadata.json").read_text())
    assert d["metadata"]["prompt_tokens"] == tokens
    assert max(n["ctx_idx"] for n in d["nodes"]) == 3
    r = CliRunner().invoke(
        app, ["ablate", "--circuit", str(out / "circuit.json"), "--model", str(folder), "--device", "cpu"]
    )
    assert r.exit_code == 2 and "position-resolved" in r.output, r.output


def test_smollm2_positions_experiment_quick_runs(tmp_path):
    from circuits.experiments import smollm2_positions

    assert smollm2_positions.main(["--quick", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["eap_sum_vs_summed_max_abs_diff"] < 1e-5 and len(res["checked"]) == 3
    assert all(abs(r["exact"] - r["eap"]) <= 0.5 * abs(r["exact"]) + 1e-6 for r in res["checked"])


@pytest.mark.slow
def test_circuit_tracer_frontend_draws_a_position_resolved_export(tmp_path):
    """Their own page (circuit-tracer 0.5) in headless Chromium: no JS error, every node drawn, one per column."""
    from circuits.experiments.circuit_tracer_frontend import MissingTools, find_tools, render
    from circuits.format.circuit_tracer import write_circuit_tracer_folder

    try:
        find_tools()
    except MissingTools as exc:
        pytest.skip(str(exc))
    c = eap(llama(), pairs(n=2, length=6, seed=3), positions=True).to_circuit(top_n=30, provenance={"task": "toy"})
    path = write_circuit_tracer_folder(c, tmp_path / "data")
    n_file = len(json.loads(path.read_text())["nodes"])
    r = render(tmp_path / "data", tmp_path / "shot.png")
    assert r["errors"] == [] and r["nodes_drawn"] == r["nodes_expected"] == n_file >= len(c.nodes)
