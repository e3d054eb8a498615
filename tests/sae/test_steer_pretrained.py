"""Steering / ablation / splicing contexts, pretrained loading checks, Coh's summed loss."""

import math

import pytest
import torch

import interp
import sae as S
from sae import make_sae
from sae.coherence import coh_loss, coh_normalised
from tests.tiny import tiny_hf

HOOK = "blocks.0.hook_resid_post"


def _model():
    return interp.HookedModel(tiny_hf("llama"), interp.data.byte_tokenizer())


def _sae(model, arch="topk", **kw):
    s = make_sae(arch, model.d_model, 4 * model.d_model, seed=0, k=4, **kw)
    s.cfg.metadata.hook_name = HOOK
    return S.to_inference(s)


def test_steer_adds_the_direction_and_lasts_only_inside_the_context():
    model = _model()
    s = _sae(model)
    ids = torch.randint(0, 257, (2, 10), generator=torch.Generator().manual_seed(0))
    seen = {}

    def grab(t, hook):
        seen["x"] = t.clone()
        return t

    with model.hooks(fwd_hooks=[(HOOK, grab)]):
        model(ids)
    clean = seen["x"]
    with S.steer(model, s, {3: 2.0}, pairs={(1, 5): 0.5}) as v:
        with model.hooks(fwd_hooks=[(HOOK, grab)]):
            model(ids)
    D = S.metrics.decoder_directions(s)
    assert torch.allclose(v, 2.0 * D[3] + 0.5 * (D[1] + D[5]), atol=1e-6)
    assert torch.allclose(seen["x"] - clean, v.expand_as(clean), atol=1e-5)
    with model.hooks(fwd_hooks=[(HOOK, grab)]):
        model(ids)
    assert torch.allclose(seen["x"], clean)  # gone after the context
    with S.steer(model, s, {3: 2.0}):  # works during (KV-cached) generation
        out = model.hf_model.generate(ids[:1], max_new_tokens=3, do_sample=False)
    assert out.shape[1] == 13


def test_ablating_no_latent_changes_nothing_and_splicing_the_identity_neither():
    model = _model()
    s = _sae(model)
    ids = torch.randint(0, 257, (2, 10), generator=torch.Generator().manual_seed(1))
    clean = model(ids)
    with S.ablate(model, s, []):
        assert torch.allclose(model(ids), clean, atol=1e-5)
    with S.ablate(model, s, range(s.cfg.d_sae)):
        assert not torch.allclose(model(ids), clean, atol=1e-3)
    with S.spliced(model, s, keep_error=True):
        assert torch.allclose(model(ids), clean, atol=1e-4)
    with S.spliced(model, s):
        assert not torch.allclose(model(ids), clean, atol=1e-3)


def test_from_pretrained_checks_hook_and_width(tmp_path):
    model = _model()
    s = make_sae("topk", model.d_model, 32, seed=0, k=4)
    s.cfg.metadata.hook_name = HOOK
    s.save_model(tmp_path / "ok")
    assert S.from_pretrained(tmp_path / "ok", model=model).cfg.d_in == model.d_model
    bad_hook = make_sae("topk", model.d_model, 32, seed=0, k=4)
    bad_hook.cfg.metadata.hook_name = "blocks.99.hook_resid_post"
    bad_hook.save_model(tmp_path / "hook")
    with pytest.raises(ValueError, match="not a hook point"):
        S.from_pretrained(tmp_path / "hook", model=model)
    wide = make_sae("topk", model.d_model + 3, 32, seed=0, k=4)
    wide.cfg.metadata.hook_name = HOOK
    wide.save_model(tmp_path / "wide")
    with pytest.raises(ValueError, match="d_in"):
        S.from_pretrained(tmp_path / "wide", model=model)
    with pytest.raises(ValueError, match="trained on"):
        S.from_pretrained(tmp_path / "ok", model=model, hook="blocks.1.hook_resid_post")
    with pytest.raises(FileNotFoundError, match="not available offline"):
        S.from_pretrained("no-such-release", "layer_0")


def test_coh_summed_loss_matches_a_hand_computed_case():
    M = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0], [1.0, 1.0, 0.0]])
    t = coh_normalised(M)
    k_r, k_c = math.ceil(0.5 * 4), math.ceil(2 / 3 * 3)
    h = lambda x: (x - 0.01).clamp_min(0)  # noqa: E731
    by_hand = sum(
        h(t[n]).topk(k).values.sum() for n, k in (("var_r", k_r), ("cov_r", k_r), ("var_c", k_c), ("cov_c", k_c))
    )
    got = coh_loss(M, tau=0.01, row_frac=0.5, col_frac=2 / 3)
    assert torch.allclose(got, by_hand)
    mean = coh_loss(M, tau=0.01, row_frac=0.5, col_frac=2 / 3, reduction="mean")
    assert not torch.allclose(got, mean) and float(got) > float(mean)
