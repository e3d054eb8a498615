"""EK-FAC / MDA head components on every architecture family: separate (Llama, Gemma 3), fused (GPT-NeoX,
GPT-2), grouped-query k/v; and EK-FAC on a micro Llama against an explicit damped GGN."""

import pytest
import torch
from scipy.stats import spearmanr

import interp
from attribution.influence import (
    HeadComponent,
    component_gradients,
    fit_ekfac,
    flatten_blocks,
    influence_scores,
    lm_loss,
    mean_gradient,
)
from attribution.mda import copy_target_probe
from tests.attribution.helpers import exact_ggn
from tests.tiny import ARCHS, tiny_hf


def _reference(model, comp, ids):
    """{block: [d_out, d_in]} from autograd on the full projection weights, sliced by hand per layout."""
    hf, L, h = model.hf_model, comp.layer, comp.head
    dh, d = model.d_head, model.d_model
    kvh = h // (model.n_heads // model.n_kv_heads)
    loss = lm_loss(model, ids, torch.ones_like(ids)).sum()
    q_rows, kv_rows = slice(h * dh, (h + 1) * dh), slice(kvh * dh, (kvh + 1) * dh)
    mt = hf.config.model_type
    if mt in ("llama", "gemma3_text"):
        att = hf.model.layers[L].self_attn
        params = [att.q_proj.weight, att.k_proj.weight, att.v_proj.weight, att.o_proj.weight]
        gq, gk, gv, go = torch.autograd.grad(loss, params)
        return {"qk": torch.cat([gq[q_rows], gk[kv_rows]]), "v": gv[kv_rows], "o": go[:, q_rows]}
    if mt == "gpt_neox":
        att = hf.gpt_neox.layers[L].attention
        gw, gb, go = torch.autograd.grad(loss, [att.query_key_value.weight, att.query_key_value.bias, att.dense.weight])
        g = torch.cat([gw, gb[:, None]], -1)
        base = h * 3 * dh
        return {"qk": g[base : base + 2 * dh], "v": g[base + 2 * dh : base + 3 * dh], "o": go[:, q_rows]}
    att = hf.transformer.h[L].attn  # GPT-2: Conv1D weights are [in, out]
    gw, gb, go = torch.autograd.grad(loss, [att.c_attn.weight, att.c_attn.bias, att.c_proj.weight])
    g = torch.cat([gw, gb[None]], 0).T
    q, k, v = (g[i * d + h * dh : i * d + (h + 1) * dh] for i in range(3))
    return {"qk": torch.cat([q, k]), "v": v, "o": go[q_rows].T}


@pytest.mark.parametrize("arch", ARCHS)
def test_component_gradients_equal_autograd_on_every_architecture(arch):
    model = interp.HookedModel(tiny_hf(arch), None)
    comp = HeadComponent(1, 3, "qkvo")  # head 3: with grouped-query k/v it reads k/v head 1 (llama) or 0 (gemma3)
    ids = torch.randint(0, 257, (2, 12), generator=torch.Generator().manual_seed(0))
    got = component_gradients(model, comp, ids)
    for b in range(2):
        ref = _reference(model, comp, ids[b : b + 1])
        for k in ("qk", "v", "o"):
            torch.testing.assert_close(got[k][b], ref[k], rtol=1e-4, atol=1e-6, msg=f"{arch} block {k}")


@pytest.mark.parametrize("arch", ARCHS)
def test_ekfac_runs_on_every_architecture(arch):
    model = interp.HookedModel(tiny_hf(arch), None)
    comp = HeadComponent(1, 1, "qkvo")
    g = torch.Generator().manual_seed(0)
    fit = torch.randint(0, 257, (4, 10), generator=g)
    factors = fit_ekfac(model, comp, fit, batch_size=4)
    probe = mean_gradient(model, comp, torch.randint(1, 257, (4, 6), generator=g).repeat(1, 2), copy_target_probe())
    scores, _ = influence_scores(model, factors, torch.randint(0, 257, (3, 10), generator=g), probe)
    assert scores.shape == (3,) and torch.isfinite(scores).all()
    for k, q in factors.q_a.items():
        assert q.shape[0] == q.shape[1] == probe[k].shape[1]
        assert factors.q_s[k].shape[0] == probe[k].shape[0]


def micro_llama(seed=0):
    """Llama with d_model 16, 4 query heads / 2 k-v heads of d_head 4: one head's W_Q, W_K = 8 x 16 = 128 params."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=16,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        tie_word_embeddings=True,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    hf = LlamaForCausalLM(cfg)
    for name, p in hf.named_parameters():  # larger weights than the default init, so attention is not uniform
        if p.ndim == 2 and "embed" not in name:
            p.data.mul_(8.0)
    return interp.HookedModel(hf, None)


def _exact_ggn_llama(model, comp, ids):
    """The exact GGN over (W_Q rows of head h, W_K rows of its k-v head): 128 x 128."""
    att = model.hf_model.model.layers[comp.layer].self_attn
    dh = model.d_head
    kvh = comp.head // (model.n_heads // model.n_kv_heads)
    qn, kn = f"model.layers.{comp.layer}.self_attn.q_proj.weight", f"model.layers.{comp.layer}.self_attn.k_proj.weight"
    theta = (
        torch.cat(
            [att.q_proj.weight[comp.head * dh : (comp.head + 1) * dh], att.k_proj.weight[kvh * dh : (kvh + 1) * dh]]
        )
        .detach()
        .clone()
        .requires_grad_(True)
    )
    wq = torch.cat(
        [att.q_proj.weight[: comp.head * dh].detach(), theta[:dh], att.q_proj.weight[(comp.head + 1) * dh :].detach()]
    )
    wk = torch.cat([att.k_proj.weight[: kvh * dh].detach(), theta[dh:], att.k_proj.weight[(kvh + 1) * dh :].detach()])
    return exact_ggn(model, theta, {qn: wq, kn: wk}, ids)


@pytest.mark.slow
def test_ekfac_on_a_llama_head_tracks_the_exact_damped_ggn():
    model = micro_llama()
    comp = HeadComponent(1, 3, "qk")
    g = torch.Generator().manual_seed(1)
    fit = torch.randint(0, 16, (16, 8), generator=g)
    train = torch.randint(0, 16, (40, 8), generator=g)
    probe = mean_gradient(model, comp, torch.randint(0, 8, (8, 4), generator=g).repeat(1, 2), copy_target_probe())
    # alpha 1.0: at MDA's 0.1 this micro Llama gives 0.66 (0.90 at 1.0; see attribution/README.md), the
    # Kronecker approximation error of a peaky RMSNorm model, not label noise (32 label samples: 0.64).
    factors = fit_ekfac(model, comp, fit, label_samples=8, damping_alpha=1.0)
    assert factors.q_a["qk"].shape == (16, 16) and factors.q_s["qk"].shape == (8, 8)  # no bias column: Llama has none
    ek, _ = influence_scores(model, factors, train, probe)
    ggn = _exact_ggn_llama(model, comp, fit)
    damp = factors.damping_alpha * factors.lam["qk"].mean()
    v = torch.linalg.solve(ggn + damp * torch.eye(len(ggn)), flatten_blocks(probe))
    exact = -(flatten_blocks(component_gradients(model, comp, train)) @ v)
    rho = spearmanr(ek.numpy(), exact.detach().numpy()).statistic
    print(f"spearman(EK-FAC, exact damped GGN), micro Llama GQA = {rho:.3f}")
    assert rho > 0.8, rho
