import math

import pytest
import torch

from interp.contrib.post_training.experiments.scpo import main
from interp.contrib.post_training.scpo import (
    AttributePolicy,
    condition_dpo_loss,
    curriculum_pool,
    edit_images,
    hallucinated_pairs,
    hallucination_rate,
    partner,
    sample_captions,
    sample_images,
)


def test_generators():
    g = torch.Generator().manual_seed(0)
    v = sample_images(200, 6, g)
    assert (v.sum(1) >= 1).all()
    clean = sample_captions(v, 3, g)
    assert (v.gather(1, clean) == 1).all()  # p_halluc = 0: only present attributes
    swapped = sample_captions(v, 3, torch.Generator().manual_seed(0), p_halluc=1.0)
    assert torch.equal(swapped, partner(sample_captions(v, 3, torch.Generator().manual_seed(0))))
    assert partner(torch.tensor([0, 1, 4, 5])).tolist() == [1, 0, 5, 4]


def test_pairs_and_edits():
    g = torch.Generator().manual_seed(1)
    v = torch.tensor([[1.0, 0, 1, 0], [1.0, 1, 0, 0]])
    y_w = torch.tensor([[0, 0, 2], [0, 1, 1]])
    y_l = hallucinated_pairs(v, y_w, g, hard=torch.tensor([True, True]))
    diff = y_l != y_w
    assert diff.sum(1).tolist() == [1, 1]
    assert (v.gather(1, y_l)[diff] == 0).all()  # the replacement names an absent attribute
    # row 0, hard: the partner of 0 is 1 and of 2 is 3, both absent, so the new token is that partner
    assert int(y_l[0][diff[0]]) == int(partner(y_w[0][diff[0]]))
    v2 = edit_images(v, y_w, g)
    removed = v - v2
    assert removed.sum(1).tolist() == [1.0, 1.0]
    for i in range(2):
        assert int(removed[i].argmax()) in y_w[i].tolist()


def test_condition_loss_and_curriculum():
    z = torch.zeros(4)
    assert float(condition_dpo_loss(z, z, z, z, 0.1)) == pytest.approx(math.log(2))
    d = torch.tensor([5.0, 1.0, 3.0, 0.0, 4.0, 2.0, 9.0, 8.0, 7.0, 6.0])
    assert sorted(curriculum_pool(d, 0, 100).tolist()) == [1, 3, 5]  # the easiest 30%
    assert len(curriculum_pool(d, 70, 100)) == 10


def test_hallucination_rate_exact_for_a_deterministic_policy():
    pol = AttributePolicy(4, 2)
    with torch.no_grad():
        for p in pol.parameters():
            p.zero_()
        pol.mlp[2].bias[2] = 50.0  # always says attribute 2
    v = torch.tensor([[0.0, 0, 1, 1], [1.0, 0, 0, 0]])
    h, cov = hallucination_rate(pol, v, torch.Generator().manual_seed(0))
    assert h == pytest.approx(0.5) and cov == pytest.approx((0.5 + 0.0) / 2)


def test_bad_input():
    with pytest.raises(ValueError, match="even"):
        sample_images(3, 5, torch.Generator())
    with pytest.raises(ValueError, match="present attribute"):
        sample_captions(torch.zeros(2, 4), 3, torch.Generator())
    with pytest.raises(ValueError, match="beta"):
        condition_dpo_loss(torch.zeros(1), torch.zeros(1), torch.zeros(1), torch.zeros(1), 0.0)
    with pytest.raises(ValueError, match="start"):
        curriculum_pool(torch.zeros(3), 0, 10, start=0.0)


def test_quick_experiment_runs():
    out = main(["--quick"])
    assert "SCPO" in out[0]
