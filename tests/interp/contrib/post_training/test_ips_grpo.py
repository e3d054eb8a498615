import math

import pytest
import torch

from interp.contrib.post_training.experiments.ips_grpo import ENT, main, tune_task_beta
from interp.contrib.post_training.ips_grpo import (
    SumPolicy,
    answer_diversity,
    expected_update,
    group_frequency,
    grpo_advantages,
    kl,
    sample_weights,
    sum_rewards,
    target_distribution,
    train_bandit,
    train_sum_policy,
)


def test_weights_hand_computed():
    r = torch.tensor([1.0, 0.0, 1.0, 0.0])
    p = torch.tensor([0.5, 0.25, 0.5, 0.25])
    o = torch.tensor([0, 1, 0, 2])
    a = grpo_advantages(r)  # mean 0.5, sample std sqrt(1/3)
    torch.testing.assert_close(a, torch.tensor([1.0, -1.0, 1.0, -1.0]) * 0.5 / (1 / 3) ** 0.5, atol=1e-5, rtol=0)
    torch.testing.assert_close(sample_weights(r, p, "ips"), torch.tensor([2.0, 0.0, 2.0, 0.0]))
    torch.testing.assert_close(group_frequency(o), torch.tensor([0.5, 0.25, 0.5, 0.25]))
    torch.testing.assert_close(sample_weights(r, p, "ips-group", o), torch.tensor([2.0, 0.0, 2.0, 0.0]))
    torch.testing.assert_close(sample_weights(r, p, "ips-adv"), a / p)


def test_ips_fixed_point_is_reward_proportional():
    r = torch.tensor([1.0, 1.0, 0.5, 0.1])
    target = target_distribution(r)
    # Σ_o r(o)(e_o - π) vanishes exactly at π ∝ r; the expected-return update does not (it pushes to the max)
    assert expected_update(target.log(), r, "ips").abs().max() < 1e-12
    ret = expected_update(target.log(), r, "return")
    assert ret[0] > 0 and ret[3] < 0


def test_bandit_ips_reaches_target_grpo_collapses():
    r = torch.tensor([1.0, 1.0, 0.5, 0.05])
    target = target_distribution(r)
    assert kl(target, train_bandit(r, "ips", steps=1500, seed=0)) < 0.02
    p = train_bandit(r, "grpo", steps=1500, seed=0)
    assert kl(target, p) > 0.3 and float(p[2]) < 0.05  # the r=0.5 outcome (target 0.20) is dropped


def test_sum_task_table_and_metrics():
    table = sum_rewards(torch.tensor([0, 18, 9]))
    assert table.sum(1).tolist() == [1.0, 1.0, 10.0]  # (0,0); (9,9); ten pairs summing to 9
    pol = SumPolicy(3)
    torch.nn.init.zeros_(pol.out.weight), torch.nn.init.zeros_(pol.out.bias)  # uniform policy
    d = answer_diversity(pol, torch.tensor([0, 18, 9]))
    assert d["accuracy"] == pytest.approx((1 + 1 + 10) / 100 / 3)
    assert d["correct_entropy"] == pytest.approx(1.0)


def test_bad_input():
    with pytest.raises(ValueError, match="method"):
        sample_weights(torch.ones(2), torch.ones(2), "ppo")
    with pytest.raises(ValueError, match="> 0"):
        sample_weights(torch.ones(2), torch.tensor([0.5, 0.0]), "ips")
    with pytest.raises(ValueError, match="rewards >= 0"):
        sample_weights(torch.tensor([1.0, -1.0]), torch.ones(2) / 2, "ips")
    with pytest.raises(ValueError, match="outcome ids"):
        sample_weights(torch.ones(2), torch.ones(2) / 2, "ips-group")
    with pytest.raises(ValueError, match="at least 2"):
        grpo_advantages(torch.ones(1))
    with pytest.raises(ValueError, match="group >= 2"):
        train_bandit(torch.ones(3), "ips", group=1)
    assert math.isfinite(kl(torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5])))


def test_entropy_bonus_baseline_ends_the_bandit_collapse_but_not_at_pi_proportional_to_r():
    # the strong baseline's fixed point is π ∝ exp(r/β): all good modes kept, yet not π ∝ r as IPS reaches
    r = torch.tensor([1.0, 1.0, 0.5, 0.05])
    target = target_distribution(r)
    p = train_bandit(r, "grpo", steps=1500, seed=0, entropy_coef=1.5)
    assert float(p[2]) > 0.1 and kl(target, p) < 0.1  # the r=0.5 outcome that plain GRPO drops is kept
    assert kl(target, train_bandit(r, "ips", steps=1500, seed=0)) < kl(target, p) / 10
    with pytest.raises(ValueError, match="entropy_coef"):
        train_bandit(r, "grpo", entropy_coef=-1.0)


def test_equal_accuracy_tuning_picks_a_beta_that_keeps_ips_accuracy():
    # tiny version of the task row: 3 prompts, 60 steps, 2 tuning seeds, 3 coefficients
    sums = torch.tensor([6, 9, 12])
    beta, floor, grid = tune_task_beta(sums, 60, betas=(0.0, 0.5, 5.0), tune_seeds=(100, 101))
    assert grid[5.0]["accuracy"] < floor  # a huge bonus spreads mass onto wrong answers and is excluded
    assert beta in (0.0, 0.5) and grid[beta]["accuracy"] >= floor
    assert grid[0.5]["modes_covered"] > grid[0.0]["modes_covered"]  # the bonus widens coverage
    d = answer_diversity(train_sum_policy("grpo", sums, steps=60, seed=0, entropy_coef=beta)[0], sums)
    assert 0 <= d["accuracy"] <= 1


def test_quick_experiment_runs():
    out = main(["--quick"])
    assert set(out["bandit"]) == {"grpo", "ips", "ips-group", "ips-adv", ENT}
    assert set(out["task"]) == {"grpo", "ips", "ips-group", "ips-adv", ENT}  # both controls on the sums task too
    assert out["strong_baseline"]["bandit_beta"] > 0
