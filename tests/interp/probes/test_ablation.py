import pytest
import torch

from interp.probes import MassiveCriterion, massive_ablations, perplexity, streaming_test
from interp.probes.ablation import calibration_means
from tests.interp.probes.conftest import PLANT_CHANNEL, PLANT_HOOKS, PLANT_LAYER, PLANT_POS, SPIKE, no_hooks_left


def planted_ablations(tiny, tokens):
    """Ablations of the planted model: the planting hook runs before the ablation hook at the same layer."""
    crit = MassiveCriterion()
    with tiny.hooks(PLANT_HOOKS):
        return massive_ablations(
            tiny, tokens[6:], PLANT_LAYER, crit, calib_tokens=tokens[:6], massive_channels=[PLANT_CHANNEL], batch_size=4
        )


def test_zero_vs_mean_move_perplexity_as_expected(tiny, tokens):
    clean = perplexity(tiny, tokens[6:])["ppl"]
    res = planted_ablations(tiny, tokens)
    planted = res["original"]["ppl"]
    assert abs(planted - clean) / clean > 1e-3  # the spike matters to this model
    # zero removes the spike: back to the unplanted model (the entry was ~0 before the spike)
    assert res["zero"]["ppl"] == pytest.approx(clean, rel=1e-3)
    # mean puts back the (constant) spike: the planted model's perplexity is kept
    assert res["mean"]["ppl"] == pytest.approx(planted, rel=1e-4)
    assert abs(res["zero"]["ppl"] - planted) > 10 * abs(res["mean"]["ppl"] - planted)
    # the control zeroes one random non-massive channel at the spike's position: small next to zeroing the spike
    assert abs(res["random"]["ppl"] - planted) < abs(res["zero"]["ppl"] - planted)
    assert res["original"]["n_tokens"] == tokens[6:, 1:].numel()
    assert no_hooks_left(tiny)


def test_calibration_means_split_start_and_other(tiny, tokens):
    with tiny.hooks(PLANT_HOOKS):
        means = calibration_means(tiny, tokens[:6], PLANT_LAYER, MassiveCriterion())
    assert set(means["other"]) == {PLANT_CHANNEL} and not means["start_massive"]
    assert means["other"][PLANT_CHANNEL] == pytest.approx(SPIKE, rel=1e-3)
    assert means["start"].shape == (tiny.d_model,)
    assert PLANT_POS != 0


def test_perplexity_skips_padding(tiny, tokens):
    mask = torch.ones_like(tokens[:4])
    mask[:, 12:] = 0
    padded = tokens[:4].clone()
    padded[:, 12:] = 0
    a = perplexity(tiny, padded, mask)
    b = perplexity(tiny, tokens[:4, :12])
    assert a["n_tokens"] == b["n_tokens"] == 4 * 11
    assert a["ppl"] == pytest.approx(b["ppl"], rel=1e-5)


def test_hooks_removed_after_error(tiny, tokens):
    def boom(h, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        perplexity(tiny, tokens[:2], fwd_hooks=[("blocks.0.hook_resid_post", boom)])
    assert no_hooks_left(tiny)


def test_streaming_window_full_equals_full_attention(tiny, tokens):
    # a window as long as the sequence changes nothing
    full = perplexity(tiny, tokens[:4], min_position=8)
    res = streaming_test(tiny, tokens[:4], window=8, sinks=(0, 2))
    assert res["full"]["ppl"] == pytest.approx(full["ppl"])
    assert res["window+0sink"]["n_tokens"] == res["full"]["n_tokens"] == 4 * (24 - 8)
    assert res["window+0sink"]["ppl"] != res["full"]["ppl"]
    with pytest.raises(ValueError, match="window"):
        streaming_test(tiny, tokens[:4], window=24)
    assert no_hooks_left(tiny)
