import pytest
import torch

from interp.probes import MassiveCriterion, massive_mask, probe_scan, sequence_medians
from tests.interp.probes.conftest import PLANT_CHANNEL, PLANT_HOOKS, PLANT_LAYER, PLANT_POS, no_hooks_left


def test_planted_spike_is_found_exactly(tiny, tokens):
    res = probe_scan(tiny, tokens, fwd_hooks=PLANT_HOOKS, progress=False)["massive"]
    found = res["massive"]
    # one entry per sequence and layer, from the planted layer to the last one
    assert found["first_layer"] == PLANT_LAYER
    assert found["layers"] == list(range(PLANT_LAYER, tiny.n_layers))
    assert found["channels"] == {str(PLANT_CHANNEL): tokens.shape[0] * (tiny.n_layers - PLANT_LAYER)}
    assert found["positions"] == {str(PLANT_POS): tokens.shape[0] * (tiny.n_layers - PLANT_LAYER)}
    expected_tokens = {tiny.tokenizer.decode([int(t)]) for t in tokens[:, PLANT_POS]}
    assert set(found["tokens"]) == expected_tokens
    for layer in res["layers"]:
        assert (layer["n_massive"] > 0) == (layer["layer"] >= PLANT_LAYER)
        if layer["layer"] >= PLANT_LAYER:
            assert layer["top"][0]["channel"] == PLANT_CHANNEL and layer["top"][0]["pos"] == PLANT_POS
            assert layer["ratio"] > 1000
    # the spike is the same in every sequence: constant across inputs
    assert all(c["cv"] < 0.01 for c in found["constancy"] if c["position"] == "other")
    assert no_hooks_left(tiny)


def test_unplanted_model_has_none(tiny, tokens):
    res = probe_scan(tiny, tokens, progress=False)["massive"]
    assert res["massive"]["n_entries"] == 0
    assert all(layer["n_massive"] == 0 for layer in res["layers"])
    assert max(layer["max_abs"] for layer in res["layers"]) < 100


def test_ratio_only_criterion_reports_small_models():
    h = torch.full((1, 4, 8), 0.01)
    h[0, 0, 3] = 50.0  # 5000x the median, under the absolute threshold of 100
    massive, by_ratio, med = massive_mask(h, None, MassiveCriterion())
    assert not massive.any()
    assert by_ratio.nonzero().tolist() == [[0, 0, 3]]
    assert med.tolist() == pytest.approx([0.01])


def test_median_is_fp32_and_skips_padding():
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(3, 5, 7, generator=gen).to(torch.bfloat16)
    valid = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    med = sequence_medians(h.float().abs(), valid)
    assert med.dtype == torch.float32
    for b in range(3):
        assert float(med[b]) == float(h[b][valid[b]].float().abs().median())
    full = sequence_medians(h.float().abs(), torch.ones(3, 5, dtype=torch.bool))
    assert torch.equal(full, h.float().abs().flatten(1).median(dim=1).values)
