import pytest
import torch

import interp
from interp.data import byte_tokenizer
from interp.probes import MassiveCriterion, PatternsNotCapturedError, SinkScanner, perplexity, probe_scan
from interp.probes.ablation import massive_ablation_hook
from tests.tiny import tiny_hf


def test_patterns_not_captured():
    model = interp.HookedModel(tiny_hf("llama", seed=0), byte_tokenizer())
    model.hf_model.config._attn_implementation = "sdpa"  # switched away from the hooked attention after wrapping
    with pytest.raises(PatternsNotCapturedError, match=r"layers \[0, 1\].*sdpa"):
        probe_scan(model, torch.randint(0, 256, (2, 8)), progress=False)


def test_not_a_hooked_model():
    with pytest.raises(TypeError, match="HookedModel"):
        probe_scan(tiny_hf("llama"), torch.randint(0, 256, (2, 8)), progress=False)


def test_empty_corpus(tiny):
    for empty in (torch.zeros(0, 16, dtype=torch.long), torch.zeros(3, 1, dtype=torch.long)):
        with pytest.raises(ValueError, match="empty corpus"):
            probe_scan(tiny, empty, progress=False)
        with pytest.raises(ValueError, match="empty corpus"):
            perplexity(tiny, empty)


@pytest.mark.parametrize("kw", [{"abs_threshold": -1.0}, {"ratio_threshold": -5}, {"ratio_threshold": float("nan")}])
def test_negative_threshold(kw):
    with pytest.raises(ValueError, match=">= 0"):
        MassiveCriterion(**kw)


def test_bad_eps_and_mode():
    with pytest.raises(ValueError, match="eps"):
        SinkScanner(2, 2, eps=-0.3)
    with pytest.raises(ValueError, match="unknown ablation mode"):
        massive_ablation_hook("half", MassiveCriterion())
    with pytest.raises(ValueError, match="calibration means"):
        massive_ablation_hook("mean", MassiveCriterion())


def test_bos_rows(tiny):
    from interp.probes.report import load_rows

    rows = load_rows(tiny, "stdlib-docs", 16, 6, seed=0, bos=True).tokens
    assert rows.shape == (6, 16) and (rows[:, 0] == tiny.tokenizer.bos_token_id).all()
    plain = load_rows(tiny, "stdlib-docs", 16, 6, seed=0).tokens
    assert torch.equal(rows[:, 1:], plain[:, 1:])
    no_bos = interp.HookedModel(tiny.hf_model, byte_tokenizer())
    no_bos.tokenizer.bos_token = None
    with pytest.raises(ValueError, match="no BOS token"):
        load_rows(no_bos, "stdlib-docs", 16, 6, seed=0, bos=True)
