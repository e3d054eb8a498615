"""EAP and EAP-IG against exact edge patching and a hand-computed integrated gradient, on tiny models."""

import pytest
import torch
from torch import nn

import interp
from circuits.evaluation.edge_patching import patched_metric
from circuits.finders.eap import eap, eap_ig, scores_from_circuit
from circuits.format.circuit import Circuit
from circuits.format.edge_circuit import circuit_mask
from circuits.model.residual_graph import EdgeGraph
from circuits.tasks.pairs import PairBatch
from interp.data import byte_tokenizer
from tests.tiny import tiny_hf


def pairs(n=6, length=7, seed=0, vocab=257) -> PairBatch:
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(3, vocab, (n, length), generator=g)
    corrupt = clean.clone()
    corrupt[:, 1] = torch.randint(3, vocab, (n,), generator=g)  # change one token, keep the rest
    corrupt[:, 3] = torch.randint(3, vocab, (n,), generator=g)
    mask = torch.ones_like(clean)
    pos = torch.full((n,), length - 1)
    ans = torch.randint(3, vocab, (n, 1), generator=g)
    wrong = torch.randint(3, vocab, (n, 1), generator=g)
    one = torch.ones(n, 1)
    return PairBatch(clean, mask, pos, corrupt, mask.clone(), pos.clone(), ans, one, wrong, one.clone(), aligned=True)


class LinearRMSNorm(nn.Module):
    """An identity standing in for a norm (named so the core's norm hook points accept it; never hooked here)."""

    eps = 1e-6

    def forward(self, x):
        return x


def linear_toy(parallel: bool) -> interp.HookedModel:
    """A GPT-NeoX whose logits are linear in its input embeddings: identity norms, a linear MLP activation,
    and zero query weights (uniform attention whatever the input)."""
    hf = tiny_hf("gpt_neox" if parallel else "gpt_neox_seq", hidden_act="linear")
    hf = type(hf)(hf.config).eval()  # rebuild so the activation takes effect
    for layer in hf.gpt_neox.layers:
        layer.input_layernorm = LinearRMSNorm()
        layer.post_attention_layernorm = LinearRMSNorm()
        with torch.no_grad():
            W = layer.attention.query_key_value.weight.view(4, 3, 16, 64)
            W[:, 0] = 0
            layer.attention.query_key_value.bias.view(4, 3, 16)[:, 0] = 0
    hf.gpt_neox.final_layer_norm = LinearRMSNorm()
    with torch.no_grad():  # no norms: give the residual a useful scale
        hf.gpt_neox.embed_in.weight.mul_(100)
    return interp.HookedModel(hf, byte_tokenizer())


def one_edge_effects(model, batch, graph, edges):
    clean = patched_metric(model, batch, graph.valid, "logit-diff", "corrupt", graph=graph)["metric"].mean()
    out = []
    for u, d in edges:
        keep = graph.valid.clone()
        keep[u, d] = False
        out.append(
            float(patched_metric(model, batch, keep, "logit-diff", "corrupt", graph=graph)["metric"].mean() - clean)
        )
    return torch.tensor(out)


@pytest.mark.parametrize("parallel", [False, True])
def test_eap_is_exact_on_a_linear_toy(parallel):
    model = linear_toy(parallel)
    batch = pairs()
    s = eap(model, batch)
    graph = s.graph
    edges = torch.nonzero(graph.valid).tolist()
    assert s.info["forwards"] == 2 and s.info["backwards"] == 1  # one batch: two forwards, one backward
    effects = one_edge_effects(model, batch, graph, edges)
    est = torch.tensor([float(s.scores[u, d]) for u, d in edges])
    top = float(effects.abs().max())
    assert top > 1e-4 and (effects.abs() > 0.01 * top).sum() > 10  # something to compare
    torch.testing.assert_close(est / top, effects / top, atol=1e-4, rtol=1e-3)


def near_pairs(model, eps: float, n=6, length=7, seed=1) -> PairBatch:
    """Pairs whose corrupted tokens (t + 100) have embeddings eps away from the clean ones (t), so the
    corruption, and every activation difference, shrinks with eps."""
    g = torch.Generator().manual_seed(seed)
    emb = model.hf_model.get_input_embeddings().weight
    with torch.no_grad():
        emb[103:200] = emb[3:100] + eps * torch.randn(97, emb.shape[1], generator=g) * emb[3:100].std()
    clean = torch.randint(3, 100, (n, length), generator=g)
    corrupt = clean.clone()
    corrupt[:, 1:5] += 100
    b = pairs(n, length, seed)
    return PairBatch(
        clean,
        b.clean_mask,
        b.clean_pos,
        corrupt,
        b.corrupt_mask,
        b.corrupt_pos,
        b.answers % 97 + 3,
        b.answer_w,
        b.wrongs % 97 + 3,
        b.wrong_w,
        aligned=True,
    )


def test_eap_matches_patching_of_each_edge_to_first_order_on_a_real_tiny_model():
    model = interp.HookedModel(tiny_hf("llama", tie_word_embeddings=False), byte_tokenizer())
    errors = []
    for eps in (0.2, 0.02):
        batch = near_pairs(model, eps)
        s = eap(model, batch)
        edges = torch.nonzero(s.graph.valid).tolist()
        effects = one_edge_effects(model, batch, s.graph, edges)
        est = torch.tensor([float(s.scores[u, d]) for u, d in edges])
        errors.append(float((est - effects).abs().max() / effects.abs().max()))
    # the relative error of the first-order estimate falls with the size of the corruption (about linearly)
    assert errors[1] < 0.05 and errors[1] < errors[0] / 3, errors


def test_eap_ig_is_closer_than_eap_to_patching_for_a_large_corruption():
    model = interp.HookedModel(tiny_hf("llama"), byte_tokenizer())
    batch = pairs(seed=1)
    s, ig = eap(model, batch), eap_ig(model, batch, steps=4)
    edges = torch.nonzero(s.graph.valid).tolist()
    effects = one_edge_effects(model, batch, s.graph, edges)
    corr = [
        float(torch.corrcoef(torch.stack([torch.tensor([float(x.scores[u, d]) for u, d in edges]), effects]))[0, 1])
        for x in (s, ig)
    ]
    assert corr[1] > 0.95 and corr[1] > corr[0], corr


def test_edge_patching_endpoints_are_the_clean_and_corrupted_runs():
    model = interp.HookedModel(tiny_hf("gpt2"), byte_tokenizer())
    batch = pairs(seed=2)
    graph = EdgeGraph.of(model)
    from circuits.tasks.metrics import metric_rows

    with torch.no_grad():
        clean = metric_rows(model({"input_ids": batch.clean}), batch, "logit-diff")
        corrupt = metric_rows(model({"input_ids": batch.corrupt}), batch, "logit-diff")
    full = patched_metric(model, batch, graph.valid, "logit-diff", "corrupt")["metric"]
    empty = patched_metric(model, batch, torch.zeros_like(graph.valid), "logit-diff", "corrupt")["metric"]
    torch.testing.assert_close(full, clean, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(empty, corrupt, atol=1e-4, rtol=1e-4)


def test_eap_ig_converges_to_the_integrated_gradient_computed_by_hand():
    model = interp.HookedModel(tiny_hf("llama", seed=3), byte_tokenizer())
    batch = pairs(seed=3)
    from circuits.finders.eap import _weights, run_upstream
    from circuits.tasks.metrics import metric_rows

    graph = EdgeGraph.of(model)
    lw = _weights(model)
    up_c, e_c, _ = run_upstream(model, graph, batch.clean, batch.clean_mask, lw)
    up_k, e_k, _ = run_upstream(model, graph, batch.corrupt, batch.corrupt_mask, lw)
    # by hand: a fine Riemann sum of d metric / d (final residual) along the embedding path
    n = 256
    total = 0
    last = f"blocks.{model.n_layers - 1}.hook_resid_post"
    for i in range(n):
        a = (i + 0.5) / n
        emb = (e_k + a * (e_c - e_k)).detach().requires_grad_(True)
        with model.hooks(fwd_hooks=[("hook_embed", lambda t, h: emb)]):  # noqa: B023
            _, _, grads = model.run_with_grads(
                batch.clean, last, lambda lg, ids, m: metric_rows(lg, batch, "logit-diff").sum()
            )
        total = total + grads[last]
    ref = torch.einsum("bpud,bpd->u", up_k - up_c, total / n) / len(batch)
    errors = []
    for k in (1, 2, 4, 16):
        s = eap_ig(model, batch, steps=k)
        assert s.info["forwards"] == 2 + k and s.info["backwards"] == k
        errors.append(float((s.scores[:, graph.logits_down] - ref).abs().max()))
    assert errors[-1] < 0.05 * float(ref.abs().max()) + 1e-5
    assert errors[-1] < errors[0]


def test_edge_circuit_round_trip(tmp_path):
    model = interp.HookedModel(tiny_hf("llama"), byte_tokenizer())
    s = eap(model, pairs())
    c = s.to_circuit(top_n=10, provenance={"task": "toy"})
    assert c.metrics["n_edges"] == 10 and len(c.edges) == 10
    path = c.save(tmp_path / "c.json")
    back = Circuit.load(path)
    assert torch.equal(circuit_mask(back), s.top_mask(10))
    torch.testing.assert_close(scores_from_circuit(back).scores, s.scores, rtol=1e-5, atol=1e-8)
    kinds = {n.kind for n in back.nodes}
    assert kinds <= {"embed", "head", "kv", "mlp", "logits"}
    with pytest.raises(ValueError, match="exactly one"):
        s.to_circuit()


def test_graph_size_matches_the_eap_ig_paper_for_gpt2_small():
    g = EdgeGraph(n_layers=12, n_heads=12, n_kv=12, parallel=False, qkv=True)
    assert g.n_edges == 32_491


def test_head_sets_become_the_edges_among_them():
    from circuits.evaluation.faithfulness import head_edges, minimal_size

    g = EdgeGraph(n_layers=2, n_heads=4, n_kv=2, parallel=False)
    all_heads = {(layer, h) for layer in range(2) for h in range(4)}
    assert torch.equal(head_edges(g, all_heads), g.valid)
    none = head_edges(g, set())
    assert not none[[g.head_up(0, h) for h in range(4)]].any() and not none[:, g.attn_down(1)].any()
    assert none[0, g.mlp_down(0)] and none[g.mlp_up(0), g.logits_down]
    one = head_edges(g, {(1, 3)})  # query head 3 of layer 1 and its key/value head (group 1) are kept
    kept_down = {g.downstream[d] for d in torch.nonzero(one.any(0))[:, 0].tolist()}
    assert (
        {"a1.h3<q>", "a1.kv1<k>", "a1.kv1<v>"} <= kept_down
        and "a1.h2<q>" not in kept_down
        and "a1.kv0<k>" not in kept_down
    )
    assert minimal_size([{"n_edges": 10, "faithfulness": 0.5}, {"n_edges": 30, "faithfulness": 0.85}], 0.8) == 30
