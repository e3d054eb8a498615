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


def micro_neox(seed=0):
    """GPT-NeoX with d_model 16, 4 heads of d_head 4: one head's W_Q, W_K (+bias) = 8 x 17 = 136 parameters."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    cfg = GPTNeoXConfig(
        vocab_size=16,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        max_position_embeddings=16,
        use_parallel_residual=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        tie_word_embeddings=False,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    hf = GPTNeoXForCausalLM(cfg)
    for p in hf.parameters():  # larger weights than the default init, so attention is not uniform
        p.data.mul_(8.0) if p.ndim == 2 else None
    return interp.HookedModel(hf, None)


def _rows(model, comp):
    """Indices of the head's q and k rows in the fused (neox: per head q|k|v) projection."""
    dh = model.d_head
    base = comp.head * 3 * dh
    return torch.cat([torch.arange(base, base + dh), torch.arange(base + dh, base + 2 * dh)])


def test_component_gradient_equals_autograd_on_weight_rows():
    model = micro_neox()
    comp = HeadComponent(1, 2, "qk")
    ids = torch.randint(0, 16, (3, 10), generator=torch.Generator().manual_seed(0))
    g = component_gradients(model, comp, ids)["qk"]  # [3, 8, 17]
    att = model.hf_model.gpt_neox.layers[1].attention.query_key_value
    rows = _rows(model, comp)
    for b in range(3):
        gw, gb = torch.autograd.grad(
            lm_loss(model, ids[b : b + 1], torch.ones_like(ids[b : b + 1])).sum(), [att.weight, att.bias]
        )
        ref = torch.cat([gw[rows], gb[rows, None]], -1)
        torch.testing.assert_close(g[b], ref, rtol=1e-4, atol=1e-6)


def _exact_ggn(model, comp, ids):
    """The exact GGN over the head's fused q/k rows and biases: 136 x 136."""
    att_name = f"gpt_neox.layers.{comp.layer}.attention.query_key_value"
    att = model.hf_model.get_submodule(att_name)
    rows = _rows(model, comp)
    theta = torch.cat([att.weight[rows], att.bias[rows, None]], -1).detach().clone().requires_grad_(True)
    w = att.weight.detach().clone().index_put((rows,), theta[:, :-1])
    bias = att.bias.detach().clone().index_put((rows,), theta[:, -1])
    return exact_ggn(model, theta, {f"{att_name}.weight": w, f"{att_name}.bias": bias}, ids)


@pytest.mark.slow
def test_ekfac_influence_rank_correlates_with_exact_inverse_ggn_influence():
    model = micro_neox()
    comp = HeadComponent(1, 2, "qk")
    g = torch.Generator().manual_seed(1)
    fit = torch.randint(0, 16, (16, 8), generator=g)
    train = torch.randint(0, 16, (40, 8), generator=g)
    probe_ids = torch.randint(0, 8, (8, 4), generator=g).repeat(1, 2)
    probe = mean_gradient(model, comp, probe_ids, copy_target_probe())
    factors = fit_ekfac(model, comp, fit, label_samples=8)
    ek, _ = influence_scores(model, factors, train, probe)
    ggn = _exact_ggn(model, comp, fit)
    damp = factors.damping_alpha * factors.lam["qk"].mean()
    v = torch.linalg.solve(ggn + damp * torch.eye(len(ggn)), flatten_blocks(probe))
    exact = -(flatten_blocks(component_gradients(model, comp, train)) @ v)
    rho = spearmanr(ek.numpy(), exact.detach().numpy()).statistic
    print(f"spearman(EK-FAC, exact damped GGN) = {rho:.3f}")
    assert rho > 0.8, rho


def test_component_errors_name_the_problem():
    model = micro_neox()
    with pytest.raises(ValueError, match="head 9 does not exist"):
        HeadComponent(1, 9).check(model)
    with pytest.raises(ValueError, match="layer 5 does not exist"):
        HeadComponent(5, 0).check(model)
    with pytest.raises(ValueError, match="L<layer>H<head>"):
        HeadComponent.parse("head3")
    assert HeadComponent.parse("L1H3:qkvo") == HeadComponent(1, 3, "qkvo")
