import math

import pytest
import torch
import torch.nn.functional as F

from interp.contrib.moe.ssmoe import (
    MoEBlock,
    SSMoERouter,
    expert_load,
    load_entropy,
    mixed_routing,
    spectral_directions,
    ssmoe_logits,
)


def _official_directions(gate_w, up_w, down_w, router_w, k):
    """Slow reference: the loop of the official OlmoeSparseMoeBlock (torch.svd, signed top-k, mean)."""
    d = gate_w.shape[-1]
    cols = []
    for e in range(gate_w.shape[0]):
        per = []
        for mat in (gate_w[e], up_w[e], down_w[e].T):
            _, _, v = torch.svd(mat.reshape(-1, d))
            sim = (router_w[e].reshape(1, -1) @ v).reshape(-1)
            per.append(v[:, torch.topk(sim, k=k).indices].mean(-1))
        cols.append(torch.stack(per))
    return torch.stack(cols)


def test_directions_match_official_loop():
    torch.manual_seed(0)
    n, h, d = 4, 12, 6
    g, u, dn, r = torch.randn(n, h, d), torch.randn(n, h, d), torch.randn(n, d, h), torch.randn(n, d)
    ours = spectral_directions(g, u, dn, r, k=3)
    torch.testing.assert_close(ours, _official_directions(g, u, dn, r, 3), atol=1e-5, rtol=1e-5)


def test_directions_exact_on_known_svd():
    d = 4
    v = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(1)))[0]  # orthonormal columns
    mat = torch.diag(torch.tensor([4.0, 3.0, 2.0, 1.0])) @ v.T  # right singular vectors: columns of v
    gate = mat[None]
    router = (v[:, 2] + 0.5 * v[:, 0])[None]  # aligned with v2 most, then v0
    dirs = spectral_directions(gate, gate, mat.T[None], router, k=2, signed=False)
    expect = (v[:, 2] + v[:, 0]) / 2
    for m in range(3):
        torch.testing.assert_close(dirs[0, m], expect, atol=1e-5, rtol=0)


def test_logits_and_routing_exact():
    dirs = torch.tensor([[[1.0, 0], [1, 0], [0, 1]], [[0, 1.0], [0, 1], [0, 1]]])  # [2 experts, 3, 2]
    x = torch.tensor([[3.0, 0.0]])
    torch.testing.assert_close(ssmoe_logits(x, dirs), torch.tensor([[2.0, 0.0]]))
    router = torch.tensor([[0.0, 1.0]])
    w, e = mixed_routing(router, ssmoe_logits(x, dirs), c=0.0, top_k=1)
    assert e.item() == 1 and w.item() == pytest.approx(1.0)
    w, e = mixed_routing(router, ssmoe_logits(x, dirs), c=0.5, top_k=2, normalize=False)
    p = 0.5 * F.softmax(router, -1) + 0.5 * F.softmax(torch.tensor([[2.0, 0.0]]), -1)
    torch.testing.assert_close(w, p.sort(descending=True).values)
    assert e[0, 0].item() == 0  # the spectral router pulls the token to expert 0


def test_load_entropy():
    assert load_entropy(expert_load(torch.tensor([0, 1, 2, 3]), 4)) == pytest.approx(1.0)
    assert load_entropy(expert_load(torch.tensor([2, 2, 2]), 4)) == pytest.approx(0.0)
    assert load_entropy(torch.tensor([0.5, 0.5, 0, 0]), normalized=False) == pytest.approx(math.log(2))


def test_block_matches_per_token_loop():
    torch.manual_seed(0)
    blk = MoEBlock(d_model=8, d_hidden=16, n_experts=4, top_k=2)
    blk.ssmoe = SSMoERouter.from_block(blk, k=3, c=0.3)
    x = torch.randn(5, 8)
    out = blk(x)
    for i in range(5):
        w, e = blk.ssmoe.route(x[i], blk.router(x[i]), top_k=2)
        ref = 0
        for j in range(2):
            ex = e[j].item()
            hid = F.silu(blk.gate_w[ex] @ x[i]) * (blk.up_w[ex] @ x[i])
            ref = ref + w[j] * (blk.down_w[ex] @ hid)
        torch.testing.assert_close(out[i], ref, atol=1e-5, rtol=1e-5)


def test_bad_input():
    g = torch.randn(2, 6, 4)
    with pytest.raises(ValueError, match="down_w"):
        spectral_directions(g, g, torch.randn(2, 6, 4), torch.randn(2, 4), k=2)
    with pytest.raises(ValueError, match="k=9"):
        spectral_directions(g, g, torch.randn(2, 4, 6), torch.randn(2, 4), k=9)
    with pytest.raises(ValueError, match="mixing ratio"):
        mixed_routing(torch.zeros(1, 2), torch.zeros(1, 2), c=1.5, top_k=1)
    with pytest.raises(ValueError, match="expert ids"):
        expert_load(torch.tensor([0, 5]), 4)


def test_router_fixes_equalise_rows_and_centre_states():
    import torch
    from torch import nn

    from interp.contrib.moe.router_fixes import fixed_router

    torch.manual_seed(0)
    router = nn.Linear(6, 4, bias=False)
    with torch.no_grad():
        router.weight[:2] *= 10  # two rows grew: they win every token
    before = router.weight.detach().clone()
    fixed = fixed_router(router)
    norms = fixed.weight.norm(dim=1)
    assert torch.allclose(norms, norms.median().expand(4)) and fixed.bias is None
    states = torch.randn(50, 6) + 5.0  # a shared component in every state
    centred = fixed_router(router, states, equalise=False)
    assert torch.allclose(centred(states).mean(0), torch.zeros(4), atol=1e-4)  # the mean state routes to zero logits
    assert torch.equal(router.weight, before)  # the block's own router is unchanged
    with pytest.raises(ValueError, match=r"states must be \[n, 6\]"):
        fixed_router(router, torch.randn(3, 5))
