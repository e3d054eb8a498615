"""Coherence quantities against brute force, their zero and non-zero cases, gradients, invariance."""

import torch

from sae.coherence import coh_loss, coh_normalised, coh_terms


def _brute(M):
    B, L = M.shape
    r, c = M, M.T
    W = M**2 / (M**2).sum(1, keepdim=True)
    V = (M**2 / (M**2).sum(0, keepdim=True)).T
    phi = [sum(W[i, j] * c[j] for j in range(L)) for i in range(B)]
    psi = [sum(V[j, i] * r[i] for i in range(B)) for j in range(L)]
    var_r = torch.stack([sum(W[i, j] * (phi[i] - c[j]).square().sum() for j in range(L)) for i in range(B)])
    cov_r = torch.stack([sum(W[i, j] * (r[i] - psi[j]).square().sum() for j in range(L)) for i in range(B)])
    var_c = torch.stack([sum(V[j, i] * (psi[j] - r[i]).square().sum() for i in range(B)) for j in range(L)])
    cov_c = torch.stack([sum(V[j, i] * (c[j] - phi[i]).square().sum() for i in range(B)) for j in range(L)])
    return {"var_r": var_r, "cov_r": cov_r, "var_c": var_c, "cov_c": cov_c}


def test_closed_form_equals_brute_force():
    M = torch.rand(6, 5, dtype=torch.float64) * (torch.rand(6, 5, dtype=torch.float64) > 0.3)
    M[:, 0] += 0.1  # no empty rows
    M[0] += 0.1
    fast, slow = coh_terms(M), _brute(M)
    for k in fast:
        assert torch.allclose(fast[k], slow[k], atol=1e-10), k


def test_permutation_matrix_is_perfectly_coherent():
    M = torch.eye(5)[torch.randperm(5)] * 2.0
    for v in coh_terms(M).values():
        assert v.abs().max() < 1e-6
    assert coh_loss(M) == 0


def test_feature_shared_by_far_apart_samples_has_large_var_c():
    M = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    t = coh_terms(M)
    assert t["var_c"][0] > 0.4  # latent 0 fires on samples 0 and 1, which use different other latents
    M2 = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert coh_terms(M2)["var_c"][0] < 1e-6  # the same two samples, now identical: no spread


def test_gradcheck_and_scale_invariance():
    M = (torch.rand(5, 4, dtype=torch.float64) + 0.05).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda m: coh_loss(m, tau=0.0, detach_scale=False), (M,))
    a, b = coh_normalised(M.detach()), coh_normalised(7.5 * M.detach())
    for k in a:
        assert torch.allclose(a[k], b[k])
