"""One smoke run of each method family on a tiny random model of every decoder-only family (issue 36).

Per family: an activation-patching sweep, edge attribution patching (EAP) on a clean/corrupt prompt pair, a
cache -> `ActivationStore` -> SAE run, and EK-FAC training-data attribution. Each run checks shapes and finite
values, plus one identity that fails when a family's hook points or weights are read wrong. EAP refuses, with a
clear error, the families whose residual stream it cannot decompose (`EAP_REFUSED`).
"""

import importlib

import pytest
import torch

import interp
from attribution.influence import HeadComponent, fit_ekfac, influence_scores, lm_loss, mean_gradient
from circuits.evaluation.edge_patching import patched_metric
from circuits.finders.eap import eap
from circuits.tasks.metrics import metric_rows
from circuits.tasks.pairs import encode_pairs
from interp.cache.caching import CacheConfig, cache_activations
from interp.data import byte_tokenizer
from interp.patching import activation_patching
from sae.train import TrainConfig, train_sae
from tests.tiny import FAMILIES, tiny_family

EAP_REFUSED = {
    # attention and MLP outputs pass through a norm before the residual: no edge is a plain sum of outputs
    "gemma2": "sandwich norms",
    "gemma3_text": "sandwich norms",
    "olmo2": "sandwich norms",
    # EAP maps each MLP's input gradient through its one input projection (mlp.hook_pre, W_in)
    "mixtral": "mixture of experts",
    "qwen3_moe": "mixture of experts",
    "olmoe": "mixture of experts",
}
assert set(EAP_REFUSED) <= set(FAMILIES)

# IOI-like pairs of equal byte length; the corrupted prompt swaps the repeated name, last token included, so
# the input embedding differs where the metric is read.
ROWS = [
    {"clean": "When Mary met John, Mary", "corrupt": "When Mary met John, John", "answer": "!", "wrong": "?"},
    {"clean": "When Anna saw Bill, Anna", "corrupt": "When Anna saw Bill, Bill", "answer": "!", "wrong": "?"},
]
HOOKS = ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def models():
    """family -> its tiny HookedModel, built once for the module (no method leaves a change in it)."""
    built = {}

    def get(family):
        if family not in built:
            built[family] = interp.HookedModel(tiny_family(family), byte_tokenizer())
        return built[family]

    return get


def _metric(logits):
    return (logits[:, -1, 5] - logits[:, -1, 7]).mean()


@pytest.mark.parametrize("family", FAMILIES)
def test_activation_patching_sweep(models, family):
    model = models(family)
    clean = torch.randint(3, 256, (2, 8), generator=torch.Generator().manual_seed(0))
    corrupted = clean.clone()
    corrupted[:, 2] = (corrupted[:, 2] + 7) % 256  # one token changed
    res = activation_patching(model, clean, corrupted, "resid_pre", metric=_metric)
    assert res.dims == ("layer", "pos") and res.values.shape == (model.n_layers, 8)
    assert torch.isfinite(res.values).all()
    gap = abs(res.clean - res.baseline)
    assert gap > 2e-5, (res.clean, res.baseline)  # the corruption moves the metric: the checks below can fail
    tol = 1e-2 * gap + 1e-7
    # block 0's input differs only at the changed token: patching it there is the clean run, elsewhere nothing
    assert abs(res.values[0, 2].item() - res.clean) < tol
    others = res.values[0, [p for p in range(8) if p != 2]]
    assert (others - res.baseline).abs().max().item() < tol
    # the last block's output at every position carries all the logits read
    last = activation_patching(model, clean, corrupted, "resid_post", metric=_metric, layers=[-1], per="layer")
    assert last.values.shape == (1,) and abs(last.values.item() - res.clean) < tol


@pytest.mark.parametrize("family", FAMILIES)
def test_eap(models, family):
    model = models(family)
    batch = encode_pairs(model.tokenizer, ROWS)
    if family in EAP_REFUSED:
        with pytest.raises(ValueError, match=f"edge attribution .*{family} .*{EAP_REFUSED[family]}"):
            eap(model, batch)
        return
    s = eap(model, batch)
    graph = s.graph
    n_up, n_down = 1 + 2 * (model.n_heads + 1), 2 * (model.n_heads + 2 * model.n_kv_heads + 1) + 1
    assert s.scores.shape == (n_up, n_down) == (len(graph.upstream), len(graph.downstream))
    assert s.info["n_edges"] == graph.n_edges == int(graph.valid.sum())
    assert torch.isfinite(s.scores).all() and s.scores[graph.valid].abs().sum() > 0
    assert (s.scores[~graph.valid] == 0).all()
    # The logits node reads the final residual, the sum of every upstream output: its edge scores add up to
    # (final residual, corrupted - clean) . d metric / d (final residual) at the clean run.
    last = f"blocks.{model.n_layers - 1}.hook_resid_post"
    _, corrupt = model.run_with_cache({"input_ids": batch.corrupt, "attention_mask": batch.corrupt_mask}, names=last)
    _, clean, grads = model.run_with_grads(
        {"input_ids": batch.clean, "attention_mask": batch.clean_mask},
        last,
        lambda logits, ids, mask: metric_rows(logits, batch, "logit-diff").sum(),
    )
    expected = ((corrupt[last] - clean[last]) * grads[last]).sum().item() / len(batch)
    got = s.scores[:, graph.logits_down].sum().item()
    assert abs(got - expected) < 1e-4 * abs(expected) + 1e-7, (got, expected)
    # exact edge patching on the same graph: all edges kept is the clean run, none kept the corrupted run
    with torch.no_grad():
        want = {k: metric_rows(model({"input_ids": ids}), batch, "logit-diff") for k, ids in
                (("clean", batch.clean), ("corrupt", batch.corrupt))}  # fmt: skip
    for keep, ref in ((graph.valid, want["clean"]), (torch.zeros_like(graph.valid), want["corrupt"])):
        torch.testing.assert_close(patched_metric(model, batch, keep)["metric"], ref, atol=1e-5, rtol=1e-4)


def _adapter_serves(path: str, family: str) -> bool:
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    return family in module.ADAPTER.model_types


@pytest.mark.parametrize("family", FAMILIES)
def test_sae_on_a_cached_store(models, family, tmp_path):
    model = models(family)
    cfg = CacheConfig(
        out=str(tmp_path / "store"),
        model=f"tiny-{family}",
        hooks=HOOKS,
        data="synthetic:repeat",
        ctx_len=16,
        max_tokens=512,
        seqs_per_shard=16,
        batch_size=8,
        executor="inprocess",
    )
    store, report = cache_activations(cfg, model=model, progress=False)
    assert report["tokens"] == len(store) == 512 and report["shards"] == 2
    assert store.meta.hooks == {h: [model.d_model] for h in HOOKS}
    parity = store.meta.extra["parity"]
    assert parity["model_type"] == family and parity["logits_max_abs_diff"] == 0.0
    assert parity["adapter"].startswith("interp/adapters/") and _adapter_serves(parity["adapter"], family)
    assert parity["hooks"] == {HOOKS[0]: 0.0, HOOKS[1]: None}  # the last block's output has no HF hidden state
    fvu = {}
    for steps in (1, 24):
        tc = TrainConfig(
            arch="topk",
            d_sae=32,
            k=4,
            hook=HOOKS[1],
            total_tokens=128 * steps,
            batch_size=128,
            lr=3e-3,
            exclude="none",
        )
        sae, rep = train_sae(store, tc, tmp_path / f"sae{steps}", progress=False)
        assert rep["steps"] == steps and rep["d_in"] == model.d_model
        assert all(torch.isfinite(torch.tensor(v)) for v in rep["final_losses"].values())
        assert all(torch.isfinite(p).all() for p in sae.parameters())
        fvu[steps] = rep["eval"]["fvu"]
    assert fvu[24] < 0.95 * fvu[1], fvu  # training reduces the reconstruction error on the store's rows


@pytest.mark.parametrize("family", FAMILIES)
def test_ekfac_influence(models, family):
    model = models(family)
    g = torch.Generator().manual_seed(0)
    comp = HeadComponent(1, 1, "qkvo")
    factors = fit_ekfac(model, comp, torch.randint(3, 256, (4, 10), generator=g), batch_size=4)
    query = torch.randint(3, 256, (1, 10), generator=g)
    probe = mean_gradient(model, comp, query, lm_loss)
    assert set(probe) == {"qk", "v", "o"}
    for k, p in probe.items():
        assert factors.q_a[k].shape == (p.shape[1], p.shape[1]) and factors.q_s[k].shape == (p.shape[0], p.shape[0])
    train = torch.cat([torch.randint(3, 256, (3, 10), generator=g), query])  # the query itself is the last row
    scores, losses = influence_scores(model, factors, train, probe)
    assert scores.shape == losses.shape == (4,)
    assert torch.isfinite(scores).all() and torch.isfinite(losses).all()
    with torch.no_grad():  # the losses are the bare HF model's (summed over the 9 predicted tokens)
        ref = torch.stack([model.hf_model(input_ids=x[None], labels=x[None]).loss * 9 for x in train])
    torch.testing.assert_close(losses, ref, rtol=1e-4, atol=1e-4)
    # -grad L(q)^T H^-1 grad L(q) < 0: training on the query itself lowers its loss, more than any other row here
    assert scores[-1] < 0 and scores[-1] == scores.min(), scores
