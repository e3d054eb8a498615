"""Exact identities of the residual-stream analyses on every architecture, and the new hook points' edits."""

import pytest
import torch

import interp
from tests.interp.analysis.helpers import ids, rel, wrap
from tests.tiny import ARCHS


@pytest.fixture(scope="module", params=ARCHS)
def run(request):
    model = wrap(request.param)
    x = ids()
    with torch.no_grad():
        logits, cache = model.run_with_cache(x)
    return model, x, logits, cache


def test_decomposition_sums_to_the_residual(run):
    model, _, _, cache = run
    for layer in range(model.n_layers + 1):
        parts = cache.decompose_resid(layer)
        want = cache["resid_post", -1] if layer == model.n_layers else cache["resid_pre", layer]
        assert rel(parts.sum(0), want) < 1e-4
    heads = cache.stack_head_results(incl_remainder=True)
    assert rel(heads.sum(0), cache["resid_post", -1]) < 1e-4
    assert heads.shape[0] == model.n_layers * model.n_heads + 1


def test_logit_lens_at_the_last_layer_equals_the_logits(run):
    model, _, logits, cache = run
    lens = cache.accumulated_resid(apply_ln=True) @ model.W_U + model.b_U
    assert lens.shape[0] == model.n_layers + 1
    assert (lens[-1] - logits).abs().max().item() < 1e-4


def test_dla_sums_to_the_logit_difference_exactly_with_the_frozen_scale(run):
    model, x, logits, cache = run
    right, wrong = x[:, 3], x[:, 5]
    parts = cache.decompose_resid(pos_slice=-1)
    dla = cache.logit_attrs(parts, right, incorrect_tokens=wrong, pos_slice=-1)
    diff = logits[:, -1].gather(1, right[:, None])[:, 0] - logits[:, -1].gather(1, wrong[:, None])[:, 0]
    assert dla.shape == (parts.shape[0], 2)
    assert (dla.sum(0) + cache.logit_attr_bias(right, wrong) - diff).abs().max().item() < 1e-4
    heads = cache.stack_head_results(pos_slice=-1, incl_remainder=True)
    by_head = cache.logit_attrs(heads, right, incorrect_tokens=wrong, pos_slice=-1)
    assert (by_head.sum(0) + cache.logit_attr_bias(right, wrong) - diff).abs().max().item() < 1e-4


def test_negative_layers_and_tl_keys(run):
    model, _, _, cache = run
    last = model.n_layers - 1
    assert torch.equal(cache["resid_post", -1], cache[f"blocks.{last}.hook_resid_post"])
    assert torch.equal(cache["scale", -1, "ln1"], cache[f"blocks.{last}.ln1.hook_scale"])
    assert torch.equal(cache["scale", None, "ln_final"], cache["ln_final.hook_scale"])
    assert torch.equal(cache.accumulated_resid(-2), cache.accumulated_resid(last))
    with pytest.raises(KeyError, match="out of range"):
        cache["resid_post", -model.n_layers - 1]
    with pytest.raises(ValueError, match="out of range"):
        cache.accumulated_resid(model.n_layers + 1)


def test_names_filter_is_an_alias_and_head_results_are_on_demand():
    model = wrap("llama")
    _, a = model.run_with_cache(ids(), names_filter="blocks.*.hook_resid_post")
    _, b = model.run_with_cache(ids(), names="blocks.*.hook_resid_post")
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(TypeError, match="not both"):
        model.run_with_cache(ids(), names="hook_embed", names_filter="hook_embed")
    _, everything = model.run_with_cache(ids())
    assert "blocks.0.attn.hook_result" not in everything
    _, res = model.run_with_cache(ids(), names="blocks.0.attn.hook_result")
    assert res["result", 0].shape == (2, 12, model.n_heads, model.d_model)


@pytest.mark.parametrize("arch", ["llama", "gpt_neox", "gpt2"])
def test_editing_a_head_result_equals_editing_its_z(arch):
    model, head = wrap(arch), 2

    def zero_result(r, hook):
        r = r.clone()
        r[:, :, head] = 0
        return r

    def zero_z(z, hook):
        z = z.clone()
        z[:, :, head] = 0
        return z

    a = model.run_with_hooks(ids(), [("blocks.1.attn.hook_result", zero_result)])
    b = model.run_with_hooks(ids(), [("blocks.1.attn.hook_z", zero_z)])
    assert rel(a, b) < 1e-5 and not torch.allclose(a, model(ids()))


@pytest.mark.parametrize("arch", ARCHS)
def test_scale_hooks_recompute_the_norm(arch):
    model = wrap(arch)
    base = model(ids())
    same = model.run_with_hooks(ids(), [("blocks.*.ln*.hook_scale", lambda s, hook: s.clone())])
    assert rel(same, base) < 1e-5  # handing the scale back recomputes the norm: same numbers
    _, cache = model.run_with_cache(ids(), names=["blocks.1.ln1.hook_scale", "blocks.1.ln1.hook_normalized"])
    doubled = {}

    def double(s, hook):
        return s * 2

    def grab(n, hook):
        doubled["n"] = n

    model.run_with_hooks(ids(), [("blocks.1.ln1.hook_scale", double), ("blocks.1.ln1.hook_normalized", grab)])
    assert rel(doubled["n"], cache["blocks.1.ln1.hook_normalized"]) < 1e-6  # normalized reads the input again
    changed = model.run_with_hooks(ids(), [("blocks.1.ln1.hook_scale", double)])
    assert not torch.allclose(changed, base)


def test_gradients_reach_derived_hooks():
    model = wrap("llama")
    _, acts, grads = model.run_with_grads(ids(), names=["ln_final.hook_scale", "blocks.0.attn.hook_result"])
    assert grads["ln_final.hook_scale"].shape == acts["ln_final.hook_scale"].shape
    assert grads["blocks.0.attn.hook_result"].abs().sum() > 0


def test_analyses_need_the_model():
    cache = interp.ActivationCache({"blocks.0.hook_resid_pre": torch.zeros(1, 2, 4)})
    with pytest.raises(ValueError, match="run_with_cache"):
        cache.accumulated_resid()
    with pytest.raises(KeyError, match="no model"):
        cache["resid_pre", -1]
