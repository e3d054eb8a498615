import pytest
import torch

import interp
from interp.contrib.faithfulness.verbalization import (
    LinearInverter,
    choose_answer,
    embed_patch_hook,
    fit_linear_map,
    follow_rates,
    privileged_information_score,
)
from tests.tiny import tiny_hf


def test_fit_linear_map_recovers_affine_map():
    torch.manual_seed(0)
    x = torch.randn(50, 4)
    w, b = torch.randn(4, 3), torch.randn(3)
    w_hat, b_hat = fit_linear_map(x, x @ w + b, ridge=1e-9)
    torch.testing.assert_close(w_hat, w, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(b_hat, b, atol=1e-4, rtol=1e-4)


def test_inverter_on_separable_codes():
    codes = torch.eye(5) * 3
    ids = torch.tensor([10, 11, 12, 13, 14])
    inv = LinearInverter.fit(codes.repeat(4, 1) + 0.01 * torch.randn(20, 5), ids.repeat(4))
    assert torch.equal(inv.invert(codes), ids)


def test_embed_patch_changes_only_the_slot_and_matches_inputs_embeds():
    hf = tiny_hf("llama")
    model = interp.HookedModel(hf)
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    vec = torch.randn(2, 64)
    with model.hooks(fwd_hooks=[("hook_embed", embed_patch_hook(torch.tensor([1, 2]), vec))]):
        patched = model(ids)
    emb = hf.get_input_embeddings()(ids).detach().clone()
    emb[0, 1], emb[1, 2] = vec[0], vec[1]
    ref = hf(inputs_embeds=emb).logits
    torch.testing.assert_close(patched, ref, atol=1e-5, rtol=1e-5)
    # positions before the slot are untouched (causal model)
    torch.testing.assert_close(patched[0, 0], model(ids)[0, 0])


def test_choose_answer_zero_shot_and_patched():
    model = interp.HookedModel(tiny_hf("llama"))
    ids = torch.tensor([[5, 6, 7]])
    logits = model(ids)[0, -1]
    cands = [20, 30, 40]
    assert choose_answer(model, ids, cands).item() == cands[int(logits[cands].argmax())]
    out = choose_answer(model, ids, cands, patch=(torch.tensor([1]), torch.zeros(1, 64)))
    assert out.item() in cands


def test_follow_rates_and_score():
    r = follow_rates(torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 0, 0]), torch.tensor([0, 2, 3, 0]))
    assert r == {"follows_target": 0.5, "follows_verbalizer": 0.5, "neither": 0.25}
    assert privileged_information_score(0.8, 0.5, 0.7) == pytest.approx(0.1)


def test_bad_input():
    with pytest.raises(ValueError, match="control accuracy"):
        privileged_information_score(0.5)
    with pytest.raises(ValueError, match="same n"):
        fit_linear_map(torch.zeros(3, 2), torch.zeros(4, 2))
    model = interp.HookedModel(tiny_hf("llama"))
    with pytest.raises(ValueError, match="adapter"):
        with model.hooks(fwd_hooks=[("hook_embed", embed_patch_hook(torch.tensor([0]), torch.zeros(1, 7)))]):
            model(torch.tensor([[1, 2]]))
