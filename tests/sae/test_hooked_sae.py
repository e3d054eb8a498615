"""sae-lens's HookedSAETransformer surface: the same numbers as sae-lens's SAETransformerBridge on the same
weights, SAE points as hook points, and gradients through the splice checked by finite differences."""

import dataclasses

import pytest
import torch

import interp
import sae as S
from sae import ARCHS, make_sae
from sae.hooked_sae import HookedSAETransformer, names_of
from sae.transcoder_folder import make_transcoders, sae_lens_transcoder
from tests.tiny import tiny_hf

HOOK = "blocks.0.hook_resid_post"
IDS = torch.randint(0, 257, (2, 10), generator=torch.Generator().manual_seed(0))


def _model(dtype=torch.float32):
    return HookedSAETransformer.from_model(interp.HookedModel(tiny_hf("llama").to(dtype), interp.data.byte_tokenizer()))


def _sae(arch="topk", d=64, seed=0):
    from sae.baselines import training_class

    settings = {"k": 8} if "k" in {f.name for f in dataclasses.fields(training_class(arch)[1])} else {}
    s = make_sae(arch, d, 4 * d, seed=seed, **settings)
    with torch.no_grad():  # a trained-looking SAE: thresholds and biases that let latents fire
        for name, p in s.named_parameters():
            if "threshold" in name:
                p.fill_(0.05)
    s.cfg.metadata.hook_name = HOOK
    return S.to_inference(s)


def _sae_lens_bridge(model):
    from sae_lens.analysis.sae_transformer_bridge import SAETransformerBridge

    bridge = model.to_transformer_bridge()
    bridge.__class__ = SAETransformerBridge  # what SAETransformerBridge.boot_transformers does to a booted bridge
    bridge._acts_to_saes, bridge._transcoder_output_hooks = {}, {}
    return bridge


@pytest.fixture(scope="module")
def pair():
    model = _model()
    return model, _sae_lens_bridge(model)


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("use_error_term", [False, True])
def test_every_architecture_splices_as_sae_lens_does(pair, arch, use_error_term):
    model, bridge = pair
    s = _sae(arch)
    with torch.no_grad():
        ours, cache = model.run_with_cache_with_saes(IDS, saes=[s], use_error_term=use_error_term)
        theirs, their_cache = bridge.run_with_cache_with_saes(IDS, saes=[s], use_error_term=use_error_term)
        clean = model(IDS)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)
    if use_error_term:
        torch.testing.assert_close(ours, clean, rtol=0, atol=1e-4)
    else:
        assert (ours - clean).abs().max() > 1e-3  # the SAE really replaced the activation
    for name in names_of(s):
        if not use_error_term and name.endswith("hook_sae_error"):
            continue
        theirs_name = bridge.get_sae_hook_name(s, name.rsplit(".", 1)[1])
        torch.testing.assert_close(cache[name], their_cache[theirs_name], rtol=0, atol=1e-5)
    assert not model.acts_to_saes and not bridge.acts_to_saes  # both detached at the end


def test_a_transcoder_reads_one_hook_and_writes_another(pair):
    model, bridge = pair
    tc = make_transcoders("plt", [0, 1], 64, 128)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in tc.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
        tc.threshold.fill_(0.1)
    t = sae_lens_transcoder(tc.eval(), 0, model="tiny")
    with torch.no_grad():
        for use_error_term in (False, True):
            ours = model.run_with_saes(IDS, saes=[t], use_error_term=use_error_term)
            theirs = bridge.run_with_saes(IDS, saes=[t], use_error_term=use_error_term)
            torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)
        _, cache = model.run_with_cache_with_saes(IDS, saes=[t], names_filter=lambda n: "hook_sae" in n)
    assert set(cache) == set(names_of(t)) - {names_of(t, "hook_sae_error")[0]}  # no error term asked for
    assert cache[names_of(t, "hook_sae_acts_post")[0]].shape == (2, 10, 128)


def test_hooks_on_latents_act_and_the_error_term_keeps_everything_else(pair):
    model, bridge = pair
    s = _sae()
    acts = names_of(s, "hook_sae_acts_post")[0]

    def zero(t, hook):
        assert hook.name.endswith("hook_sae_acts_post")
        return torch.zeros_like(t)

    with torch.no_grad():
        ours = model.run_with_hooks_with_saes(IDS, saes=[s], fwd_hooks=[(acts, zero)])
        model.add_sae(s, use_error_term=True)
        with_error = model.run_with_hooks(IDS, fwd_hooks=[(acts, zero)])
        model.reset_saes()
        bridge.add_sae(s, use_error_term=True)
        theirs = bridge.run_with_hooks(IDS, fwd_hooks=[(bridge.get_sae_hook_name(s), zero)])
        bridge.reset_saes()
        _, cache = model.run_with_cache_with_saes(IDS, saes=[s], use_error_term=True)
    torch.testing.assert_close(with_error, theirs, rtol=0, atol=1e-5)
    # zero latents with the error kept: the hook's output is the error plus the decoder bias
    assert not torch.allclose(with_error, model(IDS), atol=1e-3)
    assert not torch.allclose(ours, with_error, atol=1e-3)


def test_attach_reset_restore_and_refusals():
    model = _model()
    a, b = _sae(seed=0), _sae(seed=1)
    model.add_sae(a)
    assert model.acts_to_saes == {HOOK: a}
    with model.saes(saes=[b]):
        assert model.acts_to_saes[HOOK] is b
    assert model.acts_to_saes[HOOK] is a  # the displaced one comes back
    with torch.no_grad():
        attached = model(IDS)
        torch.testing.assert_close(attached, model.run_with_saes(IDS, saes=[a]))
    model.reset_saes()
    assert not model.acts_to_saes and f"{HOOK}.hook_sae_acts_post" not in model.hook_names()
    with pytest.raises(KeyError, match="no SAE is attached"):
        model.reset_saes(HOOK)
    with pytest.raises(ValueError, match="no SAE is attached at 'blocks.0.hook_resid_post'"):
        model.run_with_cache(IDS, names=[f"{HOOK}.hook_sae_acts_post"])
    wrong = _sae()
    wrong.cfg.metadata.hook_name = "blocks.7.hook_resid_post"
    with pytest.raises(ValueError, match="not a hook point of"):
        model.add_sae(wrong)
    with model.hooks(), pytest.raises(RuntimeError, match="outside a hooks"):
        model.add_sae(a)
    plain = interp.HookedModel(model.hf_model, model.tokenizer)
    assert not hasattr(plain, "add_sae")  # wrapping left the original model alone


def test_excluded_tokens_bypass_the_sae():
    model = _model()
    s = _sae()
    ids = IDS.clone()
    ids[:, 0] = 7
    ids[1, 4] = 7
    with torch.no_grad():
        _, clean = model.run_with_cache(ids, names=[HOOK])
        _, cache = model.run_with_cache_with_saes(ids, saes=[s], exclude_special_tokens=[7], names=[HOOK])
        _, full = model.run_with_cache_with_saes(ids, saes=[s], names=[HOOK])
    keep = ids == 7
    torch.testing.assert_close(cache[HOOK][keep], clean[HOOK][keep])
    assert not torch.allclose(cache[HOOK][~keep], clean[HOOK][~keep])
    # downstream positions differ from the unmasked run only through attention to the bypassed ones
    torch.testing.assert_close(cache[HOOK][0, 1:4], full[HOOK][0, 1:4], atol=1e-5, rtol=0)


def test_gradients_through_the_splice_match_finite_differences():
    torch.manual_seed(0)
    model = _model(torch.float64)
    s = _sae().double()
    s.dtype = torch.float64  # sae-lens casts the SAE's input to this
    acts, error = names_of(s, "hook_sae_acts_post", "hook_sae_error")
    ids = IDS[:1]

    def metric(logits, *_):
        return logits[0, -1, 5] - logits[0, -1, 7]

    def nudged(name, idx, eps):
        def fn(t, hook):
            t = t.detach().clone()
            t[idx] += eps
            return t

        with torch.no_grad():
            return float(metric(model.run_with_hooks(ids, fwd_hooks=[(name, fn)])))

    with model.saes(saes=[s], use_error_term=True):
        _, values, grads = model.run_with_grads(ids, names=[acts, error], loss_fn=metric)
        z = values[acts][0]
        firing = [(0, p, int(z[p].argmax())) for p in (2, 6, 9)]
        silent = [(0, 3, int(z[3].argmin()))]
        checks = [(acts, i) for i in firing + silent] + [(error, (0, p, 4)) for p in (1, 5, 9)]
        for name, idx in checks:
            eps = 1e-3  # Llama's RMSNorm computes in float32 even in a float64 model: smaller steps meet its noise
            fd = (nudged(name, idx, eps) - nudged(name, idx, -eps)) / (2 * eps)
            assert abs(fd - float(grads[name][idx])) < 2e-5 + 1e-4 * abs(fd), (name, idx, fd)
        assert grads[acts].abs().sum() > 0 and grads[error].abs().sum() > 0


def test_upstream_gradient_is_sae_lens_s(pair):
    """The gradient reaching the hooked activation goes through the SAE's encoder (the error is held), as sae-lens."""
    model, bridge = pair
    s = _sae()
    seen = {}

    def save(g, hook):
        seen[hook.name] = g.detach().clone()

    for m, name in ((model, "blocks.0.hook_resid_pre"), (bridge, "blocks.0.hook_in")):
        with m.saes(saes=[s], use_error_term=True):
            logits = m.run_with_hooks(IDS, bwd_hooks=[(name, save)])
            logits[:, -1, 5].sum().backward()
    torch.testing.assert_close(seen["blocks.0.hook_resid_pre"], seen["blocks.0.hook_in"], rtol=1e-4, atol=1e-6)
    model.hf_model.zero_grad(set_to_none=True)


def test_sae_spliced_is_differentiable_and_equals_sae_lens_with_rows_all(pair):
    model, bridge = pair
    s = _sae()
    seen = {}

    def save(g, hook):
        seen[hook.name] = g.detach().clone()

    with torch.no_grad():
        with S.spliced(model, s, rows="all"):
            ours = model(IDS)
        with S.spliced(model, s):
            default = model(IDS)
        theirs = bridge.run_with_saes(IDS, saes=[s])
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)
    assert (default - theirs)[:, 0].abs().max() > 1e-3  # our default leaves position 0 alone; sae-lens does not
    with S.spliced(model, s, rows="all", keep_error=True):
        model.run_with_hooks(IDS, bwd_hooks=[("blocks.0.hook_resid_pre", save)])[:, -1, 5].sum().backward()
    with model.saes(saes=[s], use_error_term=True):
        logits = model.run_with_hooks(IDS, bwd_hooks=[("blocks.0.hook_resid_pre", lambda g, hook: seen.update(ref=g))])
        logits[:, -1, 5].sum().backward()
    model.hf_model.zero_grad(set_to_none=True)
    assert seen["blocks.0.hook_resid_pre"].abs().amax(-1).min() > 0  # every spliced position passes gradient upstream
    torch.testing.assert_close(seen["blocks.0.hook_resid_pre"], seen["ref"], rtol=1e-4, atol=1e-6)


def test_generation_runs_through_the_attached_sae():
    model = _model()
    s = _sae()
    x = IDS[:1, :6]
    with model.saes(saes=[s]):
        out = model.generate(input=x, max_new_tokens=5, stop_at_eos=False, use_past_kv_cache=True)
        toks = x.clone()
        with torch.no_grad():
            for _ in range(5):  # greedy, one whole forward per token, no KV cache
                toks = torch.cat([toks, model(toks)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(out, toks)
    assert not torch.equal(out, model.generate(input=x, max_new_tokens=5, stop_at_eos=False))


def test_sae_lens_tutorial_idioms_on_smollm2_equal_the_bridge():
    """The idioms of sae-lens's tutorials, typed as they write them, on SmolLM2 with a random SAE."""
    model = HookedSAETransformer.from_pretrained("smollm2-135m")
    s = make_sae("topk", model.cfg.d_model, 1024, seed=0, k=16)
    s.cfg.metadata.hook_name = "blocks.15.hook_resid_post"
    sae = S.to_inference(s)
    prompt = "When John and Mary went to the shops, John gave the bag to"
    bridge = _sae_lens_bridge(model)

    _, cache = model.run_with_cache_with_saes(prompt, saes=[sae])
    latents = cache[f"{sae.cfg.metadata.hook_name}.hook_sae_acts_post"][0, -1, :]
    assert (latents > 0).sum() == 16
    with torch.no_grad():
        theirs = bridge.run_with_saes(prompt, saes=[sae])
    torch.testing.assert_close(model.run_with_saes(prompt, saes=[sae]), theirs, rtol=0, atol=1e-4)

    sae.use_error_term = True
    clean = model(prompt)
    logits_sae, cache = model.run_with_cache_with_saes(prompt, saes=[sae])
    torch.testing.assert_close(logits_sae, clean, rtol=0, atol=1e-3)
    assert f"{sae.cfg.metadata.hook_name}.hook_sae_error" in cache
    sae.use_error_term = False

    def ablate_latent(acts, hook):
        acts[:, :, int(latents.argmax())] = 0.0
        return acts

    ablated = model.run_with_hooks_with_saes(
        prompt, saes=[sae], fwd_hooks=[(f"{sae.cfg.metadata.hook_name}.hook_sae_acts_post", ablate_latent)]
    )
    with torch.no_grad():
        theirs = bridge.run_with_hooks_with_saes(
            prompt, saes=[sae], fwd_hooks=[(bridge.get_sae_hook_name(sae), ablate_latent)]
        )
    torch.testing.assert_close(ablated, theirs, rtol=0, atol=1e-4)

    model.add_sae(sae)
    with torch.no_grad():
        torch.testing.assert_close(model(prompt), model.run_with_saes(prompt, saes=[sae]))
    model.reset_saes()
    with model.saes(saes=[sae]):
        text = model.generate(
            input=prompt, max_new_tokens=4, stop_at_eos=False, do_sample=True, temperature=1.0, freq_penalty=1.0
        )
    assert isinstance(text, str) and text.startswith(prompt)


@pytest.mark.parametrize("family", ["gpt_neox", "gemma3", "gpt2"])
@pytest.mark.parametrize("hook", ["blocks.1.hook_resid_pre", "blocks.0.hook_mlp_out", "blocks.1.hook_attn_out"])
def test_other_families_and_hooks_splice_as_sae_lens_does(family, hook):
    model = HookedSAETransformer.from_model(interp.HookedModel(tiny_hf(family), interp.data.byte_tokenizer()))
    bridge = _sae_lens_bridge(model)
    s = _sae("topk", d=model.d_model)
    s.cfg.metadata.hook_name = hook
    with torch.no_grad():
        for use_error_term in (False, True):
            ours = model.run_with_saes(IDS, saes=[s], use_error_term=use_error_term)
            theirs = bridge.run_with_saes(IDS, saes=[s], use_error_term=use_error_term)
            torch.testing.assert_close(ours, theirs, rtol=0, atol=2e-5)
        assert (model.run_with_saes(IDS, saes=[s]) - model(IDS)).abs().max() > 1e-3
