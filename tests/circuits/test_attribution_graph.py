"""Attribution graphs on tiny models with random transcoders: every edge is a direct effect of the frozen
replacement model (checked by perturbing that model, the slow exact reference), a row's edges add up to its
target, and the file round-trips."""

import pytest
import torch

from circuits.graph import Graph, attribute, graph_scores, logit_targets, prune
from circuits.graph.replacement import record
from circuits.model.transcoders import load_transcoders, random_transcoders, save_transcoders
from tests.circuits.conftest import make_model

PROMPT = "Hello world, this is"


def _unbiased(tc):
    tc.b_dec.zero_()
    return tc


def _clean_frozen(model, tokens):
    """Every norm scale, attention pattern and MLP output of the clean run, to be replayed as constants."""
    seen = {}

    def keep(x, hook):
        seen[hook.name] = x.detach().clone()

    names = lambda n: n.endswith((".hook_scale", "attn.hook_pattern", "hook_mlp_out", "hook_resid_mid"))  # noqa: E731
    with model.hooks(fwd_hooks=[(names, keep)]):
        model(tokens[None])
    return seen


def _replayed(model, tc, tokens, clean, shift=None):
    """The replacement model written out by hand (the slow reference): scales and patterns replayed from the
    clean run, each MLP output = its clean value with the skip recomputed, plus `shift` = (layer, pos, vec).
    Returns (normalised MLP inputs per layer, the final residual after the final norm)."""
    from interp.hooks import norms

    normalized = {}

    def replay(x, hook):
        return clean[hook.name]

    def mid(x, hook):
        _, spec = model.norm_module(f"blocks.{hook.layer}.ln2")
        normalized[hook.layer] = norms.normalized_of(spec, x, clean[f"blocks.{hook.layer}.ln2.hook_scale"])

    def mlp(x, hook):
        layer = hook.layer
        clean_in = norms.normalized_of(
            model.norm_module(f"blocks.{layer}.ln2")[1],
            clean[f"blocks.{layer}.hook_resid_mid"],
            clean[f"blocks.{layer}.ln2.hook_scale"],
        )
        out = clean[hook.name] - tc.skip(layer, clean_in) + tc.skip(layer, normalized[layer])
        if shift is not None and shift[0] == layer:
            out = out.clone()
            out[0, shift[1]] += shift[2]
        return out

    scales = lambda n: n.endswith((".hook_scale", "attn.hook_pattern")) and not n.startswith("ln_final")  # noqa: E731
    hooks = [(scales, replay), ("blocks.*.hook_resid_mid", mid), ("blocks.*.hook_mlp_out", mlp)]
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        resid = model(tokens[None], stop_at_layer=model.n_layers)
    module, spec = model.norm_module("ln_final")
    scale = norms.scale_of(spec, model(tokens[None], stop_at_layer=model.n_layers).detach())
    final = norms.affine(module, spec, norms.normalized_of(spec, resid, scale), resid.dtype)
    return normalized, final


def _value(out, layer, pos, vec, n_layers):
    normalized, final = out
    x = final if layer == n_layers else normalized[layer]
    return float(x[0, pos].detach() @ vec)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
@pytest.mark.parametrize("kind", ["plt", "skip", "clt"])
def test_rows_add_up_to_their_targets(arch, kind):
    """No biases anywhere (Llama/Gemma attention, b_dec zeroed, no position dropped): every feature row sums to
    the feature's pre-activation minus b_enc and every logit row to the demeaned logit."""
    model = make_model(arch)
    tc = _unbiased(random_transcoders(model.n_layers, model.d_model, 32, kind, seed=2, threshold=0.3))
    g = attribute(model, tc, PROMPT, batch_size=8, zero_positions=0)
    rec = record(model, tc, g.tokens, zero_positions=0)
    for i in range(g.n_features):
        layer, pos, feat = (int(v) for v in g.features[g.selected[i]])
        want = float(tc.pre(layer, rec.inputs[layer, pos])[feat] - tc.b_enc[layer][feat])
        assert g.adjacency[i].sum().item() == pytest.approx(want, rel=1e-3, abs=1e-3)
    with torch.no_grad():
        logits = model(g.tokens[None])[0, -1]
    for j in range(g.n_logits):
        want = float(logits[g.logit_tokens[j]] - logits.mean())
        assert g.adjacency[-g.n_logits + j].sum().item() == pytest.approx(want, rel=1e-3, abs=1e-3)


@pytest.mark.parametrize("kind", ["plt", "skip", "clt"])
def test_an_edge_is_the_frozen_models_response_to_its_source(kind):
    model = make_model("llama")
    tc = random_transcoders(model.n_layers, model.d_model, 32, kind, seed=3, threshold=0.3)
    g = attribute(model, tc, PROMPT, batch_size=8)
    clean = _clean_frozen(model, g.tokens)
    base = _replayed(model, tc, g.tokens, clean)
    rec = record(model, tc, g.tokens)
    logit_vec = model.W_U[:, g.logit_tokens[0]] - model.W_U.mean(-1)
    last = [i for i in range(g.n_features) if int(g.features[g.selected[i], 0]) == model.n_layers - 1]
    t_layer, t_pos, t_feat = g.features[g.selected[last[0]]].tolist()
    targets = [(g.adjacency.shape[0] - g.n_logits, model.n_layers, g.n_pos - 1, logit_vec)]
    targets.append((last[0], t_layer, t_pos, tc.W_enc[t_layer][t_feat]))
    sources = [i for i in range(g.n_features) if int(g.features[g.selected[i], 0]) == 0][:3]
    n = model.n_layers
    for row, layer, pos, vec in targets:
        for s in sources:
            s_layer, s_pos, s_feat = g.features[g.selected[s]].tolist()
            act = g.activations[g.selected[s]]
            effect = 0.0
            for w in tc.writes(s_layer):  # a cross-layer feature writes into several MLP outputs at once
                if w >= layer:
                    continue
                dec = tc.decoder_rows(s_layer, torch.tensor([s_feat]), w)[0] * act
                shifted = _replayed(model, tc, g.tokens, clean, (w, s_pos, dec))
                effect += _value(shifted, layer, pos, vec, n) - _value(base, layer, pos, vec, n)
            assert g.adjacency[row, s].item() == pytest.approx(effect, rel=1e-3, abs=1e-4)
        err = g.n_features + 2  # the error node of layer 0, position 2
        shifted = _replayed(model, tc, g.tokens, clean, (0, 2, rec.errors[0, 2]))
        effect = _value(shifted, layer, pos, vec, n) - _value(base, layer, pos, vec, n)
        assert g.adjacency[row, err].item() == pytest.approx(effect, rel=1e-3, abs=1e-4)


def test_visiting_fewer_features_keeps_the_rows_it_visits():
    model = make_model("llama")
    tc = random_transcoders(model.n_layers, model.d_model, 32, "plt", seed=4, threshold=0.3)
    full = attribute(model, tc, PROMPT, batch_size=8)
    part = attribute(model, tc, PROMPT, batch_size=8, max_feature_nodes=20, rank_every=8)
    assert part.n_features == 20 and full.n_features == len(full.features)
    cols = torch.cat([part.selected, torch.arange(full.n_features, full.adjacency.shape[0])])
    rows = torch.cat([part.selected, torch.arange(full.n_features, full.adjacency.shape[0])])
    torch.testing.assert_close(part.adjacency, full.adjacency[rows][:, cols])


def test_logit_targets_stop_at_the_cumulative_probability():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.11, 0.09]))
    ids, p = logit_targets(logits, max_n_logits=10, desired_logit_prob=0.95)
    assert ids.tolist() == [0, 1, 2, 3] and p.sum().item() == pytest.approx(1.0)
    ids, _ = logit_targets(logits, desired_logit_prob=0.7)
    assert ids.tolist() == [0, 1]
    assert len(logit_targets(logits, max_n_logits=1)[0]) == 1


def test_scores_and_pruning_on_a_hand_made_graph():
    """Tokens feed a feature and an error; both feed the logit. Replacement = token share of the influence."""
    # nodes: feature, error, token, logit
    a = torch.zeros(4, 4)
    a[0, 2] = 2.0  # token -> feature
    a[3, 0] = 3.0  # feature -> logit
    a[3, 1] = 1.0  # error -> logit
    s = graph_scores(a, torch.tensor([1.0]), n_features=1, n_errors=1, n_tokens=1)
    assert s["replacement"] == pytest.approx(0.75 / 1.0)  # token influence 0.75, error 0.25
    # influence: feature 0.75, error 0.25, token 0.75, logit weight 1; only the logit has an error input (0.25)
    assert s["completeness"] == pytest.approx((0.75 + 0.25 + 0.75 + 0.75 * 1) / 2.75)
    assert s["error_share"] == pytest.approx(0.25 / (0.75 + 0.25 + 0.75))
    p = prune(a, torch.tensor([1.0]), n_tokens=1, n_features=1, node_threshold=0.5, edge_threshold=0.5)
    assert p.node_mask.tolist() == [True, False, True, True]


def test_graph_and_transcoder_files_round_trip(tmp_path):
    model = make_model("llama")
    for kind in ("plt", "skip", "clt"):
        tc = random_transcoders(model.n_layers, model.d_model, 16, kind, seed=5)
        back = load_transcoders(save_transcoders(tc, tmp_path / kind))
        assert back.kind == kind
        x = torch.randn(3, model.d_model)
        torch.testing.assert_close(back.encode(1, x), tc.encode(1, x))
    g = attribute(model, back, PROMPT, batch_size=8)
    again = Graph.load(g.save(tmp_path / "g"))
    torch.testing.assert_close(again.adjacency, g.adjacency)
    assert again.meta["scores"] == g.meta["scores"] and again.node(0)["kind"] == "feature"
    assert again.node(again.adjacency.shape[0] - 1)["kind"] == "logit"


def test_a_damaged_transcoder_folder_is_one_clear_error(tmp_path):
    model = make_model("llama")
    p = save_transcoders(random_transcoders(model.n_layers, model.d_model, 16, "plt"), tmp_path / "t")
    (p / "layer_1.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ValueError, match="layer_1.safetensors"):
        load_transcoders(p)
    (p / "layer_1.safetensors").unlink()
    with pytest.raises(ValueError, match="missing"):
        load_transcoders(p / "..")  # no layer files at all
    wrong = random_transcoders(model.n_layers + 1, model.d_model, 16, "plt")
    with pytest.raises(ValueError, match="train transcoders on this model"):
        attribute(model, wrong, PROMPT)


def test_transcoders_of_some_layers_only_say_to_retrain_without_layers(tmp_path):
    """A folder `interp sae train --layers` wrote covers some layers: refused by name, not as missing files."""
    from circuits.model.transcoders import check_covers
    from sae.transcoder_folder import make_transcoders, write_transcoders

    model = make_model("llama")
    for layers in ([1], [0], [0, 1]):
        write_transcoders(make_transcoders("plt", layers, model.d_model, 16), tmp_path / str(layers), model="tiny")
    with pytest.raises(ValueError, match=r"layers \[1\] only .*every layer of the model: retrain without --layers"):
        load_transcoders(tmp_path / "[1]")
    first = load_transcoders(tmp_path / "[0]")
    with pytest.raises(ValueError, match=r"cover layers \[0\] of the model's 2; .*retrain without --layers"):
        check_covers(first, model.n_layers, model.d_model)
    with pytest.raises(ValueError, match=r"cover layers \[0\] of the model's 2"):
        attribute(model, first, PROMPT)  # the graph refuses it by the same words
    check_covers(load_transcoders(tmp_path / "[0, 1]"), model.n_layers, model.d_model)
    check_covers(random_transcoders(model.n_layers, model.d_model, 16, "plt"), model.n_layers)  # no index: not judged


def test_the_command_writes_a_graph_and_their_frontend_data(tmp_path):
    """`interp circuits graph --quick`: the graph folder, and a ct/ folder whose file passes the frontend checks
    with one node per id (their page keys nodes by id)."""
    import json

    from typer.testing import CliRunner

    from circuits.cli import app
    from circuits.format.circuit_tracer import check_circuit_tracer

    r = CliRunner().invoke(app, ["graph", "--quick", "--out", str(tmp_path / "g"), "--max-feature-nodes", "200"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout.strip().splitlines()[0])
    assert summary["feature_nodes"] == 200 and 0 < summary["replacement"] <= 1
    g = Graph.load(tmp_path / "g")
    assert g.meta["scores"]["replacement"] == pytest.approx(summary["replacement"], abs=1e-4)
    index = json.loads((tmp_path / "g" / "ct" / "graph-metadata.json").read_text())
    d = json.loads((tmp_path / "g" / "ct" / f"{index['graphs'][0]['slug']}.json").read_text())
    check_circuit_tracer(d)
    ids = [n["node_id"] for n in d["nodes"]]
    assert len(ids) == len(set(ids))
    assert {n["feature_type"] for n in d["nodes"]} >= {"embedding", "logit", "cross layer transcoder"}
    assert (tmp_path / "g" / "graph.html").stat().st_size > 1000
    shown = CliRunner().invoke(app, ["show", "--circuit", str(tmp_path / "g"), "--out-file", str(tmp_path / "s.html")])
    assert shown.exit_code == 0 and "nodes" in shown.output, shown.output
    exported = CliRunner().invoke(app, ["export", "--circuit", str(tmp_path / "g"), "--out", str(tmp_path / "ct2")])
    assert exported.exit_code == 0, exported.output
    again = json.loads(next((tmp_path / "ct2").glob("[!g]*.json")).read_text())
    assert [n["node_id"] for n in again["nodes"]] == ids  # the same frontend graph the command wrote
    bad = CliRunner().invoke(app, ["graph", "--out", str(tmp_path / "h"), "--model", "x"])
    assert bad.exit_code == 2 and "--transcoders" in bad.output and not (tmp_path / "h").exists()
    (tmp_path / "file").write_text("x")
    bad = CliRunner().invoke(app, ["graph", "--quick", "--out", str(tmp_path / "file" / "sub")])
    assert bad.exit_code == 2 and "is a file" in bad.output and (tmp_path / "file").read_text() == "x"
    bad = CliRunner().invoke(app, ["graph", "--quick", "--out", str(tmp_path / "h"), "--node-threshold", "2"])
    assert bad.exit_code == 2 and "between 0" in bad.output and not (tmp_path / "h").exists()


def test_interventions_match_the_graphs_prediction_in_the_frozen_model():
    """Without edits the replacement model is the model; a small steer of any feature (no threshold crossed)
    changes each logit target as the graph's paths predict, exactly in the frozen setting."""
    from circuits.graph.intervene import intervene, predicted_effect

    model = make_model("llama")
    for kind in ("plt", "clt"):
        tc = random_transcoders(model.n_layers, model.d_model, 32, kind, seed=6, threshold=0.3)
        g = attribute(model, tc, PROMPT, batch_size=8)
        with torch.no_grad():
            clean = model(g.tokens[None])[0, -1]
        for freeze in (True, False):
            torch.testing.assert_close(intervene(model, tc, g.tokens, {}, freeze=freeze), clean, atol=1e-4, rtol=1e-4)
        demeaned = lambda x, ids=g.logit_tokens: x[ids] - x.mean()  # noqa: E731
        for i in (0, g.n_features - 1):  # a layer-0 feature (paths through layer 1) and a last-layer one
            key = tuple(int(v) for v in g.features[g.selected[i]])
            edit = {key: float(g.activations[g.selected[i]]) * 1.01}
            measured = demeaned(intervene(model, tc, g.tokens, edit, freeze=True)) - demeaned(clean)
            torch.testing.assert_close(measured, predicted_effect(g, edit), atol=2e-5, rtol=1e-3)


def test_edits_that_would_be_ignored_wrap_or_be_overwritten_are_refused():
    from circuits.graph.intervene import intervene

    model = make_model("llama")
    tc = random_transcoders(model.n_layers, model.d_model, 32, "plt", seed=6, threshold=0.3)
    tokens = torch.tensor([1, 72, 101, 108, 111])
    for edit, match in (
        ((model.n_layers, 2, 0), "not a layer of this 2-layer model"),
        ((-1, 2, 0), "not a layer"),
        ((0, -1, 0), "outside the prompt's 5 positions"),
        ((0, 5, 0), "outside the prompt's 5 positions"),
        ((0, 0, 0), "before zero_positions=1"),
        ((0, 2, 32), "not one of the transcoders' 32"),
    ):
        with pytest.raises(ValueError, match=match):
            intervene(model, tc, tokens, {edit: 1.0})
    intervene(model, tc, tokens, {(0, 0, 0): 1.0}, zero_positions=0)  # with nothing kept clean, position 0 is editable


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_head_loadings_are_the_edges_that_blocking_a_head_removes(arch):
    """The part of every edge carried by head h of layer l equals what the edge loses when the gradient through
    that head alone is blocked (a hook on its z), and the bypass is what is left with all of layer l blocked."""
    from circuits.graph.heads import head_loadings, top_heads
    from circuits.graph.replacement import FrozenRun

    model = make_model(arch)
    tc = random_transcoders(model.n_layers, model.d_model, 32, "plt", seed=7, threshold=0.3)
    g = attribute(model, tc, PROMPT, batch_size=8)
    row = g.adjacency.shape[0] - g.n_logits  # the top logit
    loads = head_loadings(model, tc, g, row, batch_size=8)
    assert loads.shape == (model.n_layers, model.n_heads, g.adjacency.shape[0] - g.n_logits)
    rec = record(model, tc, g.tokens)
    cols = torch.cat([g.selected, torch.arange(len(rec.features), loads.shape[-1] - g.n_features + len(rec.features))])
    vec = (model.W_U[:, g.logit_tokens[0]] - model.W_U.mean(-1)).detach()

    def blocked_row(layer, heads, target=(model.n_layers, g.n_pos - 1, vec)):
        run = FrozenRun(model, tc, rec, 1, heads=True)
        mask = torch.ones(model.n_heads)
        mask[heads] = 0
        run.z_heads[layer].register_hook(lambda grad: grad * mask[None, None, :, None])
        outs, grads = run.reads(torch.tensor([target[0]]), torch.tensor([target[1]]), target[2][None])
        e, m, _ = run.backward(outs, grads, retain=False)
        return run.contract(e, m)[0, cols]

    edge = g.adjacency[row, : loads.shape[-1]]
    for layer, head in ((0, 1), (1, 3)):
        torch.testing.assert_close(edge - blocked_row(layer, [head]), loads[layer, head], atol=1e-4, rtol=1e-3)
    bypass = blocked_row(1, list(range(model.n_heads)))
    torch.testing.assert_close(edge - loads[1].sum(0), bypass, atol=1e-4, rtol=1e-3)
    assert len(top_heads(g, loads, row, k=3)) == 3

    # a feature row at the last layer L reads after layer L's attention: layer L's heads carry part of its edges
    last = model.n_layers - 1
    frow = next(i for i in range(g.n_features) if int(g.features[g.selected[i]][0]) == last)
    layer, pos, feat = (int(v) for v in g.features[g.selected[frow]])
    target = (layer, pos, tc.W_enc[layer][feat])
    floads = head_loadings(model, tc, g, frow, batch_size=8)
    fedge = g.adjacency[frow, : floads.shape[-1]]
    torch.testing.assert_close(blocked_row(0, [], target), fedge, atol=1e-4, rtol=1e-3)
    blocked = blocked_row(last, list(range(model.n_heads)), target)
    assert (fedge - blocked).abs().max() > 1e-3  # layer L's attention does carry some of it
    torch.testing.assert_close(fedge - floads[last].sum(0), blocked, atol=1e-4, rtol=1e-3)

    # `at` counts from the end like Python indexing; a position outside the prompt is refused
    torch.testing.assert_close(
        head_loadings(model, tc, g, row, batch_size=8, at=-1),
        head_loadings(model, tc, g, row, batch_size=8, at=g.n_pos - 1),
    )
    for bad in (g.n_pos, -g.n_pos - 1):
        with pytest.raises(ValueError, match="outside the prompt"):
            head_loadings(model, tc, g, row, at=bad)


def test_decoders_rebuilt_per_batch_give_the_same_graph(monkeypatch):
    """Past the cache budget the padded decoders are rebuilt for every batch: the same graph."""
    import circuits.graph.replacement as replacement

    model = make_model("llama")
    tc = random_transcoders(model.n_layers, model.d_model, 32, "clt", seed=8, threshold=0.3)
    cached = attribute(model, tc, PROMPT, batch_size=8)
    monkeypatch.setattr(replacement, "DECODER_CACHE_BYTES", 0)
    rebuilt = attribute(model, tc, PROMPT, batch_size=8)
    torch.testing.assert_close(rebuilt.adjacency, cached.adjacency)
