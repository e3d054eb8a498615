"""Head detectors, induction, composition scores and OV/QK spectra against TransformerLens on the same weights."""

import pytest
import torch
from transformer_lens.head_detector import detect_head as tl_detect_head

from interp.analysis import (
    HEAD_NAMES,
    OV_eigenvalues,
    OV_singular_values,
    QK_singular_values,
    composition_scores,
    copying_scores,
    detect_head,
    induction_scores,
    repeated_random_tokens,
)
from tests.interp.analysis.helpers import wrap

TEXT = "abcab abcab xyab"


@pytest.fixture(scope="module", params=["llama", "gpt_neox"])
def pair(request):
    model = wrap(request.param, num_hidden_layers=3)
    return model, model.to_transformer_bridge()


@pytest.mark.parametrize("name", HEAD_NAMES)
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"exclude_bos": True, "exclude_current_token": True},
        {"error_measure": "abs"},
        {"error_measure": "abs", "exclude_bos": True},
    ],
)
def test_named_detectors_equal_transformer_lens(pair, name, options):
    model, bridge = pair
    ours = detect_head(model, TEXT, name, **options)
    theirs = tl_detect_head(bridge, TEXT, name, **options)
    assert ours.shape == (model.n_layers, model.n_heads)
    assert torch.allclose(ours, theirs.float(), atol=1e-5)


def test_custom_pattern_heads_subset_and_text_lists(pair):
    model, bridge = pair
    n = model.to_tokens(TEXT).shape[-1]
    custom = torch.ones(n, n).tril()
    custom[:, 0] = 0  # "anything but the first token"
    heads = [(0, 1), (2, 3)]
    ours = detect_head(model, TEXT, custom, heads=heads)
    assert torch.allclose(ours, tl_detect_head(bridge, TEXT, custom, heads=heads).float(), atol=1e-5)
    assert (ours == -1).sum() == model.n_layers * model.n_heads - 2
    texts = [TEXT, "hello hello"]
    assert torch.allclose(
        detect_head(model, texts, "duplicate_token_head"),
        tl_detect_head(bridge, texts, "duplicate_token_head").float(),
        atol=1e-5,
    )
    with pytest.raises(ValueError, match="lower triangular"):
        detect_head(model, TEXT, torch.ones(n, n))


def test_induction_scores_follow_the_main_demo(pair):
    model, bridge = pair
    tokens = repeated_random_tokens(model, 10, batch=2, seed=1, bos=True)
    assert tokens.shape == (2, 21) and torch.equal(tokens[:, 1:11], tokens[:, 11:])
    ours = induction_scores(model, tokens=tokens)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(tokens)
    ref = torch.stack(
        [
            cache["pattern", layer].diagonal(offset=1 - 10, dim1=-2, dim2=-1).mean((0, -1))
            for layer in range(model.n_layers)
        ]
    )
    assert torch.allclose(ours, ref, atol=1e-6)
    assert induction_scores(model, seq_len=8, batch=2).shape == (model.n_layers, model.n_heads)


@pytest.mark.parametrize("arch", ["llama", "gpt_neox"])
@pytest.mark.parametrize("mode", ["Q", "K", "V"])
def test_composition_scores_equal_transformer_lens(arch, mode):
    model = wrap(arch, num_hidden_layers=3)
    theirs = model.to_transformer_lens().all_composition_scores(mode)
    ours = composition_scores(model, mode, chunk=5)  # a chunk that does not divide the head count
    assert ours.shape == theirs.shape == (3, 4, 3, 4)
    assert torch.allclose(ours, theirs.float(), atol=1e-5)
    assert (ours[2] == 0).all() and (ours[:, :, 0] == 0).all()


def test_spectra_equal_the_factored_matrices():
    model = wrap("llama", num_hidden_layers=3)
    ov, qk = model.OV, model.QK  # TL FactoredMatrix objects
    assert torch.allclose(OV_singular_values(model), ov.S, atol=1e-5)
    assert torch.allclose(QK_singular_values(model), qk.S, atol=1e-5)
    ours = OV_eigenvalues(model)
    theirs = ov.eigenvalues
    key = lambda e: torch.sort(e.real * 1e3 + e.imag, dim=-1).values  # noqa: E731
    assert torch.allclose(key(ours), key(theirs), atol=1e-3)
    scores = copying_scores(model)
    assert scores.shape == (3, 4) and (scores.abs() <= 1 + 1e-6).all()
