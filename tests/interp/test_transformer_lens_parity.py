"""Our cache against TransformerLens's `run_with_cache` on the same weights (TL built offline from them)."""

import pytest
import torch

import interp
from interp.data import byte_tokenizer
from tests.tiny import tiny_hf

COMPARED = [
    "hook_resid_pre",
    "hook_resid_mid",
    "hook_resid_post",
    "attn.hook_pattern",
    "attn.hook_q",
    "attn.hook_k",
    "attn.hook_v",
    "attn.hook_z",
    "hook_attn_out",
    "mlp.hook_pre",
    "mlp.hook_post",
    "hook_mlp_out",
]


def compare(model, x):
    tl = model.to_transformer_lens()
    with torch.no_grad():
        logits, ours = model.run_with_cache(x)
        tl_logits, theirs = tl.run_with_cache(x)
    assert ((logits - tl_logits).norm() / tl_logits.norm()).item() < 1e-4
    checked = 0
    for name, t in ours.items():
        if name.split(".", 2)[-1] in COMPARED and name in theirs.cache_dict:
            ref = theirs[name]
            assert ((t - ref).norm() / ref.norm()).item() < 1e-4, name
            checked += 1
    return checked


@pytest.mark.parametrize("arch", ["gpt_neox", "gpt_neox_seq", "llama", "gpt2"])
def test_tiny_models_match_transformer_lens(arch):
    model = interp.HookedModel(tiny_hf(arch), byte_tokenizer())
    checked = compare(model, torch.randint(0, 256, (2, 17)))
    per_layer = 11 if arch == "gpt_neox" else 12  # a parallel residual has no resid_mid
    assert checked == per_layer * model.n_layers


def test_pythia_14m_matches_transformer_lens():
    model = interp.load_model("pythia-14m-init")
    assert compare(model, torch.randint(0, 50000, (2, 33))) == 11 * model.n_layers


def test_gemma3_has_no_offline_transformer_lens_route():
    model = interp.HookedModel(tiny_hf("gemma3"), byte_tokenizer())
    with pytest.raises(NotImplementedError, match="gpt_neox"):
        model.to_transformer_lens()
