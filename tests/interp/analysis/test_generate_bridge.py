"""Generation over HF's generate with hooks and caches; the TransformerLens bridge leaves our model alone."""

import pytest
import torch

import interp
from tests.interp.analysis.helpers import ids, rel, wrap


@pytest.mark.parametrize("arch", ["llama", "gpt_neox", "gemma3"])
def test_greedy_generate_equals_hf_and_the_cache_matches_a_full_forward(arch):
    model = wrap(arch)
    x = ids(1, 6)
    ours = model.generate(x, 5)
    ref = model.hf_model.generate(input_ids=x, max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert torch.equal(ours, ref)
    tokens, cache = model.generate(x, 5, names=["blocks.1.hook_resid_post", "blocks.0.attn.hook_pattern"])
    assert torch.equal(tokens, ours) and torch.equal(cache.tokens, tokens[:, :-1])
    _, full = model.run_with_cache(tokens[:, :-1], names=["blocks.1.hook_resid_post", "blocks.0.attn.hook_pattern"])
    assert rel(cache["resid_post", 1], full["resid_post", 1]) < 1e-5
    assert rel(cache["pattern", 0], full["pattern", 0]) < 1e-5


def test_steering_through_generate_and_batches():
    model = wrap("llama")
    x = ids(1, 6)
    plain = model.generate(x, 6)

    def push(resid, hook):
        return resid + 5 * model.W_U[:, 65]  # towards byte "A"

    steered = model.generate(x, 6, fwd_hooks=[("blocks.1.hook_resid_post", push)])
    assert not torch.equal(steered, plain) and (steered[0, 6:] == 65).any()
    batch = model.generate(["hello", "hi"], 3, return_type="tokens")  # left-padded for generation
    assert batch.shape == (2, 8) and torch.equal(batch[0, :5], torch.tensor(list(b"hello")))
    with pytest.raises(ValueError, match="max_new_tokens"):
        model.generate(x, 0)


@pytest.fixture(scope="module")
def smollm():
    return interp.load_model("smollm2-135m")


@pytest.mark.parametrize("arch", ["gpt_neox", "llama", "gemma3"])
def test_bridge_on_tiny_models_matches_and_leaves_ours_untouched(arch):
    model = wrap(arch)
    x = ids(1, 6)
    logits, cache = model.run_with_cache(x)
    gen = model.generate(x, 4)
    bridge = model.to_transformer_bridge()
    with torch.no_grad():
        b_logits, b_cache = bridge.run_with_cache(x)
    assert rel(b_logits, logits) < 1e-5
    assert rel(b_cache["blocks.1.hook_resid_post"], cache["resid_post", 1]) < 1e-5
    assert torch.equal(model(x), logits) and torch.equal(model.generate(x, 4), gen)
    assert bridge.to_tokens("Hi").tolist() == model.to_tokens("Hi").tolist()


def test_bridge_on_smollm2(smollm):
    model = smollm
    prompt = "The capital of France is"
    logits, cache = model.run_with_cache(prompt, names="blocks.*.hook_resid_post")
    gen = model.generate(prompt, 3)
    bridge = model.to_transformer_bridge()
    assert bridge.to_tokens(prompt).tolist() == model.to_tokens(prompt).tolist()  # no silent BOS
    with torch.no_grad():
        b_logits, b_cache = bridge.run_with_cache(prompt)
    assert (b_logits - logits).abs().max().item() <= 1e-5 * logits.abs().max().item()
    assert rel(b_cache["blocks.29.hook_resid_post"], cache["resid_post", -1]) < 1e-5
    assert torch.equal(model(prompt), logits) and model.generate(prompt, 3) == gen


def test_transformer_lens_view_takes_text_with_our_bos_rule(smollm):
    tl = smollm.to_transformer_lens()
    prompt = "The capital of France is"
    assert tl.to_tokens(prompt).tolist() == smollm.to_tokens(prompt).tolist()
    with torch.no_grad():
        assert rel(tl(prompt), smollm(prompt)) < 1e-4


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_tl_generate_keywords_freq_penalty_as_the_bridge(temperature):
    """top_k=1 makes sampling deterministic, so the penalty's effect is compared token for token.

    The bridge is run without its KV cache: with it, TL 3.9's bridge counts the tokens differently from its own
    `sample_logits` formula (logits / temperature - penalty x count over the whole sequence so far), which both
    ours and the bridge's uncached path follow."""
    model = wrap("llama")
    bridge = model.to_transformer_bridge()
    x = ids(1, 6)
    kw = dict(max_new_tokens=12, stop_at_eos=False, do_sample=True, top_k=1, temperature=temperature)
    for penalty in (0.0, 3.0):
        ours = model.generate(input=x, freq_penalty=penalty, use_past_kv_cache=True, **kw)
        assert torch.equal(ours, model.generate(input=x, freq_penalty=penalty, use_past_kv_cache=False, **kw))
        with torch.no_grad():
            theirs = bridge.generate(input=x, freq_penalty=penalty, use_past_kv_cache=False, verbose=False, **kw)
        assert torch.equal(ours, theirs.to(ours.device)), penalty
    assert not torch.equal(model.generate(input=x, freq_penalty=3.0, **kw), model.generate(input=x, **kw))
    with pytest.raises(TypeError, match="pass the prompt once"):
        model.generate(x, input=x)
    with pytest.raises(ValueError, match="freq_penalty must be at least 0"):
        model.generate(x, 3, freq_penalty=-1.0, do_sample=True)
