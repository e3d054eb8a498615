"""Long prompts' graphs: the layer-wise backward gives `FrozenRun`'s rows, rows streamed to disk give the same
graph as rows in memory, the chunked edge threshold is the sort's, and a graph keeps only its nonzero rows."""

import json
import sys

import pytest
import torch
from safetensors.torch import save_file

from circuits.graph import Graph, attribute, influence, prune, rowstore
from circuits.graph.attribute import choose_mode, plan_of, prompt_tokens
from circuits.graph.influence import _threshold, _threshold_chunked, partial_influence
from circuits.graph.replacement import FrozenRun, LayerwiseRun, record
from circuits.graph.rowstore import RowStore
from circuits.model.transcoders import random_transcoders
from tests.circuits.conftest import make_model

PROMPT = "Hello world, this is a longer prompt"


def _targets(model, tc, rec, n_pos):
    """Six feature targets at several layers and positions, and two logit-like reads at the last position."""
    feats = rec.features[torch.linspace(0, len(rec.features) - 1, 6).long()]
    enc = torch.stack([tc.W_enc[int(layer)][int(f)] for layer, _, f in feats])
    layers = torch.cat([feats[:, 0], torch.full((2,), model.n_layers)])
    positions = torch.cat([feats[:, 1], torch.full((2,), n_pos - 1)])
    return (
        layers,
        positions,
        torch.cat([enc, torch.randn(2, model.d_model, generator=torch.Generator().manual_seed(0))]),
    )


@pytest.mark.parametrize("arch", ["llama", "gemma3", "gpt2"])
@pytest.mark.parametrize("kind", ["plt", "skip", "clt"])
def test_layerwise_rows_are_the_frozen_runs(arch, kind):
    model = make_model(arch)
    tc = random_transcoders(model.n_layers, model.d_model, 32, kind, seed=1, threshold=0.3)
    tokens = prompt_tokens(model, PROMPT)
    rec = record(model, tc, tokens)
    layers, positions, vectors = _targets(model, tc, rec, len(tokens))
    dense = FrozenRun(model, tc, rec, 8).rows(layers, positions, vectors)
    long = LayerwiseRun(model, tc, rec, 8).rows(layers, positions, vectors)
    assert dense.abs().max() > 0
    torch.testing.assert_close(long, dense, rtol=1e-4, atol=1e-4 * float(dense.abs().max()))
    # a batch of early targets runs only their prefix and stays exact
    early = positions < len(tokens) // 2
    if early.any():
        part = LayerwiseRun(model, tc, rec, 8).rows(layers[early], positions[early], vectors[early])
        torch.testing.assert_close(part, dense[early], rtol=1e-4, atol=1e-4 * float(dense.abs().max()))


@pytest.mark.parametrize("max_feature_nodes", [None, 12])
def test_every_mode_gives_the_same_graph(tmp_path, monkeypatch, max_feature_nodes):
    monkeypatch.setattr(rowstore, "BLOCK_BYTES", 4096)  # many blocks per pass
    model = make_model("llama")
    tc = random_transcoders(model.n_layers, model.d_model, 32, "skip", seed=3, threshold=0.3)
    kw = dict(batch_size=4, max_feature_nodes=max_feature_nodes, rank_every=4)
    dense = attribute(model, tc, PROMPT, layerwise=False, offload=False, **kw)
    plans = []
    long = attribute(model, tc, PROMPT, layerwise=True, offload=True, offload_dir=tmp_path, on_plan=plans.append, **kw)
    assert plans[0]["layerwise"] and plans[0]["offload"] and plans[0]["disk_bytes"] > 0
    assert long.meta["settings"]["offload"] and list(tmp_path.iterdir()) == []  # the rows file is gone
    assert torch.equal(long.selected, dense.selected)
    torch.testing.assert_close(long.rows, dense.rows, rtol=1e-4, atol=1e-4 * float(dense.rows.abs().max()))
    for k, v in dense.meta["scores"].items():
        assert long.meta["scores"][k] == pytest.approx(v, rel=1e-4)


def test_a_store_on_disk_reads_back_what_memory_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(rowstore, "BLOCK_BYTES", 3 * 4 * 50)  # three rows a block
    g = torch.Generator().manual_seed(0)
    rows = torch.rand(10, 50, generator=g) * (torch.rand(10, 50, generator=g) > 0.5)
    rows[:, -2:] = 0  # the logit columns have no outgoing edges
    nodes = torch.tensor([48, 49, 0, 3, 7, 1, 2, 9, 5, 11])
    mem, disk = RowStore(10, 50), RowStore(10, 50, tmp_path)
    for s in (slice(0, 2), slice(2, 7), slice(7, 10)):
        mem.append(rows[s], nodes[s])
        disk.append(rows[s], nodes[s])
    assert len(list(disk.blocks())) == 4
    assert torch.equal(torch.cat([b for b, _ in disk.blocks()]), rows)
    logit_p = torch.tensor([0.7, 0.3])
    torch.testing.assert_close(partial_influence(disk, logit_p, None), partial_influence(rows, logit_p, nodes))
    cols = torch.tensor([0, 5, 9, 48])
    got, order = disk.select(cols)
    assert order.tolist() == sorted(nodes.tolist()) and torch.equal(got, mem.select(cols)[0])
    disk.close()
    assert not (tmp_path / "graph_rows.f32").exists()
    with pytest.raises(ValueError, match="holds 10 rows"):
        mem.append(rows[:1], nodes[:1])


def test_the_chunked_threshold_is_the_sorts():
    g = torch.Generator().manual_seed(1)
    for share in (0.0, 0.3, 0.8, 0.98, 1.0):
        scores = torch.randint(0, 20, (1000,), generator=g).float()  # integers: exact sums, many ties
        chunks = lambda s=scores: s.split(77)  # noqa: E731
        assert float(_threshold_chunked(chunks, share)) == float(_threshold(scores, share)), share
    scores = torch.rand(5000, generator=g) ** 4
    assert float(_threshold_chunked(lambda: scores.split(300), 0.98)) == float(_threshold(scores, 0.98))


def test_pruning_rows_only_or_chunked_is_pruning_the_dense_matrix(monkeypatch):
    model = make_model("llama")
    tc = random_transcoders(model.n_layers, model.d_model, 32, "plt", seed=4, threshold=0.3)
    g = attribute(model, tc, PROMPT, batch_size=8)
    dense = prune(g.adjacency, g.logit_probabilities, g.n_pos, g.n_features)
    rows = prune(g.rows, g.logit_probabilities, g.n_pos, g.n_features, row_nodes=g.row_nodes)
    monkeypatch.setattr(influence, "SORT_LIMIT", 100)
    chunked = prune(g.rows, g.logit_probabilities, g.n_pos, g.n_features, row_nodes=g.row_nodes)
    for p in (rows, chunked):
        assert torch.equal(p.node_mask, dense.node_mask) and torch.equal(p.edge_mask, dense.edge_mask)
    assert dense.edge_mask.sum() > 0


def test_a_graph_holds_its_nonzero_rows_and_old_files_load(tmp_path, monkeypatch):
    model = make_model("llama")
    tc = random_transcoders(model.n_layers, model.d_model, 32, "plt", seed=4, threshold=0.3)
    g = attribute(model, tc, PROMPT, batch_size=8)
    a = g.adjacency
    assert g.rows.shape == (g.n_features + g.n_logits, g.n_nodes)
    assert a[g.n_features : g.n_nodes - g.n_logits].abs().sum() == 0  # errors and tokens: sources only
    # a version 1 folder (the dense square matrix) loads to the same rows
    folder = g.save(tmp_path / "v1")
    info = json.loads((folder / "graph.json").read_text())
    info["version"] = 1
    (folder / "graph.json").write_text(json.dumps(info))
    tensors = {k: getattr(g, k).contiguous() for k in ("features", "activations", "selected", "tokens")}
    tensors |= {"logit_tokens": g.logit_tokens, "logit_probabilities": g.logit_probabilities, "adjacency": a}
    save_file(tensors, str(folder / "graph.safetensors"))
    assert torch.equal(Graph.load(folder).rows, g.rows)
    monkeypatch.setattr("circuits.graph.graph.DENSE_LIMIT_BYTES", 10)
    with pytest.raises(MemoryError, match="use graph.rows"):
        _ = Graph.load(folder).adjacency  # a fresh graph: nothing built yet


def test_the_plan_chooses_the_fastest_mode_that_fits(monkeypatch):
    sizes = dict(
        n_pos=4096, n_layers=30, n_active=4_200_000, n_visit=256, n_logits=10, batch=32, d_model=576, n_heads=9
    )
    monkeypatch.setattr("interp.models.memory.machine_memory_gb", lambda: 24.0)
    plan = choose_mode(sizes, None, None)
    assert plan["layerwise"] and plan["total_bytes"] < 0.8 * 24e9
    dense = plan_of(**sizes)
    assert dense["forward_bytes"] > 24e9  # every copy's patterns: the reason for the layer-wise backward
    small = dict(sizes, n_pos=64, n_active=60_000, n_visit=100)
    assert not choose_mode(small, None, None)["layerwise"]
    assert choose_mode(small, True, None)["layerwise"]  # a choice the caller made is kept


def test_rows_that_do_not_fit_the_disk_are_refused_before_any_backward(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(100, 100, 10))
    model = make_model("llama")
    tc = random_transcoders(model.n_layers, model.d_model, 32, "plt", seed=4, threshold=0.3)
    called = []
    monkeypatch.setattr(sys.modules["circuits.graph.attribute"], "LayerwiseRun", lambda *a, **k: called.append(1))
    with pytest.raises(OSError, match="GB free"):
        attribute(model, tc, PROMPT, layerwise=True, offload=True, offload_dir=tmp_path)
    assert not called and list(tmp_path.iterdir()) == []


def test_a_long_graphs_page_shows_its_most_influential_nodes_and_names_every_kth_token():
    from circuits.format.graph_html import MAX_TICKS, page_data
    from circuits.graph.as_circuit import graph_circuit

    model = make_model("llama")
    tc = random_transcoders(model.n_layers, model.d_model, 32, "plt", seed=4, threshold=0.3)
    g = attribute(model, tc, PROMPT, batch_size=8)
    full = graph_circuit(g)
    capped = graph_circuit(g, max_nodes=20)
    assert len(full.nodes) > 20 and len(capped.nodes) <= 20
    assert capped.metrics["pruned_nodes"] == len(full.nodes)
    assert sum(n.kind == "logits" for n in capped.nodes) == g.n_logits
    # an edge-less token or error node is not drawn once the page is capped
    linked = {i for e in capped.edges for i in (e.src, e.dst)}
    assert all(i in linked or n.kind == "logits" for i, n in enumerate(capped.nodes))
    capped.extra["positions"]["tokens"] = [f"t{i}" for i in range(3 * MAX_TICKS)]
    ticks = page_data(capped)["xaxis"]["tickvals"]
    assert len(ticks) <= MAX_TICKS and ticks[:2] == [0, 3]


def test_graph_seeds_summarises_graph_scores_folders(tmp_path, capsys):
    from circuits.experiments.graph_seeds import main

    for seed, rep in enumerate((0.4, 0.5)):
        rows = [
            {"kind": "plt", "task": "ioi", "replacement": rep, "completeness": 0.8, "error_share": 0.2,
             "top_heads_final_position": [{"head": f"L{seed}H1"}, {"head": "L2H0"}]},
            {"kind": "clt", "task": "ioi", "replacement": 0.9, "completeness": 0.9, "error_share": 0.1},
        ]  # fmt: skip
        (tmp_path / str(seed)).mkdir()
        (tmp_path / str(seed) / "scores.json").write_text(json.dumps({"rows": rows}))
    main([str(tmp_path / "0"), str(tmp_path / "1"), "--kind", "plt"])
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("| ioi | 2 | 0.450 ± 0.071 | 0.800 ± 0.000 |") and "L0H1,L2H0; L1H1,L2H0" in line
    with pytest.raises(SystemExit, match="not found"):
        main([str(tmp_path / "missing")])


def test_the_dense_adjacency_is_built_once_per_rows_tensor():
    model = make_model("llama")
    tc = random_transcoders(model.n_layers, model.d_model, 32, "plt", seed=4, threshold=0.3)
    g = attribute(model, tc, PROMPT, batch_size=8)
    assert g.adjacency is g.adjacency  # loops that index it row by row build it once
    g.rows = g.rows * 2
    torch.testing.assert_close(g.adjacency[: g.n_features], g.rows[: g.n_features])


class _Stop(Exception):
    pass


@pytest.mark.parametrize("max_feature_nodes", [None, 14])
def test_an_interrupted_offloaded_graph_resumes_to_the_uninterrupted_one(tmp_path, monkeypatch, max_feature_nodes):
    monkeypatch.setattr(rowstore, "BLOCK_BYTES", 4096)
    model = make_model("llama")
    tc = random_transcoders(model.n_layers, model.d_model, 32, "skip", seed=3, threshold=0.3)
    kw = dict(batch_size=4, max_feature_nodes=max_feature_nodes, rank_every=6, offload=True, layerwise=True)
    whole = attribute(model, tc, PROMPT, offload_dir=tmp_path / "whole", **kw)
    assert not (tmp_path / "whole" / "graph-rows" / "graph_rows.f32").exists()  # a finished run leaves nothing
    seen = []

    def stop_after(n):
        def progress(k):
            seen.append(k)
            if sum(seen) >= n:
                raise _Stop

        return progress

    out = tmp_path / "run"
    with pytest.raises(_Stop):
        attribute(model, tc, PROMPT, offload_dir=out, progress=stop_after(9), **kw)
    rows_file = out / "graph-rows" / "graph_rows.f32"
    assert rows_file.exists()
    with open(rows_file, "ab") as f:  # a kill in the middle of a write: half a row on file, no node for it
        f.write(b"\0" * 10)
    resumed_seen = []
    again = attribute(model, tc, PROMPT, offload_dir=out, progress=resumed_seen.append, **kw)
    assert resumed_seen[0] >= 8  # the rows already there were counted, not recomputed
    assert sum(resumed_seen) == len(whole.selected)
    assert torch.equal(again.selected, whole.selected)
    torch.testing.assert_close(again.rows, whole.rows, rtol=0, atol=0)
    assert not rows_file.exists()


def test_rows_of_another_run_are_not_resumed(tmp_path):
    store = RowStore(6, 3, tmp_path, key="a")
    store.append(torch.ones(2, 3), torch.tensor([4, 5]))
    store.close(keep=True)
    same = RowStore(6, 3, tmp_path, key="a")
    assert same.resumed == 2 and same.nodes[:2].tolist() == [4, 5]
    same.close(keep=True)
    other = RowStore(6, 3, tmp_path, key="b")
    assert other.resumed == 0 and other.filled == 0
    other.close()
    assert not list(tmp_path.glob("graph_rows*"))
