"""TransformerLens idioms, written as TL's Main Demo and Exploratory Analysis Demo write them, run verbatim on
our model and on TL's `TransformerBridge` over the same weights: the answers must agree."""

import pytest
import torch

from tests.interp.analysis.helpers import wrap

PROMPT = "Hello world, hello"
CFG_FIELDS = [
    "n_layers",
    "d_model",
    "n_heads",
    "d_head",
    "d_mlp",
    "d_vocab",
    "d_vocab_out",
    "n_ctx",
    "act_fn",
    "normalization_type",
    "positional_embedding_type",
    "n_key_value_heads",
    "gated_mlp",
    "parallel_attn_mlp",
    "eps",
    "final_rms",
    "attn_only",
]


def hook_layers(model):
    seen = []

    def hook_fn(act, hook):
        seen.append(hook.layer())

    model.run_with_hooks(PROMPT, fwd_hooks=[(lambda name: name.endswith("hook_resid_post"), hook_fn)])
    return seen


def head_results(model):
    _, cache = model.run_with_cache(PROMPT)
    cache.compute_head_results()
    return cache["result", 1]


IDIOMS = {
    "to_tokens": lambda model: model.to_tokens(PROMPT),
    "model(tokens)": lambda model: model(model.to_tokens(PROMPT)),
    "cfg": lambda model: [getattr(model.cfg, f) for f in CFG_FIELDS],
    "loss": lambda model: model(PROMPT, return_type="loss"),
    "loss_per_token": lambda model: model(PROMPT, return_type="loss", loss_per_token=True),
    "both": lambda model: model(PROMPT, return_type="both")[1],
    "return_type None": lambda model: model(PROMPT, return_type=None),
    "stop_at_layer": lambda model: model(PROMPT, stop_at_layer=1),
    "stop_at_layer -1": lambda model: model(PROMPT, stop_at_layer=-1),
    "hook.layer()": hook_layers,
    "remove_batch_dim": lambda model: model.run_with_cache(PROMPT, remove_batch_dim=True)[1]["pattern", 0],
    "run_with_cache loss": lambda model: model.run_with_cache(PROMPT, return_type="loss")[0],
    "get_full_resid_decomposition": lambda model: model.run_with_cache(PROMPT)[1].get_full_resid_decomposition(
        expand_neurons=False, return_labels=True
    ),
    "get_full_resid_decomposition neurons": lambda model: model.run_with_cache(PROMPT)[1].get_full_resid_decomposition(
        layer=1, pos_slice=-1, return_labels=True
    ),
    "compute_head_results": head_results,
    "stack_neuron_results": lambda model: model.run_with_cache(PROMPT)[1].stack_neuron_results(
        -1, pos_slice=-1, return_labels=True
    ),
    "stack_activation": lambda model: model.run_with_cache(PROMPT)[1].stack_activation("resid_post"),
    "accumulated_resid": lambda model: model.run_with_cache(PROMPT)[1].accumulated_resid(
        layer=-1, incl_mid=True, pos_slice=-1, return_labels=True
    ),
    "generate": lambda model: model.generate(PROMPT, max_new_tokens=5, do_sample=False, verbose=False),
    "generate tokens": lambda model: model.generate(
        model.to_tokens(PROMPT), max_new_tokens=5, do_sample=False, verbose=False
    ),
    "generate without cache": lambda model: model.generate(
        PROMPT, max_new_tokens=4, do_sample=False, use_past_kv_cache=False, stop_at_eos=False, verbose=False
    ),
    "to_str_tokens": lambda model: model.to_str_tokens(PROMPT),
    # The IOI exercises' and Exploratory demo's idioms (issue 41)
    "blocks[l].attn.W_*": lambda model: [getattr(model.blocks[1].attn, w) for w in ("W_Q", "W_K", "W_V", "W_O")],
    "blocks[l].mlp.W_*": lambda model: [getattr(model.blocks[0].mlp, w) for w in ("W_in", "W_out")],
    "cache['attn', l]": lambda model: model.run_with_cache(PROMPT)[1]["attn", 1],
    "get_token_position": lambda model: [
        model.get_token_position("l", PROMPT),
        model.get_token_position("l", PROMPT, mode="last"),
        model.get_token_position(model.to_single_token("o"), model.to_tokens(PROMPT)),
    ],
    "to_string 0-d": lambda model: model.to_string(model.to_tokens(PROMPT)[0, 3]),
    "add_hook / reset_hooks": lambda model: _persistent_hooks(model),
    "set_use_attn_result": lambda model: _attn_result(model),
    "utils.test_prompt": lambda model: _test_prompt(model),
    "transformer_lens.patching": lambda model: _tl_patching(model),
}


def _tl_patching(model):
    """The Activation Patching demo's calls: TL's own `patching` functions, handed our model."""
    from transformer_lens import patching

    clean, corrupted = model.to_tokens(PROMPT), model.to_tokens("Hallo world, hello")
    _, clean_cache = model.run_with_cache(clean)

    def metric(logits):
        return logits[0, -1, 100] - logits[0, -1, 101]

    calls = ("get_act_patch_resid_pre", "get_act_patch_attn_out", "get_act_patch_attn_head_out_all_pos")
    return [getattr(patching, f)(model, corrupted, clean_cache, metric) for f in calls]


def _persistent_hooks(model):
    """The IOI exercises' pattern: add_hook, run, reset_hooks, run again."""

    def zero_head_0(z, hook):
        z[:, :, 0] = 0.0
        return z

    model.reset_hooks()
    model.add_hook("blocks.1.attn.hook_z", zero_head_0)
    ablated = model(PROMPT)
    _, cached = model.run_with_cache(PROMPT, names_filter="blocks.1.attn.hook_z")
    model.reset_hooks()
    return [ablated, cached["blocks.1.attn.hook_z"][:, :, 0], model(PROMPT)]


def _attn_result(model):
    model.set_use_attn_result(True)
    try:
        _, cache = model.run_with_cache(PROMPT)
        return cache["result", 1]
    finally:
        model.set_use_attn_result(False)


def _test_prompt(model):
    import contextlib
    import io

    from transformer_lens import utils

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        utils.test_prompt("Hello world, hel", "l", model, prepend_space_to_answer=False, print_details=True)
    return out.getvalue()


def assert_same(ours, theirs, where):
    if isinstance(ours, torch.Tensor):
        assert isinstance(theirs, torch.Tensor) and ours.shape == theirs.shape, where
        assert torch.allclose(ours.float(), theirs.float(), atol=1e-5, rtol=1e-4), where
    elif isinstance(ours, (tuple, list)):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, where


@pytest.fixture(scope="module", params=["llama", "gpt_neox_seq"])
def pair(request):
    model = wrap(request.param)
    return model, model.to_transformer_bridge()


@pytest.mark.parametrize("idiom", list(IDIOMS))
def test_idiom_gives_what_the_bridge_gives(pair, idiom):
    model, bridge = pair
    with torch.no_grad():
        assert_same(IDIOMS[idiom](model), IDIOMS[idiom](bridge), idiom)


def test_persistent_hooks_come_off_and_refuse_unknown_names(pair):
    model, _ = pair
    base = model(PROMPT)
    model.add_hook("blocks.0.hook_resid_post", lambda t, hook: t * 0, is_permanent=True)
    model.add_hook("blocks.0.hook_attn_out", lambda t, hook: t * 2)
    model.reset_hooks()  # the permanent one stays
    assert not torch.allclose(model(PROMPT), base)
    model.reset_hooks(including_permanent=True)
    assert torch.equal(model(PROMPT), base)
    with pytest.raises(ValueError, match="unknown hook name"):
        model.add_hook("blocks.0.hook_nothing", lambda t, hook: t)
    with pytest.raises(NotImplementedError, match="equals patching blocks.L.attn.hook_q"):
        model.set_use_split_qkv_input(True)


def test_what_the_bridge_lacks_and_ours_keeps(pair):
    model, _ = pair
    with torch.no_grad():
        logits = model(PROMPT)
        resid = model(PROMPT, stop_at_layer=1)
        assert torch.allclose(model(resid, start_at_layer=1), logits, atol=1e-6)  # the bridge refuses start_at_layer
        tokens, mask = model.to_tokens(["Hi", "Hello"], return_mask=True)
        assert tokens.shape == mask.shape == (2, 5) and mask[0].tolist() == [1, 1, 0, 0, 0]
    assert isinstance(model.cfg.n_layers, int) and model.cfg.to_dict()["d_model"] == model.d_model
    with pytest.raises(AttributeError):
        model.cfg.n_layers = 3  # a read-only view
    assert not model.loss(PROMPT).requires_grad and model.loss(PROMPT, grad=True).requires_grad
