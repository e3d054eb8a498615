"""PolySAE decoder against the explicit polynomial, the linear limit, the QR retraction, overhead."""

import itertools

import torch
from sae_lens import SAETrainer
from sae_lens.config import SAETrainerConfig

from sae import make_sae


def _poly(n=12, d=8, r=(6, 3, 3), **kw):
    sae = make_sae("poly", d, n, seed=0, k=3, rank1=r[0], rank2=r[1], rank3=r[2], dtype="float64", **kw)
    with torch.no_grad():
        sae.lambda2.fill_(-0.7)
        sae.lambda3.fill_(0.4)
    return sae


def test_decode_equals_explicit_sum_over_atoms():
    sae = _poly()
    z = torch.rand(3, 12, dtype=torch.float64)
    U, (_, _, r3) = sae.U, sae.ranks
    A = sae.linear_atoms()
    want = sae.b_dec + z @ A
    for b in range(3):
        for i, j in itertools.product(range(12), repeat=2):
            want[b] += sae.lambda2 * z[b, i] * z[b, j] * sae.pair_atom(i, j)
        for i, j, k in itertools.product(range(12), repeat=3):
            want[b] += sae.lambda3 * z[b, i] * z[b, j] * z[b, k] * (sae.C3 @ (U[i, :r3] * U[j, :r3] * U[k, :r3]))
    assert torch.allclose(sae.decode(z), want, atol=1e-10)


def test_zero_coefficients_give_a_linear_sae():
    sae = _poly(lambda2_init=0.0, lambda3_init=0.0)
    with torch.no_grad():
        sae.lambda2.zero_()
        sae.lambda3.zero_()
    z = torch.rand(4, 12, dtype=torch.float64)
    assert torch.allclose(sae.decode(z), z @ (sae.U @ sae.C1.T) + sae.b_dec)


def test_interaction_strength_is_lambda2_times_pair_atom_norm():
    sae = _poly()
    S = sae.interaction_strength()
    for i, j in [(0, 1), (3, 7), (5, 5)]:
        assert torch.isclose(S[i, j], sae.lambda2.abs() * sae.pair_atom(i, j).norm())


def test_u_stays_orthonormal_through_sae_lens_training_and_grads_are_finite():
    sae = make_sae("poly", 16, 64, seed=0, k=4, rank2=8, rank3=8)
    trainer = SAETrainer(
        cfg=SAETrainerConfig(total_training_samples=64 * 12, train_batch_size_samples=64, lr=1e-2, lr_end=1e-2),
        sae=sae,
        data_provider=iter(lambda: torch.randn(64, 16), None),
    )
    out = trainer.step(torch.randn(64, 16))
    for p in sae.parameters():
        assert p.grad is None or torch.isfinite(p.grad).all()
    trainer.fit()
    drift = (sae.U.T @ sae.U - torch.eye(16)).abs().max()
    assert drift > 1e-4  # the last Adam step moved U off the manifold ...
    old = sae.U.detach().clone()
    sae.retract_()
    assert (sae.U.T @ sae.U - torch.eye(16)).abs().max() < 1e-5  # ... and the retraction brings it back
    R = sae.U.detach().T @ old  # old = U_new R with R upper triangular, positive diagonal
    assert torch.allclose(R.tril(-1), torch.zeros(16, 16), atol=1e-5)
    assert (torch.diagonal(R) > 0).all()
    assert torch.isfinite(out.loss)


def test_no_retraction_ablation_leaves_u_alone():
    sae = make_sae("poly", 8, 32, seed=0, k=2, rank2=4, rank3=4, retract=False)
    with torch.no_grad():
        sae.U.mul_(2.0)
    before = sae.U.detach().clone()
    from sae_lens.saes.sae import TrainStepInput

    sae.training_forward_pass(TrainStepInput(torch.randn(4, 8), {}, None, 0, False))
    assert torch.equal(sae.U, before)


def test_parameter_overhead_matches_the_paper_for_gpt2_small():
    d, n = 768, 16384
    poly = make_sae("poly", d, n, k=64, rank2=64, rank3=64, device="meta")
    vanilla = make_sae("topk", d, n, k=64, device="meta")
    count = lambda m: sum(p.numel() for p in m.parameters() if p.requires_grad)  # noqa: E731
    overhead = count(poly) / count(vanilla) - 1
    assert 0.02 < overhead < 0.035, overhead  # paper: "~3%", spec: 2.7%
