"""C²R loss against hand-computed cases, the exact reference, gradcheck, and its step schedule."""

import torch

from sae import make_sae
from sae.c2r import c2r_loss, c2r_weight


def _reference(F, W, alpha=1.0):
    """All-pairs loop over latents: the definition, written plainly."""
    n = W.shape[0]
    d = W / W.norm(dim=-1, keepdim=True)
    a = F.pow(2).sum(0).sqrt()
    total = 0.0
    for i in range(n):
        cos = [float(d[i] @ d[j]) if j != i else -2.0 for j in range(n)]
        j = max(range(n), key=lambda t: cos[t])
        total += max(0.0, cos[j]) ** 2 * float(a[i] + a[j]) ** alpha
    return total / n


def test_identical_pair_gives_2_sum_of_norms_over_n():
    n, d = 6, 8
    W = torch.eye(d)[:n].clone()
    W[1] = 3.0 * W[0]  # same direction, other length: cosine 1
    F = torch.zeros(5, n)
    F[:, 0] = torch.tensor([1.0, 0, 2, 0, 2])  # batch norm 3
    F[:, 1] = torch.tensor([0.0, 4, 0, 0, 0])  # batch norm 4: fires on *other* samples, still penalised
    F[:, 2:] = torch.rand(5, n - 2)
    assert torch.isclose(c2r_loss(F, W), torch.tensor(2 * (3 + 4) / n))


def test_anti_parallel_rows_give_zero():
    W = torch.eye(4)
    W[1] = -W[0]
    assert c2r_loss(torch.rand(7, 4), W) == 0


def test_matches_reference_exactly_and_with_alpha():
    g = torch.Generator().manual_seed(0)
    F, W = torch.rand(9, 20, generator=g), torch.randn(20, 6, generator=g)
    assert abs(float(c2r_loss(F, W)) - _reference(F, W)) < 1e-5
    assert abs(float(c2r_loss(F, W, alpha=1.7)) - _reference(F, W, 1.7)) < 1e-4
    # chunks of 4 only search within random chunks: never more than the exact value
    assert float(c2r_loss(F, W, chunk_size=4)) <= _reference(F, W) + 1e-6


def test_gradcheck_and_dead_latents_have_finite_grads():
    g = torch.Generator().manual_seed(1)
    F = torch.rand(5, 16, generator=g, dtype=torch.float64)
    W = torch.randn(16, 6, generator=g, dtype=torch.float64)
    F.requires_grad_(True)
    W.requires_grad_(True)
    gen = lambda: torch.Generator().manual_seed(3)  # noqa: E731  same chunk order each call
    assert torch.autograd.gradcheck(lambda f, w: c2r_loss(f, w, generator=gen(), chunk_size=16), (F, W))
    F2 = F.detach().clone()
    F2[:, :3] = 0
    F2.requires_grad_(True)  # three latents dead in the batch
    c2r_loss(F2, W).backward()
    assert torch.isfinite(F2.grad).all() and torch.isfinite(W.grad).all()


def test_interval_schedule_multiplies_by_m_and_skips_off_steps():
    assert [c2r_weight(s, 5.0, 5, 0) for s in range(7)] == [25.0, 0, 0, 0, 0, 25.0, 0]
    assert c2r_weight(3, 5.0, 1, 4) == 0 and c2r_weight(4, 5.0, 1, 4) == 5.0
    assert c2r_weight(0, 0.0, 5, 0) == 0


def test_aux_losses_contain_c2r_only_on_its_steps():
    from sae_lens.saes.sae import TrainStepInput

    sae = make_sae("c2r", 8, 32, seed=0, k=2, c2r_lambda=1.0, c2r_interval=2)
    x = torch.randn(16, 8)
    seen = []
    for step in range(3):
        out = sae.training_forward_pass(TrainStepInput(x, {}, None, step, False))
        seen.append("c2r_loss" in out.losses)
    assert seen == [True, False, True]
    base = make_sae("batchtopk", 8, 32, seed=0, k=2)
    out0 = base.training_forward_pass(TrainStepInput(x, {}, None, 0, False))
    sae0 = make_sae("c2r", 8, 32, seed=0, k=2, c2r_lambda=0.0)
    assert torch.equal(sae0.training_forward_pass(TrainStepInput(x, {}, None, 0, False)).loss, out0.loss)
