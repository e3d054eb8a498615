"""TransformerLens-named weights reproduce the hooks they feed; token helpers and the BOS rule."""

import pytest
import torch

from interp.wrapper.weights import MissingWeightError, expand_kv
from tests.interp.analysis.helpers import ids, rel, wrap
from tests.tiny import ARCHS


@pytest.mark.parametrize("arch", ARCHS)
def test_weights_reproduce_q_k_v_z_and_mlp(arch):
    model = wrap(arch)
    with torch.no_grad():
        _, c = model.run_with_cache(ids())
        for l in range(model.n_layers):
            x1 = model.norm_module(f"blocks.{l}.ln1")[0](c["resid_pre", l])
            for part in "QKV":
                w, b = getattr(model, f"W_{part}")[l], getattr(model, f"b_{part}")[l]
                got = torch.einsum("bpm,hmd->bphd", x1, w) + b
                assert rel(got, c[part.lower(), l]) < 1e-5, (l, part)
            x2 = model.norm_module(f"blocks.{l}.ln2")[0](
                c["resid_pre" if "resid_mid" not in str(list(c)) else "resid_mid", l]
            )
            gated = model.adapter.mlp_pre_linear is not None
            pre = x2 @ (model.W_gate if gated else model.W_in)[l] + (model.b_gate if gated else model.b_in)[l]
            assert rel(pre, c["pre", l]) < 1e-5
            if gated:
                assert rel(x2 @ model.W_in[l] + model.b_in[l], c["pre_linear", l]) < 1e-5
            if not model.adapter.sandwich_norms:
                out = torch.einsum("bphd,hdm->bpm", c["z", l], model.W_O[l]) + model.b_O[l]
                assert rel(out, c["attn_out", l]) < 1e-5
                assert rel(c["post", l] @ model.W_out[l] + model.b_out[l], c["mlp_out", l]) < 1e-5
    assert model.W_E.shape == (model.d_vocab, model.d_model)
    assert model.W_U.shape == (model.d_model, model.d_vocab) and model.b_U.shape == (model.d_vocab,)


def test_grouped_query_heads_and_factored_matrices():
    model = wrap("llama")  # 4 query heads, 2 kv heads
    assert model.W_K.shape[1] == 2 and expand_kv(model.W_K, 4).shape[1] == 4
    assert torch.equal(expand_kv(model.W_K, 4)[:, 1], model.W_K[:, 0])  # heads 0,1 share kv head 0
    ov = model.OV
    assert ov.shape == (model.n_layers, model.n_heads, model.d_model, model.d_model)
    dense = expand_kv(model.W_V, 4)[1, 3] @ model.W_O[1, 3]
    assert rel(ov[1, 3].AB, dense) < 1e-6
    qk = model.QK
    assert rel(qk[0, 2].AB, model.W_Q[0, 2] @ model.W_K[0, 1].T) < 1e-6


def test_missing_weights_name_the_reason():
    model = wrap("llama")
    with pytest.raises(MissingWeightError, match="rotary"):
        _ = model.W_pos
    assert wrap("gpt2").W_pos.shape[1] == 64
    with pytest.raises(MissingWeightError, match="not gated"):
        _ = wrap("gpt_neox").W_gate


def test_tokens_and_the_bos_rule():
    model = wrap("gpt_neox")  # byte tokenizer: BOS 256, not added by default
    assert model.to_str_tokens("Hi!") == ["H", "i", "!"]
    assert model.to_str_tokens("Hi", prepend_bos=True) == ["<|endoftext|>", "H", "i"]
    ids_on = model.to_tokens(["Hi", "Hey"], prepend_bos=True)
    assert ids_on[:, 0].tolist() == [256, 256]
    assert model.to_tokens("Hi", prepend_bos=False).tolist() == [[72, 105]]
    model.prepend_bos = True  # the model-wide default, overridden per call
    assert model.to_str_tokens("Hi")[0] == "<|endoftext|>" and len(model.to_str_tokens("Hi", prepend_bos=False)) == 2
    assert model.to_single_token("a") == 97
    with pytest.raises(ValueError, match="2 tokens"):
        model.to_single_token("ab")


def test_test_prompt_and_loss(capsys):
    model = wrap("llama")
    report = model.test_prompt("abc", "d", prepend_space_to_answer=False, top_k=3)
    out = capsys.readouterr().out
    assert "rank" in out and len(report["top"]) == 3
    logits = model("abc")[0, -1].log_softmax(-1)
    assert report["rank"] == int((logits > logits[ord("d")]).sum())
    assert abs(report["logprob"] - logits[ord("d")].item()) < 1e-5
    with pytest.raises(ValueError, match="3 tokens"):
        model.test_prompt("abc", "de")
    per = model.loss(["hello there", "hi"], per_token=True)
    assert per.shape == (2, 10) and per[1, 1:].eq(0).all()
    mean = model.loss(["hello there", "hi"])
    assert abs(mean.item() - per.sum().item() / 11) < 1e-5
