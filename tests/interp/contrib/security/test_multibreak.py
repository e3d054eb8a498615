import numpy as np
import pytest
import torch

from interp.contrib.security.multibreak import (
    REQUEST,
    TURNS,
    KeywordJudge,
    RefusalDirectionJudge,
    active_loop,
    conversation,
    elitist_loop,
    random_loop,
)


def test_conversation_ends_with_the_placeholder():
    assert conversation((0, 3)) == [TURNS[0], TURNS[3], REQUEST]
    assert "[PLACEHOLDER_REQUEST]" in REQUEST


def test_keyword_judge_by_hand():
    j = KeywordJudge(seed=0, bias=1.0)
    e = j.effects
    assert j.score([(2, 5)])[0] == pytest.approx(1.0 + e[2] + 1.1 * e[5])
    assert j.queries == 1


def test_active_learning_beats_random_mutation_on_the_toy():
    act = [active_loop(KeywordJudge(seed=s), 8, 16, np.random.default_rng(s)) for s in range(4)]
    rnd = [random_loop(KeywordJudge(seed=s), 8, 16, np.random.default_rng(s)) for s in range(4)]
    assert np.mean([h.success_rate[-1] for h in act]) > np.mean([h.success_rate[-1] for h in rnd]) + 0.2
    assert all(h.queries == 8 * 16 for h in act + rnd)


class _Tok:
    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=True):
        return " | ".join(m["content"] for m in msgs)


class _FakeModel:
    """A 'model' whose last-token state is +1 on axis 0 when the text holds 'bad', else -1."""

    tokenizer = _Tok()

    def run_with_cache(self, text, names, return_logits=False):
        h = torch.zeros(1, 3, 4)
        h[0, -1, 0] = 1.0 if "bad" in text else -1.0
        h[0, -1, 1] = len(text) % 3  # a nuisance coordinate shared by both classes
        return None, {names[0]: h}


def test_refusal_direction_judge_on_a_fake_model():
    j = RefusalDirectionJudge(_FakeModel(), 0, ["a bad one", "bad two"], ["fine one", "fine 2"])
    assert abs(np.linalg.norm(j.direction) - 1) < 1e-12
    assert j.direction[0] > 0.9 and j.separation > 1.5
    # REQUEST holds no 'bad': every conversation lands on the benign side
    assert (j.score([(0,), (1, 2)]) < 0).all() and j.queries == 2


def test_bad_input():
    with pytest.raises(ValueError, match="batch"):
        active_loop(KeywordJudge(), 3, 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="rounds"):
        random_loop(KeywordJudge(), 0, 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="at least one"):
        RefusalDirectionJudge(_FakeModel(), 0, [], ["x"])


def test_elitist_baseline_mutates_the_best_so_far():
    # issue 42's strong baseline on toy judges: the last round all succeed, far above random mutation
    for s in (0, 1):
        e = elitist_loop(KeywordJudge(seed=s), 8, 16, np.random.default_rng(0), elite=1)
        r = random_loop(KeywordJudge(seed=s), 8, 16, np.random.default_rng(0))
        assert e.queries == 128 and e.success_rate[-1] == 1.0 and r.success_rate[-1] < 0.3
        assert e.best_score == sorted(e.best_score, reverse=True)  # the best score so far never rises
    with pytest.raises(ValueError, match="elite"):
        elitist_loop(KeywordJudge(seed=0), 2, 4, np.random.default_rng(0), elite=0)
