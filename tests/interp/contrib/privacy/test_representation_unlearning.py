import pytest
import torch
from torch import nn

import interp
from interp.contrib.privacy.representation_unlearning import (
    RepresentationTransform,
    UnlearnConfig,
    fit_transform,
    gaussian_kl,
)
from tests.tiny import tiny_hf


def test_transform_starts_as_identity_and_hook_edits_positions():
    t = RepresentationTransform(64).eval()
    z = torch.randn(3, 64)
    torch.testing.assert_close(t(z), z)
    model = interp.HookedModel(tiny_hf("llama"))
    ids = torch.tensor([[3, 4, 5, 6]])
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_post", t.hook(positions=-1))]):
        same = model(ids)
    torch.testing.assert_close(same, model(ids))
    with torch.no_grad():
        t.mlp[2].bias[:64] = 1.0  # shift every state by 1 at the last position
    _, cache = model.run_with_cache(ids, names="blocks.0.hook_resid_post")
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_post", t.hook(positions=-1))]):
        _, edited = model.run_with_cache(ids, names="blocks.0.hook_resid_post")
    diff = edited["resid_post", 0] - cache["resid_post", 0]
    assert diff[0, :3].abs().max() == 0 and torch.allclose(diff[0, 3], torch.ones(64), atol=1e-5)


def test_gaussian_kl_exact():
    mu, ls = torch.tensor([1.0, 0.0]), torch.log(torch.tensor([2.0, 1.0]))
    # KL(N(1,4)||N(0,1)) = (4 + 1 - 1 - log 4)/2 ; second dim 0
    expect = (4 + 1 - 1 - torch.log(torch.tensor(4.0))) / 2
    torch.testing.assert_close(gaussian_kl(mu, ls, torch.zeros(2), torch.zeros(2)), expect)


def _toy(seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(4, 8, generator=g) * 3
    y = torch.randint(4, (400,), generator=g)
    z = centers[y] + torch.randn(400, 8, generator=g)
    head = nn.Linear(8, 4)
    opt = torch.optim.Adam(head.parameters(), lr=0.05)
    for _ in range(200):
        opt.zero_grad()
        nn.functional.cross_entropy(head(z), y).backward()
        opt.step()
    for p in head.parameters():
        p.requires_grad_(False)
    return z, y, head


@pytest.mark.parametrize("regime", ["retain_forget", "forget_only"])
def test_forgets_a_class_and_keeps_the_rest(regime):
    z, y, head = _toy()
    f, r = y == 3, y != 3
    assert (head(z[f]).argmax(-1) == 3).float().mean() > 0.9
    t = RepresentationTransform(8, 32)
    cfg = (
        UnlearnConfig(regime=regime, steps=250, beta=2.0)
        if regime == "retain_forget"
        else UnlearnConfig(regime=regime, steps=250, beta=10.0, l2=0.1)
    )
    fit_transform(
        t,
        lambda s, i: head(s),
        z[f],
        y[f],
        z[r] if regime == "retain_forget" else None,
        y[r] if regime == "retain_forget" else None,
        cfg,
    )
    with torch.no_grad():
        acc_f = (head(t(z[f])).argmax(-1) == 3).float().mean()
        acc_r = (head(t(z[r])).argmax(-1) == y[r]).float().mean()
    assert acc_f < 0.2 and acc_r > 0.85


def test_bad_input():
    with pytest.raises(ValueError, match="regime"):
        UnlearnConfig(regime="both")
    z = torch.randn(5, 8)
    with pytest.raises(ValueError, match="forget_only"):
        fit_transform(RepresentationTransform(8), lambda s, i: s, z, torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="width"):
        RepresentationTransform(4)(z)
