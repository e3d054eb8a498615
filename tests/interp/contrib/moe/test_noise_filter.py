import pytest
import torch

from interp.contrib.moe.noise_filter import (
    DenseMLP,
    Top1MoE,
    iso_dense_width,
    modular_task,
    n_params,
    noise_energy_fraction,
    perturbation_sensitivity,
    routing_purity,
)


@pytest.mark.parametrize("d_in,d_out,h,k", [(32, 1, 16, 4), (64, 3, 16, 4), (8, 2, 3, 2)])
def test_iso_parameter_width(d_in, d_out, h, k):
    moe, dense = (
        n_params(Top1MoE(d_in, d_out, h, k)),
        n_params(DenseMLP(d_in, d_out, iso_dense_width(d_in, d_out, h, k))),
    )
    assert abs(moe - dense) <= (d_in + 1 + d_out) / 2 + 1


def test_moe_forward_matches_a_per_row_loop():
    torch.manual_seed(0)
    moe = Top1MoE(5, 2, 3, 3)
    x = torch.randn(7, 5)
    out = moe(x)
    for i in range(7):
        gate = torch.softmax(moe.router.weight @ x[i], -1)
        e = int(gate.argmax())
        h = torch.relu(moe.w1[e] @ x[i] + moe.b1[e])
        assert torch.allclose(out[i], gate[e] * (moe.w2[e] @ h + moe.b2[e]), atol=1e-6)
        assert int(moe.last_experts[i]) == e


def test_noise_energy_fraction_closed_forms():
    basis = torch.eye(4)[:, :1]
    assert noise_energy_fraction(torch.eye(4)[:1], basis) == pytest.approx(0.0)  # reads only the signal
    assert noise_energy_fraction(torch.eye(4)[1:], basis) == pytest.approx(1.0)  # blind to it
    assert noise_energy_fraction(torch.eye(4), basis) == pytest.approx(3 / 4)  # isotropic: 1 - r/d
    assert noise_energy_fraction(torch.tensor([[1.0, 1.0, 0, 0]]), basis) == pytest.approx(0.5)


def test_sensitivity_of_a_linear_map_is_its_frobenius_norm_over_d():
    lin = torch.nn.Linear(6, 2, bias=True)
    expected = float(lin.weight.detach().pow(2).sum() / 6)
    x = torch.randn(20000, 6)
    assert perturbation_sensitivity(lin, x, eps=0.5) == pytest.approx(expected, rel=0.03)


def test_routing_purity_and_task():
    assert routing_purity(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 1, 1])) == 1.0
    assert routing_purity(torch.tensor([0, 1, 0, 1]), torch.tensor([0, 0, 1, 1])) == 0.5
    t = modular_task(200, 0.0, seed=0)
    assert t.x.shape == (200, 32) and t.y.shape == (200, 1) and t.bases.shape == (4, 32, 5)
    b = t.bases.transpose(1, 2).reshape(20, 32)
    assert torch.allclose(b @ b.T, torch.eye(20), atol=1e-5)  # mutually orthogonal module subspaces
    # noiseless rows lie in their module's subspace
    q = t.bases[t.module]
    assert torch.allclose(torch.einsum("ndr,nr->nd", q, torch.einsum("ndr,nd->nr", q, t.x)), t.x, atol=1e-4)
    same = modular_task(10, 1.0, seed=5, spec_seed=0)
    assert torch.equal(same.bases, t.bases)


def test_bad_input():
    with pytest.raises(ValueError, match="n_modules"):
        modular_task(10, 0.1, 0, n_modules=8, d=16, r=4)
    with pytest.raises(ValueError, match="sigma"):
        modular_task(10, -1.0, 0)
    with pytest.raises(ValueError, match="n_experts"):
        Top1MoE(4, 1, 2, 1)
    with pytest.raises(ValueError, match="basis"):
        noise_energy_fraction(torch.zeros(2, 3), torch.zeros(4, 1))
    with pytest.raises(ValueError, match="eps"):
        perturbation_sensitivity(DenseMLP(2, 1, 2), torch.zeros(3, 2), eps=0)
    with pytest.raises(ValueError, match="same shape"):
        routing_purity(torch.tensor([0]), torch.tensor([0, 1]))
