"""Activation patching that starts each run from the cached residual: equal to the from-the-embeddings reference
and to TransformerLens's `patching.get_act_patch_*` on TL's bridge over the same weights (1e-5)."""

import pytest
import torch
import transformer_lens.patching as tlp

from interp.patching import activation_patching
from tests.interp.analysis.helpers import ids, wrap

TL_SWEEPS = {  # our (kind, per) -> TL's function
    ("resid_pre", "pos"): tlp.get_act_patch_resid_pre,
    ("attn_out", "pos"): tlp.get_act_patch_attn_out,
    ("mlp_out", "pos"): tlp.get_act_patch_mlp_out,
    ("z", "head"): tlp.get_act_patch_attn_head_out_all_pos,
    ("z", "pos_head"): tlp.get_act_patch_attn_head_out_by_pos,
    ("pattern", "head"): tlp.get_act_patch_attn_head_pattern_all_pos,
}


def pair(batch=1, pos=9):
    clean = ids(batch, pos, seed=3)
    corrupted = clean.clone()
    corrupted[:, 2] = (corrupted[:, 2] + 11) % 256
    return clean, corrupted


def metric(logits):
    return (logits[:, -1, 5] - logits[:, -1, 7]).mean()


@pytest.mark.parametrize("arch", ["llama", "gpt_neox", "gpt2", "gemma3"])
@pytest.mark.parametrize("kind,per", [("resid_pre", "pos"), ("resid_post", "pos"), ("z", "pos_head"), ("v", "head")])
def test_starting_from_the_cached_residual_changes_no_number(arch, kind, per):
    extra = {"layer_types": ["sliding_attention", "sliding_attention", "full_attention"]} if arch == "gemma3" else {}
    model = wrap(arch, num_hidden_layers=3, **extra)
    clean, corrupted = pair(2)
    fast = activation_patching(model, clean, corrupted, kind, metric=metric, per=per)
    slow = activation_patching(model, clean, corrupted, kind, metric=metric, per=per, start_from_cache=False)
    assert fast.values.shape == slow.values.shape
    assert (fast.values - slow.values).abs().max().item() < 1e-5


@pytest.fixture(scope="module", params=["llama", "gpt_neox_seq"])
def with_bridge(request):
    model = wrap(request.param, num_hidden_layers=3)
    return model, model.to_transformer_bridge()


@pytest.mark.parametrize("kind,per", list(TL_SWEEPS))
def test_sweeps_equal_transformer_lens(with_bridge, kind, per):
    model, bridge = with_bridge
    clean, corrupted = pair()
    ours = activation_patching(model, clean, corrupted, kind, metric=metric, per=per)
    with torch.no_grad():
        _, clean_cache = bridge.run_with_cache(clean)
        theirs = TL_SWEEPS[kind, per](bridge, corrupted, clean_cache, metric)
    assert ours.values.shape == theirs.shape
    assert (ours.values - theirs).abs().max().item() < 1e-5


def test_fwd_hooks_before_the_patched_layer_still_act():
    """A caller's hook in block 0 shapes the residual every later run starts from."""
    model = wrap("llama", num_hidden_layers=3)
    clean, corrupted = pair(2)

    def damp(resid, hook):
        return resid * 0.5

    hooks = [("blocks.0.hook_resid_post", damp)]
    fast = activation_patching(model, clean, corrupted, "resid_pre", metric=metric, layers=[2], fwd_hooks=hooks)
    slow = activation_patching(
        model, clean, corrupted, "resid_pre", metric=metric, layers=[2], fwd_hooks=hooks, start_from_cache=False
    )
    plain = activation_patching(model, clean, corrupted, "resid_pre", metric=metric, layers=[2])
    assert (fast.values - slow.values).abs().max().item() < 1e-5
    assert (fast.values - plain.values).abs().max().item() > 1e-4
