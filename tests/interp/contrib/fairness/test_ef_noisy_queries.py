import numpy as np
import pytest

from interp.contrib.fairness.ef_noisy_queries import (
    brute_force_best_margin,
    envy_margins,
    is_envy_free,
    median_allocation,
    noisy_estimates,
    per_item_allocation,
    planted_instance,
    threshold_allocation,
)


def test_margins_by_hand():
    v = np.array([[3.0, 1.0, 2.0], [1.0, 2.0, 2.0]])
    a1 = np.array([True, False, False])
    assert envy_margins(v, a1) == (0.0, 3.0)  # 3 - (1+2); (2+2) - 1
    assert is_envy_free(v, a1)
    assert not is_envy_free(v, np.array([False, False, True]))


def test_threshold_rule_is_the_best_prefix_of_the_difference_order():
    rng = np.random.default_rng(0)
    for _ in range(50):
        v = rng.random((2, 7))
        a1 = threshold_allocation(v)
        order = np.argsort(-(v[0] - v[1]), kind="stable")
        best = -np.inf
        for k in range(8):
            pre = np.zeros(7, dtype=bool)
            pre[order[:k]] = True
            best = max(best, min(envy_margins(v, pre)))
        assert min(envy_margins(v, a1)) == pytest.approx(best)
        assert min(envy_margins(v, a1)) <= brute_force_best_margin(v)[0] + 1e-12


def test_planted_instance_and_noise_free_recovery():
    rng = np.random.default_rng(1)
    inst = planted_instance(12, 3.0, rng)
    planted = min(envy_margins(inst.values, inst.planted))
    assert planted == pytest.approx(3.0, abs=1.0)  # Δ minus the small base imbalance
    assert brute_force_best_margin(inst.values)[0] >= planted - 1e-12
    assert is_envy_free(inst.values, threshold_allocation(inst.values))
    assert (per_item_allocation(inst.values) == inst.planted).all()


def test_an_unequal_planted_split_keeps_both_margins_and_defeats_the_median_split():
    rng = np.random.default_rng(4)
    inst = planted_instance(20, 4.0, rng, share=0.3)
    assert inst.planted.sum() == 6
    b = inst.values.mean(0)  # the shared base values
    assert b[inst.planted].sum() == pytest.approx(b[~inst.planted].sum())
    assert envy_margins(inst.values, inst.planted) == pytest.approx((4.0, 4.0))
    assert is_envy_free(inst.values, threshold_allocation(inst.values))  # noise-free: the margins pick the cut
    half = median_allocation(inst.values)
    assert half.sum() == 10 and (half >= inst.planted).all()  # the 6 planted goods and 4 of the other side
    assert not is_envy_free(inst.values, half)
    with pytest.raises(ValueError, match="share=0.01"):
        planted_instance(20, 4.0, rng, share=0.01)


def test_noisy_estimates_spend_the_budget_and_average():
    rng = np.random.default_rng(2)
    inst = planted_instance(10, 2.0, rng)
    est = noisy_estimates(inst, 2 * 10 * 7 + 5, 1.0, rng)
    assert est.queries == 140
    big = noisy_estimates(inst, 2 * 10 * 10**6, 1.0, rng)
    assert np.abs(big.values - inst.values).max() < 0.01
    assert (noisy_estimates(inst, 20, 0.0, rng).values == inst.values).all()


def test_more_queries_help_the_threshold_rule():
    rng = np.random.default_rng(3)
    rate = {}
    for r in (1, 200):
        ok = 0
        for _ in range(60):
            inst = planted_instance(30, 6.0, rng)
            ok += is_envy_free(inst.values, threshold_allocation(noisy_estimates(inst, 60 * r, 1.0, rng).values))
        rate[r] = ok / 60
    assert rate[200] >= 0.95 > rate[1]


def test_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="delta"):
        planted_instance(4, 3.0, rng)
    with pytest.raises(ValueError, match="at least two"):
        planted_instance(1, 0.5, rng)
    inst = planted_instance(4, 1.0, rng)
    with pytest.raises(ValueError, match="below one query"):
        noisy_estimates(inst, 7, 1.0, rng)
    with pytest.raises(ValueError, match="sigma"):
        noisy_estimates(inst, 80, -1.0, rng)
    with pytest.raises(ValueError, match=r"\[2, m\]"):
        threshold_allocation(np.ones((3, 4)))
    with pytest.raises(ValueError, match="bool"):
        envy_margins(np.ones((2, 3)), np.ones(2, dtype=bool))
