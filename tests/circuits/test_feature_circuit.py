"""Feature circuits over dictionary latents: the splice, node scores against exact patching, edges, faithfulness."""

import json

import pytest
import torch

import interp
from circuits.evaluation.feature_faithfulness import Ablator, exact_node_effect, feature_curve, keep_of
from circuits.finders.feature_circuit import (
    FeatureScores,
    _eap_grads,
    _records,
    codes_of,
    feature_scores,
    run_spliced,
)
from circuits.model.dictionary import dashboard_pages, load_dictionary, random_dictionary
from circuits.tasks.binary import get_task
from circuits.tasks.metrics import metric_rows
from interp.data import byte_tokenizer
from tests.tiny import tiny_hf

HOOKS = [f"blocks.{i}.hook_resid_post" for i in range(3)]


@pytest.fixture(scope="module")
def setup():
    model = interp.HookedModel(tiny_hf("llama", num_hidden_layers=3), byte_tokenizer())
    dicts = [random_dictionary(64, 128, h, seed=i) for i, h in enumerate(HOOKS)]
    batch = get_task("quotes").make_pairs(8, 0, model.tokenizer)
    return model, dicts, batch


@pytest.fixture(scope="module")
def eap_scores(setup):
    model, dicts, batch = setup
    return feature_scores(model, dicts, batch, method="eap", top_n=4)


def test_splice_with_error_nodes_leaves_the_logits(setup):
    model, dicts, batch = setup
    topk = [random_dictionary(64, 128, h, seed=7, k=8) for h in HOOKS]
    with torch.no_grad():
        plain = model({"input_ids": batch.clean, "attention_mask": batch.clean_mask})
        for ds in (dicts, topk):
            rec: dict = {}
            spliced = run_spliced(model, ds, batch.clean, batch.clean_mask, record=rec)
            assert (plain - spliced).abs().max() < 1e-5
            f, err = rec[HOOKS[1]]
            # the dictionary is far from perfect, so the error node carries real signal (the test is not vacuous)
            assert err.norm() > 0.1 * (err + ds[1].decode(f)).norm()
            assert (f != 0).any()


def test_eap_scores_match_exact_latent_patching_to_first_order(setup, eap_scores):
    """Moving one node alpha of the way to its corrupted value changes the metric by alpha x its EAP score
    (small alpha: first order is exact); hook 0 sits below two later splices, so this checks the straight-through
    gradient too. The error node (index d_sae) is checked the same way."""
    model, dicts, batch = setup
    alpha = 1e-3
    for hook in HOOKS[:2]:
        for i in eap_scores.top_per_hook(hook, 3) + [128]:
            exact = exact_node_effect(model, dicts, batch, hook, i, alpha=alpha) / alpha
            est = float(eap_scores.scores[hook][i])
            assert abs(est) > 1e-4
            assert exact == pytest.approx(est, rel=2e-2, abs=1e-5), (hook, i)


def test_eap_ig_per_hook_scores_sum_to_patching_the_whole_hook(setup):
    """Integrated gradients along the straight line from clean to corrupted nodes of one hook are complete:
    their sum over the hook's latents and error node is the effect of patching all of them (the corrupted run)."""
    model, dicts, batch = setup
    ig = feature_scores(model, dicts, batch, method="eap-ig", ig_steps=16, edges=False)
    ab = Ablator(model, dicts, batch, "logit-diff", "corrupt")
    full = ab.metric(ab.all_nodes(True))
    for h in HOOKS:
        keep = ab.all_nodes(True)
        keep[h][:] = False
        effect = ab.metric(keep) - full
        assert abs(effect) > 1e-3
        assert float(ig.scores[h].sum()) == pytest.approx(effect, rel=2e-2)


def test_edge_scores_match_a_finite_difference():
    """e(u -> d) = the change of d's attribution sum_pos dm/dd . d when u moves alpha towards its corrupted value,
    divided by alpha (small alpha; float64, since the error nodes are large and the differences small)."""
    model = interp.HookedModel(tiny_hf("llama", num_hidden_layers=3).double(), byte_tokenizer())
    dicts = [random_dictionary(64, 128, h, seed=i).to(torch.float64) for i, h in enumerate(HOOKS)]
    batch = get_task("quotes").make_pairs(8, 0, model.tokenizer)
    eap_scores = feature_scores(model, dicts, batch, method="eap", top_n=4)
    a, b = HOOKS[0], HOOKS[1]
    edges = [e for e in eap_scores.edges if e["up"]["hook"] == a and e["down"]["hook"] == b]
    assert len(edges) == 16  # top 4 x top 4
    clean, corrupt, _ = _records(model, dicts, batch)
    grads = _eap_grads(model, dicts, batch, "logit-diff", None)
    alpha = 1e-3
    for e in sorted(edges, key=lambda e: -abs(e["score"]))[:6]:  # error nodes included at either end
        u, j = e["up"]["latent"], e["down"]["latent"]
        rec: dict = {}

        def edit(hook, f, err, u=u):
            if hook == a and u == "error":
                err = err + alpha * (corrupt[a][1] - err)
            elif hook == a:
                f = f.clone()
                f[..., u] += alpha * (corrupt[a][0][..., u] - f[..., u])
            return f, err

        with torch.no_grad():
            run_spliced(model, dicts, batch.clean, batch.clean_mask, edit=edit, record=rec)
        if j == "error":
            change = (grads[b][1] * (rec[b][1] - clean[b][1])).sum()
        else:
            change = (grads[b][0][..., j] * (rec[b][0][..., j] - clean[b][0][..., j])).sum()
        assert abs(e["score"]) > 1e-4
        assert float(change) / len(batch) / alpha == pytest.approx(e["score"], rel=1e-2, abs=1e-7), (u, j)


def test_faithfulness_endpoints_and_curve(setup, eap_scores):
    model, dicts, batch = setup
    n_all = 3 * 129
    curve = feature_curve(model, dicts, batch, eap_scores, [1, 10, n_all], seeds=2)
    assert curve["points"][-1]["faithfulness"] == pytest.approx(1.0, abs=1e-4)
    assert [len(r["runs"]) for r in curve["random"]] == [2, 2, 2]
    with torch.no_grad():
        corrupt = metric_rows(
            model({"input_ids": batch.corrupt, "attention_mask": batch.corrupt_mask}), batch, "logit-diff"
        )
        clean = metric_rows(model({"input_ids": batch.clean, "attention_mask": batch.clean_mask}), batch, "logit-diff")
    # everything ablated from the corrupted run is the corrupted run; everything kept is the model
    assert curve["ablated_metric"] == pytest.approx(float(corrupt.mean()), abs=1e-4)
    assert curve["full_metric"] == pytest.approx(float(clean.mean()), abs=1e-4)
    mean = feature_curve(model, dicts, batch, eap_scores, [n_all], ablation="mean", seeds=1)
    assert mean["points"][0]["faithfulness"] == pytest.approx(1.0, abs=1e-4)
    # error nodes always kept: every latent kept is the whole model too
    keep = feature_curve(model, dicts, batch, eap_scores, [3 * 128], errors="keep", seeds=1)
    assert keep["points"][0]["faithfulness"] == pytest.approx(1.0, abs=1e-4)
    k = keep_of(dicts, [(HOOKS[0], 3)], "ablate")
    assert bool(k[HOOKS[0]][3]) and not bool(k[HOOKS[0]][-1]) and int(k[HOOKS[1]].sum()) == 0


def test_json_nodes_link_their_dashboard_pages(tmp_path):
    dash = tmp_path / "dash"
    (dash / "features").mkdir(parents=True)
    (dash / "dashboard.json").write_text(json.dumps({"pages": [3, 5]}))
    pages = dashboard_pages(dash)
    assert pages == {3: str(dash / "features" / "3.html"), 5: str(dash / "features" / "5.html")}
    s = FeatureScores(["h"], {"h": torch.tensor([0.0, 0.1, 0.0, -2.0, 0.5, 0.0, 1.0])}, "eap", "logit-diff")
    out = s.to_json({"h": pages}, top=3)
    assert [n["latent"] for n in out["nodes"]] == [3, "error", 4]
    assert out["nodes"][0]["page"].endswith("features/3.html") and "page" not in out["nodes"][2]
    assert s.top(2, errors="ablate") == [("h", 3), ("h", 4)]
    with pytest.raises(FileNotFoundError, match="dashboard.json"):
        dashboard_pages(tmp_path)


def test_bad_dictionaries_are_refused(setup, tmp_path):
    model, dicts, batch = setup
    with pytest.raises(ValueError, match="blocks.9.hook_resid_post"):
        feature_scores(model, [random_dictionary(64, 8, "blocks.9.hook_resid_post")], batch)
    with pytest.raises(ValueError, match="reads 32 channels"):
        feature_scores(model, [random_dictionary(32, 8, HOOKS[0])], batch)
    with pytest.raises(ValueError, match="two dictionaries"):
        feature_scores(model, [dicts[0], dicts[0]], batch)
    (tmp_path / "cfg.json").write_text(json.dumps({"architecture": "poly_batchtopk"}))
    with pytest.raises(ValueError, match="PolySAE"):
        load_dictionary(tmp_path)
    with pytest.raises(FileNotFoundError, match="cfg.json"):
        load_dictionary(tmp_path / "nothing")


def test_sae_lens_folders_load_behind_the_protocol(tmp_path):
    from sae_lens import TopKSAE, TopKSAEConfig

    torch.manual_seed(0)
    sae = TopKSAE(TopKSAEConfig(d_in=16, d_sae=32, k=4))
    sae.cfg.metadata.hook_name = "blocks.1.hook_resid_post"
    with torch.no_grad():
        for p in sae.parameters():
            p.add_(0.1 * torch.randn_like(p))
    sae.save_model(tmp_path)
    d = load_dictionary(tmp_path)
    assert d.hook == "blocks.1.hook_resid_post" and d.d_sae == 32
    x = torch.randn(2, 5, 16)
    f, err = codes_of(d, x)
    assert f.shape == (2, 5, 32) and int((f[0, 0] != 0).sum()) <= 4
    assert torch.allclose(f.reshape(10, 32), sae.encode(x.reshape(10, 16)))
    assert torch.allclose(d.decode(f) + err, x, atol=1e-6)


def test_cli_quick(tmp_path):
    from typer.testing import CliRunner

    from circuits.cli import app

    r = CliRunner().invoke(app, ["features", "--quick", "--out", str(tmp_path), "--sizes", "1,10,100"])
    assert r.exit_code == 0, r.output
    out = json.loads((tmp_path / "feature_circuit.json").read_text())
    assert out["hooks"] == [f"blocks.{i}.hook_resid_post" for i in range(3)]
    assert len(out["edges"]) == 2 * 20 * 20 and {"up", "down", "score"} <= set(out["edges"][0])
    assert [p["n"] for p in out["curve"]["points"]] == [1, 10, 100]
    assert "random latents" in (tmp_path / "curve.md").read_text()
    bad = CliRunner().invoke(app, ["features", "--out", str(tmp_path / "x"), "--task", "ioi", "--model", "nothing"])
    assert bad.exit_code == 2 and "--sae" in bad.output


def test_curve_reports_the_error_nodes_alone_and_the_latents_without_them(setup, eap_scores):
    """Whatever the error-node rule, the curve states the error nodes' share: the error nodes alone, and the top
    latents with every error node kept and with every error node ablated (the latents-only curve)."""
    model, dicts, batch = setup
    curve = feature_curve(model, dicts, batch, eap_scores, [5, 3 * 128], seeds=1)
    ab = Ablator(model, dicts, batch, "logit-diff", "corrupt")
    full, empty = ab.metric(ab.all_nodes(True)), ab.metric(ab.all_nodes(False))
    only_errors = ab.metric(keep_of(dicts, [], "keep"))
    assert curve["error_only"]["faithfulness"] == pytest.approx((only_errors - empty) / (full - empty), abs=1e-5)
    assert curve["error_share"]["error_only"] == curve["error_only"]["faithfulness"]
    every = curve["points"][-1]  # every latent: with the errors kept, the whole model
    assert every["errors_kept"] == pytest.approx(1.0, abs=1e-4)
    latents = keep_of(dicts, eap_scores.top(5, "ablate"), "ablate")
    assert curve["points"][0]["latents_only"] == pytest.approx((ab.metric(latents) - empty) / (full - empty), abs=1e-5)
    for rule, key in (("keep", "errors_kept"), ("ablate", "latents_only")):  # the rule's own curve is that column
        other = feature_curve(model, dicts, batch, eap_scores, [5], errors=rule, seeds=1)
        assert other["points"][0]["faithfulness"] == pytest.approx(curve["points"][0][key], abs=1e-5)
