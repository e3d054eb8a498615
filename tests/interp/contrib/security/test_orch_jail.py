import numpy as np
import pytest

from interp.contrib.security.orch_jail import (
    TARGET,
    ToolAgent,
    contains_in_order,
    orchestration_fuzz,
    random_fuzz,
)


def test_contains_in_order_by_hand():
    assert contains_in_order(["retrieve", "crop", "blend", "overlay"]) == 3
    assert contains_in_order(["blend", "retrieve", "overlay"]) == 1  # order matters
    assert contains_in_order(["retrieve", "upscale", "blend"]) == 2
    assert contains_in_order([]) == 0


def test_agent_plans_follow_word_order_and_the_filter_refuses():
    agent = ToolAgent(seed=0)
    trig = {t: [w for w, x in agent.keyword.items() if x == t and w not in agent.refused] for t in TARGET}
    inert = next(w for w in agent.words if w not in agent.keyword and w not in agent.refused)
    prompt = [trig["retrieve"][0], inert, trig["blend"][0], trig["overlay"][0]]
    assert agent.plan(prompt) == list(TARGET) and agent.is_unsafe(agent.plan(prompt))
    assert not agent.is_unsafe(agent.plan(prompt[::-1]))
    assert agent.plan(prompt + [next(iter(agent.refused))]) is None
    assert agent.queries == 4


def test_fuzzers_respect_the_budget_and_guided_fuzzing_finds_the_composition():
    for fuzz in (random_fuzz, orchestration_fuzz):
        r = fuzz(ToolAgent(seed=1), 120, np.random.default_rng(0))
        assert r.queries <= 121 and (r.first_success is None or r.first_success <= 120)
    r = orchestration_fuzz(ToolAgent(seed=1), 1000, np.random.default_rng(0))
    assert r.first_success is not None and r.successes >= 5


def test_bad_input():
    with pytest.raises(ValueError, match="budget"):
        random_fuzz(ToolAgent(), 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="vocab_size"):
        ToolAgent(vocab_size=10)
    with pytest.raises(ValueError, match="words_per_tool"):
        ToolAgent(words_per_tool=0)


def test_the_wilson_interval_covers_the_proportion_and_narrows_with_agents():
    from interp.contrib.security.experiments.orch_jail import wilson

    lo10, hi10 = wilson(2, 10)
    lo100, hi100 = wilson(20, 100)
    assert lo10 < 0.2 < hi10 and lo100 < 0.2 < hi100
    assert hi100 - lo100 < (hi10 - lo10) / 2
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    assert abs(wilson(35, 100)[0] - 0.264) < 0.005  # a textbook value


def test_tuned_hill_climber_settings():
    # defaults reproduce the original control draw for draw; 8 edits on long seeds find the composition sooner here
    for s, (default_first, tuned_first) in enumerate([(958, 127), (400, 275)]):
        a = random_fuzz(ToolAgent(seed=s), 1000, np.random.default_rng(s))
        b = random_fuzz(ToolAgent(seed=s), 1000, np.random.default_rng(s), mutations=1, seed_len=8)
        c = random_fuzz(ToolAgent(seed=s), 1000, np.random.default_rng(s), mutations=8, seed_len=24)
        assert a.first_success == b.first_success == default_first and c.first_success == tuned_first
    with pytest.raises(ValueError, match="mutations"):
        random_fuzz(ToolAgent(seed=0), 10, np.random.default_rng(0), mutations=0)
