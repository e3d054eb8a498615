"""EK-FAC over whole Linear modules: per-example gradients equal autograd's, the fit tracks the exact damped GGN,
and the LDS method's scores have the harness's sign."""

import pytest
import torch
from scipy.stats import spearmanr

from attribution.ekfac_linear import fit_linear_ekfac, linear_gradients, linear_influence, linear_modules
from attribution.influence import lm_loss
from attribution.lds_methods import METHODS
from tests.attribution.helpers import exact_ggn
from tests.attribution.test_influence import micro_neox

DENSE = "gpt_neox.layers.1.attention.dense"


def test_module_patterns_choose_and_refuse():
    model = micro_neox()
    every = linear_modules(model)
    assert len(every) == 8 and "lm_head" not in every  # 4 Linears per layer; the unembedding only by name
    assert set(linear_modules(model, ["*.mlp.*"])) == {n for n in every if ".mlp." in n}
    assert "lm_head" in linear_modules(model, ["lm_head"])
    with pytest.raises(ValueError, match="match no Linear"):
        linear_modules(model, ["*.nothing.*"])


def test_per_example_gradients_equal_autograd():
    model = micro_neox()
    mods = linear_modules(model, ["*.layers.1.*"])
    ids = torch.randint(0, 16, (3, 8), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    got = linear_gradients(model, mods, ids, mask)
    for b in range(len(ids)):
        loss = lm_loss(model, ids[b : b + 1], mask[b : b + 1]).sum()
        for name, m in mods.items():
            gw, gb = torch.autograd.grad(loss, [m.weight, m.bias], retain_graph=True)
            torch.testing.assert_close(got[name][b], torch.cat([gw, gb[:, None]], 1), rtol=1e-4, atol=1e-5)


def test_ekfac_of_one_module_tracks_the_exact_damped_ggn():
    model = micro_neox()
    g = torch.Generator().manual_seed(1)
    fit = torch.randint(0, 16, (16, 8), generator=g)
    train = torch.randint(0, 16, (40, 8), generator=g)
    query = torch.randint(0, 16, (1, 8), generator=g)
    mods = linear_modules(model, [DENSE])
    f = fit_linear_ekfac(model, mods, fit, label_samples=8)
    ek = linear_influence(model, f, mods, train, query)[:, 0]
    m = mods[DENSE]
    theta = torch.cat([m.weight, m.bias[:, None]], 1).detach().clone().requires_grad_(True)
    ggn = exact_ggn(model, theta, {f"{DENSE}.weight": theta[:, :-1], f"{DENSE}.bias": theta[:, -1]}, fit)
    v = torch.linalg.solve(
        ggn + f.damping()[DENSE] * torch.eye(len(ggn)), linear_gradients(model, mods, query)[DENSE][0].flatten()
    )
    exact = -(linear_gradients(model, mods, train)[DENSE].flatten(1) @ v)
    rho = spearmanr(ek.numpy(), exact.detach().numpy()).statistic
    assert rho > 0.8, rho


def test_the_lds_method_scores_training_rows_as_helpful_to_themselves():
    model = micro_neox()
    g = torch.Generator().manual_seed(2)
    train = torch.randint(0, 16, (24, 8), generator=g)
    for name in ("ekfac_linear", "ekfac_linear_attn", "ekfac_linear_mlp"):
        s = METHODS[name](model, None, train, train[:6], fit_rows=16)
        assert s.shape == (24, 6) and torch.isfinite(s).all()
        assert (s[torch.arange(6), torch.arange(6)] > s.median()).all(), name  # self-influence: helpful
