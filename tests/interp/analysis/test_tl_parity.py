"""The analysis hooks and cache analyses against TransformerLens on the same weights (1e-4 relative)."""

import pytest
import torch

from tests.interp.analysis.helpers import ids, rel, wrap

NEW_HOOKS = ["ln1.hook_scale", "ln1.hook_normalized", "ln2.hook_scale", "ln2.hook_normalized", "attn.hook_result"]


@pytest.fixture(scope="module", params=["gpt_neox", "gpt_neox_seq", "llama"])
def pair(request):
    model = wrap(request.param)
    tl = model.to_transformer_lens()
    tl.set_use_attn_result(True)
    x = ids()
    with torch.no_grad():
        _, ours = model.run_with_cache(x, names=lambda n: True)  # everything, on-demand points included
        _, theirs = tl.run_with_cache(x)
    return model, ours, theirs


def test_norm_and_head_result_hooks_match(pair):
    model, ours, theirs = pair
    names = [f"blocks.{l}.{h}" for l in range(model.n_layers) for h in NEW_HOOKS]
    names += ["ln_final.hook_scale", "ln_final.hook_normalized"]
    for name in names:
        assert ours[name].shape == theirs[name].shape, name
        assert rel(ours[name], theirs[name]) < 1e-4, name


@pytest.mark.parametrize("apply_ln", [False, True])
@pytest.mark.parametrize("layer", [None, 1, -2])
def test_accumulated_and_decomposed_resid_match(pair, apply_ln, layer):
    model, ours, theirs = pair
    mid = "resid_mid" in str(list(theirs.keys()))
    a, la = ours.accumulated_resid(layer, incl_mid=mid, apply_ln=apply_ln, pos_slice=-1, return_labels=True)
    tl_layer = {None: None, 1: 1, -2: model.n_layers - 1}[layer]  # TL has no negative layers below -1
    b, lb = theirs.accumulated_resid(tl_layer, incl_mid=mid, apply_ln=apply_ln, pos_slice=-1, return_labels=True)
    assert la == lb and rel(a, b) < 1e-4
    a, la = ours.decompose_resid(layer, apply_ln=apply_ln, return_labels=True)
    b, lb = theirs.decompose_resid(tl_layer, apply_ln=apply_ln, return_labels=True)
    assert la == lb and rel(a, b) < 1e-4


def test_stack_head_results_and_apply_ln_match(pair):
    model, ours, theirs = pair
    a, la = ours.stack_head_results(-1, incl_remainder=True, pos_slice=(2, 7), apply_ln=True, return_labels=True)
    b, lb = theirs.stack_head_results(-1, incl_remainder=True, pos_slice=(2, 7), apply_ln=True, return_labels=True)
    assert la == lb and rel(a, b) < 1e-4
    stack = ours.decompose_resid(1, mlp_input=True)
    assert (
        rel(ours.apply_ln_to_stack(stack, 1, mlp_input=True), theirs.apply_ln_to_stack(stack, 1, mlp_input=True)) < 1e-4
    )


@pytest.mark.parametrize("arch", ["gpt_neox", "llama"])
def test_logit_attrs_match_a_folded_transformer_lens_model(arch):
    """Our DLA folds the final norm's weight into the directions itself: TL's numbers on a fold_ln model."""
    model = wrap(arch)
    tl = model.to_transformer_lens()
    tl.process_weights_(fold_ln=True, center_writing_weights=False, center_unembed=False)
    x = ids()
    with torch.no_grad():
        _, ours = model.run_with_cache(x)
        _, theirs = tl.run_with_cache(x)
    right, wrong = x[:, 2], x[:, 4]
    a = ours.logit_attrs(ours.decompose_resid(pos_slice=-1), right, incorrect_tokens=wrong, pos_slice=-1)
    b = theirs.logit_attrs(theirs.decompose_resid(pos_slice=-1), right, incorrect_tokens=wrong, pos_slice=-1)
    assert rel(a, b) < 1e-4
