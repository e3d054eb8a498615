"""SSMoE on a HF MoE language model (interp.contrib.moe.experiments.ssmoe_lm), on tiny random-init models built
here: no MoE weights load on this machine, so nothing here says anything about a pretrained model."""

import pytest
import torch
import torch.nn.functional as F
from transformers import OlmoeConfig, OlmoeForCausalLM

import interp
from interp.contrib.moe.experiments.ssmoe_lm import EXTRACTORS, main, moe_layers, ssmoe_routing
from interp.contrib.moe.ssmoe import spectral_directions, ssmoe_logits
from interp.data import byte_tokenizer
from tests.tiny import tiny_family

K = 4


def tiny_olmoe(seed: int = 0, **overrides) -> OlmoeForCausalLM:
    config = OlmoeConfig(
        vocab_size=257,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        **overrides,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    return OlmoeForCausalLM(config).eval()


def wrap(hf):
    return interp.HookedModel(hf, byte_tokenizer())


def ids(batch=2, pos=16, seed=0):
    return torch.randint(3, 256, (batch, pos), generator=torch.Generator().manual_seed(seed))


def routers(moes, c):
    return [m.ssmoe(K, c=c) for m in moes]


def models():
    """(name, HookedModel) of each supported family: OLMoE both ways of normalising, Qwen3-MoE, Mixtral."""
    return [
        ("olmoe", lambda: wrap(tiny_olmoe())),
        ("olmoe-norm-topk", lambda: wrap(tiny_olmoe(norm_topk_prob=True))),
        ("qwen3_moe", lambda: wrap(tiny_family("qwen3_moe"))),
        ("mixtral", lambda: wrap(tiny_family("mixtral"))),
    ]


@pytest.mark.parametrize("name,make", models(), ids=[n for n, _ in models()])
def test_c0_reproduces_the_unpatched_logits_exactly(name, make):
    model = make()
    moes = moe_layers(model)
    assert [m.layer for m in moes] == [0, 1]
    x = ids()
    with torch.no_grad():
        want = model(x)
        with ssmoe_routing(moes, routers(moes, 0.0)):
            got = model(x)
        with ssmoe_routing(moes, routers(moes, 0.5)):
            mixed = model(x)
    assert torch.equal(got, want)
    assert (mixed - want).abs().max() > 0  # and the swap does act


@pytest.mark.parametrize("name,make", models(), ids=[n for n, _ in models()])
def test_extracted_experts_reproduce_the_hf_experts_for_one_token(name, make):
    model = make()
    block = model.hf_model.model.layers[1].mlp
    moe = moe_layers(model, "1")[0]
    x = torch.randn(1, moe.router_w.shape[1], generator=torch.Generator().manual_seed(1))
    act = block.experts.act_fn
    for e in range(moe.n_experts):
        with torch.no_grad():
            hf = block.experts(x, torch.tensor([[e]]), torch.tensor([[1.0]]))
        ours = (act(x @ moe.gate_w[e].T) * (x @ moe.up_w[e].T)) @ moe.down_w[e].T
        swapped = (act(x @ moe.up_w[e].T) * (x @ moe.gate_w[e].T)) @ moe.down_w[e].T
        scale = hf.abs().max()  # random init is small (std 0.02): compare relative to the output's size
        assert (ours - hf).abs().max() <= 1e-5 * scale
        assert (swapped - hf).abs().max() > 0.05 * scale  # the test can tell gate from up
    assert torch.equal(moe.router_w, block.gate.weight)


def test_c1_chooses_the_top_k_of_the_spectral_logits():
    model = wrap(tiny_olmoe())
    moes = moe_layers(model)
    inputs = {}
    hooks = [
        m.gate.register_forward_pre_hook(lambda mod, args, i=m.layer: inputs.__setitem__(i, args[0])) for m in moes
    ]
    names = [f"blocks.{m.layer}.mlp.hook_expert_indices" for m in moes]
    try:
        with ssmoe_routing(moes, routers(moes, 1.0)):
            _, cache = model.run_with_cache(ids(), names=names)
    finally:
        for h in hooks:
            h.remove()
    for layer in (0, 1):
        block = model.hf_model.model.layers[layer].mlp
        h = block.experts.gate_up_proj.shape[1] // 2
        gu, down = block.experts.gate_up_proj.detach(), block.experts.down_proj.detach()
        dirs = spectral_directions(gu[:, :h], gu[:, h:], down, block.gate.weight.detach(), K)
        want = ssmoe_logits(inputs[layer], dirs).topk(2, dim=-1).indices
        got = cache[f"blocks.{layer}.mlp.hook_expert_indices"].reshape(-1, 2)
        assert torch.equal(got.sort(-1).values, want.sort(-1).values)


def test_the_router_is_restored_after_the_context_and_after_an_error():
    model = wrap(tiny_olmoe())
    moes = moe_layers(model)
    x = ids()
    with torch.no_grad():
        want = model(x)
    with ssmoe_routing(moes, routers(moes, 1.0)):
        assert all("forward" in m.gate.__dict__ for m in moes)
    assert all("forward" not in m.gate.__dict__ for m in moes)
    with pytest.raises(RuntimeError, match="boom"):
        with ssmoe_routing(moes, routers(moes, 1.0)):
            raise RuntimeError("boom")
    assert all("forward" not in m.gate.__dict__ for m in moes)
    with torch.no_grad():
        assert torch.equal(model(x), want)


def test_a_dense_model_is_one_clear_error(tmp_path, capsys):
    dense = tiny_family("llama")
    with pytest.raises(ValueError, match="'llama' has no mixture-of-experts layers.*LlamaMLP"):
        moe_layers(wrap(dense))
    dense.save_pretrained(tmp_path / "llama")
    with pytest.raises(SystemExit):
        main(["--model", str(tmp_path / "llama"), "--max-tokens", "64", "--ctx-len", "32"])
    err = capsys.readouterr().err.strip().splitlines()
    assert "error: model type 'llama' has no mixture-of-experts layers" in err[-1]


def test_bad_layers_and_c_are_refused(capsys):
    model = wrap(tiny_olmoe())
    with pytest.raises(ValueError, match="layer 5 does not exist"):
        moe_layers(model, "0,5")
    with pytest.raises(SystemExit):
        main(["--model", "x", "--c", "1.5"])
    assert "must lie in [0, 1]" in capsys.readouterr().err


def test_every_extractor_names_a_block_type():
    assert set(EXTRACTORS) == {"OlmoeSparseMoeBlock", "Qwen3MoeSparseMoeBlock", "MixtralSparseMoeBlock"}


def test_main_on_a_saved_tiny_olmoe(tmp_path, capsys):
    tiny_olmoe().save_pretrained(tmp_path / "olmoe")
    res = main(["--model", str(tmp_path / "olmoe"), "--c", "0.5", "1", "--max-tokens", "256", "--ctx-len", "32"])
    assert [r["c"] for r in res["rows"]] == [0.0, 0.5, 1.0]
    assert res["layers"] == [0, 1] and res["c0_max_abs_logit_diff"] == 0.0
    assert res["targets"] == 8 * 31
    for r in res["rows"]:
        assert set(r["load_entropy"]) == {0, 1}
        assert all(0.0 <= v <= 1.0 for v in r["load_entropy"].values())
        assert 0 < r["cross_entropy"] < 2 * torch.log(torch.tensor(257.0))
    assert res["rows"][1]["cross_entropy"] != res["rows"][0]["cross_entropy"]
    out = capsys.readouterr().out
    assert "| c | cross-entropy |" in out and "0 (original)" in out


def test_main_c0_cross_entropy_is_the_models_own_loss(tmp_path):
    tiny_olmoe().save_pretrained(tmp_path / "olmoe")
    res = main(["--model", str(tmp_path / "olmoe"), "--c", "0", "--max-tokens", "64", "--ctx-len", "32"])
    model = interp.load_model(str(tmp_path / "olmoe"))
    from interp.data import resolve_corpus

    tokens = resolve_corpus("stdlib-docs", model.tokenizer, ctx_len=32, max_tokens=64, seed=0).tokens
    with torch.no_grad():
        logits = model(tokens)
    want = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
    assert [r["c"] for r in res["rows"]] == [0.0]
    assert res["rows"][0]["cross_entropy"] == pytest.approx(float(want), rel=1e-5)
