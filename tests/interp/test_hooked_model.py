"""HookedModel over tiny models of every supported architecture: parity, hooks, caches, gradients."""

import pytest
import torch

import interp
from interp.data import byte_tokenizer
from interp.hooks.attention import ATTR
from interp.wrapper.tokens import next_token_loss
from tests.tiny import ARCHS, tiny_hf


def wrap(arch, **kw):
    return interp.HookedModel(tiny_hf(arch, **kw), byte_tokenizer())


def ids(batch=2, pos=20, seed=0):
    return torch.randint(0, 256, (batch, pos), generator=torch.Generator().manual_seed(seed))


def rel(a, b):
    return ((a - b).norm() / b.norm().clamp(min=1e-12)).item()


@pytest.mark.parametrize("arch", ARCHS)
def test_logits_equal_bare_hf_and_resid_matches_hidden_states(arch):
    model, bare = wrap(arch), tiny_hf(arch)  # same seed: identical weights, separate modules
    x = ids()
    with torch.no_grad():
        ref = bare(x, output_hidden_states=True)
        logits, cache = model.run_with_cache(x)
    assert torch.equal(logits, ref.logits)
    assert rel(cache["hook_embed"] + cache.get("hook_pos_embed", 0), ref.hidden_states[0]) < 1e-6
    for layer in range(model.n_layers - 1):  # HF's last hidden state is after the final norm
        assert rel(cache["resid_post", layer], ref.hidden_states[layer + 1]) < 1e-4
    assert rel(cache["ln_final.hook_normalized"], ref.hidden_states[-1]) < 1e-6


@pytest.mark.parametrize("arch", ARCHS)
def test_cache_shapes_follow_transformer_lens_conventions(arch):
    model = wrap(arch)
    _, cache = model.run_with_cache(ids(2, 11))
    h, kv, d = model.n_heads, model.n_kv_heads, model.d_head
    assert cache["q", 0].shape == (2, 11, h, d)
    assert cache["k", 1].shape == (2, 11, kv, d)
    assert cache["z", 1].shape == (2, 11, h, d)
    assert cache["pattern", 0].shape == (2, h, 11, 11)
    assert torch.allclose(cache["pattern", 0].sum(-1), torch.ones(2, h, 11))
    assert cache.stack("resid_post").shape == (model.n_layers, 2, 11, model.d_model)
    assert set(model.hook_names()) - set(cache) == {f"blocks.{l}.attn.hook_result" for l in range(model.n_layers)}


@pytest.mark.parametrize("arch", ARCHS)
def test_zeroing_a_head_through_hook_z_equals_zeroing_its_output_weights(arch):
    layer, head = 1, 2
    model, by_hand = wrap(arch), tiny_hf(arch)
    x = ids()

    def zero_head(z, hook):
        z = z.clone()
        z[:, :, head] = 0
        return z

    patched = model.run_with_hooks(x, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", zero_head)])
    proj = by_hand.get_submodule(f"{model.adapter.layers}.{layer}.{model.adapter.out_proj}")
    cols = slice(head * model.d_head, (head + 1) * model.d_head)
    with torch.no_grad():
        w = proj.weight  # Linear: [out, in]; GPT-2's Conv1D: [in, out]
        (w[cols] if arch == "gpt2" else w[:, cols]).zero_()
        expected = by_hand(x).logits
    assert (patched - expected).abs().max().item() < 1e-5
    assert not torch.allclose(patched, model(x))


@pytest.mark.parametrize("arch", ["gpt_neox", "gpt2", "llama"])
def test_zeroing_a_heads_values_zeroes_its_z(arch):
    """Writes through a (fused) q|k|v view land in the right head."""
    model = wrap(arch)
    head = 1 % model.n_kv_heads

    def zero_v(v, hook):
        v = v.clone()
        v[:, :, head] = 0
        return v

    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_v", zero_v)]):
        _, cache = model.run_with_cache(ids(), names="blocks.0.attn.hook_z")
    z = cache["z", 0]
    groups = model.n_heads // model.n_kv_heads
    zeroed = [h for h in range(model.n_heads) if h // groups == head]
    assert torch.all(z[:, :, zeroed] == 0)
    assert z[:, :, [h for h in range(model.n_heads) if h not in zeroed]].abs().sum() > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_recomputed_attention_matches_eager(arch):
    """Returning a (copied) pattern or scores makes the wrapper recompute attention itself: same numbers."""
    model = wrap(arch)
    x = ids()
    base = model(x)
    for name in ("blocks.*.attn.hook_pattern", "blocks.*.attn.hook_attn_scores"):
        out = model.run_with_hooks(x, fwd_hooks=[(name, lambda t, hook: t.clone())])
        assert (out - base).abs().max().item() < 1e-5


def test_uniform_pattern_changes_the_output():
    model = wrap("llama")
    x = ids()

    def uniform(p, hook):
        causal = torch.ones_like(p).tril()
        return causal / causal.sum(-1, keepdim=True)

    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", uniform)]):
        _, cache = model.run_with_cache(x, names="blocks.0.attn.hook_pattern")
    assert torch.allclose(cache["pattern", 0][0, 0, 3, :4], torch.full((4,), 0.25))


@pytest.mark.parametrize("arch", ["llama", "gpt_neox_seq", "gpt2", "gemma3"])
def test_editing_resid_mid_equals_editing_attn_out(arch):
    model = wrap(arch)
    x = ids()
    v = torch.randn(model.d_model)
    add = lambda t, hook: t + v  # noqa: E731
    via_mid = model.run_with_hooks(x, fwd_hooks=[("blocks.0.hook_resid_mid", add)])
    via_attn = model.run_with_hooks(x, fwd_hooks=[("blocks.0.hook_attn_out", add)])
    assert (via_mid - via_attn).abs().max().item() < 1e-4
    assert (via_mid - model(x)).abs().max().item() > 1e-3


def test_parallel_residual_has_no_resid_mid():
    assert "blocks.0.hook_resid_mid" not in wrap("gpt_neox").hook_names()
    assert "blocks.0.hook_resid_mid" in wrap("gpt_neox_seq").hook_names()


def no_hooks_left(model):
    mods = list(model.hf_model.modules())
    return all(not m._forward_hooks and not m._forward_pre_hooks and not getattr(m, ATTR, None) for m in mods)


def test_hooks_are_removed_after_an_exception():
    model = wrap("llama")
    x = ids()
    base = model(x)
    with pytest.raises(RuntimeError, match="boom"):
        with model.hooks(
            fwd_hooks=[
                ("blocks.*.attn.hook_pattern", lambda t, h: t * 0),
                ("blocks.0.hook_resid_post", lambda t, h: t * 0),
            ]
        ):
            model(x)
            raise RuntimeError("boom")
    assert no_hooks_left(model)
    assert torch.equal(model(x), base)


def test_hook_that_raises_mid_forward_leaves_no_hooks():
    model = wrap("gpt_neox")

    def bad(t, hook):
        raise ValueError("bad hook")

    with pytest.raises(ValueError, match="bad hook"):
        model.run_with_hooks(ids(), fwd_hooks=[("blocks.1.mlp.hook_post", bad)])
    assert no_hooks_left(model)


def test_stop_early_skips_the_rest_of_the_forward():
    model = wrap("llama")
    calls = []
    last = model.hf_model.get_submodule(f"{model.adapter.layers}.{model.n_layers - 1}")
    handle = last.register_forward_hook(lambda *a: calls.append(1))
    try:
        full_logits, full = model.run_with_cache(ids(), names="blocks.0.*")
        assert len(calls) == 1
        logits, early = model.run_with_cache(ids(), names="blocks.0.*", return_logits=False)
        assert len(calls) == 1 and logits is None
    finally:
        handle.remove()
    assert list(early) == list(full) and all(torch.equal(early[k], full[k]) for k in full)


def test_names_globs_predicates_and_unknown_names():
    model = wrap("llama")
    assert [p.name for p in model.hook_points("blocks.*.hook_resid_post")] == [
        f"blocks.{i}.hook_resid_post" for i in range(model.n_layers)
    ]
    assert len(model.hook_points(lambda n: n.endswith("hook_z"))) == model.n_layers
    with pytest.raises(interp.UnknownHookError, match="blocks.0.hook_resid_post"):
        model.run_with_cache(ids(), names="blocks.0.hook_resid_pots")
    with pytest.raises(interp.UnknownHookError, match="nearest"):
        model.hook_points("blocks.*.hook_nothing")


def test_right_padding_gives_each_text_its_own_numbers():
    model = wrap("llama")
    texts = ["short", "a rather longer text than the other"]
    _, batch = model.run_with_cache(texts, names="blocks.1.hook_resid_post")
    for i, text in enumerate(texts):
        _, alone = model.run_with_cache(text, names="blocks.1.hook_resid_post")
        n = alone.tokens.shape[1]
        assert batch.attention_mask[i].sum() == n
        assert rel(batch["resid_post", 1][i, :n], alone["resid_post", 1][0]) < 1e-5
    assert batch.rows("blocks.1.hook_resid_post").shape[0] == int(batch.attention_mask.sum())


def test_bad_text_inputs_get_clear_errors():
    model = wrap("llama")
    with pytest.raises(ValueError, match="empty text"):
        model([""])
    with pytest.raises(ValueError, match="truncate=True"):
        model("x" * 500)  # 500 byte tokens > n_ctx 128
    assert model("x" * 500, truncate=True).shape[1] == model.n_ctx


def test_gradients_at_hook_points_match_autograd():
    model, bare = wrap("llama"), tiny_hf("llama")
    x = ids()
    loss, acts, grads = model.run_with_grads(x, names=["blocks.0.hook_resid_post", "blocks.0.attn.hook_z"])
    out = bare(x, output_hidden_states=True)
    h1 = out.hidden_states[1]
    h1.retain_grad()
    ref_loss = next_token_loss(out.logits, x, torch.ones_like(x))
    ref_loss.backward()
    assert torch.allclose(loss, ref_loss.detach())
    assert rel(grads["blocks.0.hook_resid_post"], h1.grad) < 1e-5
    assert grads["blocks.0.attn.hook_z"].shape == acts["blocks.0.attn.hook_z"].shape
    assert grads["blocks.0.attn.hook_z"].abs().sum() > 0


def test_backward_hook_can_rescale_gradients():
    model = wrap("gpt_neox")
    x = ids()
    _, _, base = model.run_with_grads(x, names="hook_embed")
    with model.hooks(bwd_hooks=[("blocks.1.hook_resid_pre", lambda g, hook: 2 * g)]):
        _, _, doubled = model.run_with_grads(x, names="hook_embed")
    assert rel(doubled["hook_embed"], 2 * base["hook_embed"]) < 1e-5


def test_nnsight_view_sees_the_same_modules():
    model = wrap("llama")
    x = ids()
    _, cache = model.run_with_cache(x, names="blocks.0.hook_resid_post")
    lm = model.nnsight
    with lm.trace(x):
        saved = lm.model.layers[0].output.save()
    assert torch.equal(saved, cache["resid_post", 0])
