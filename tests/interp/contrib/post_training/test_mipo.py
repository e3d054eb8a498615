import itertools
import math

import pytest
import torch

from interp.contrib.post_training.experiments.mipo import main
from interp.contrib.post_training.mipo import ContextPolicy, make_base_data, mipo_pairs, pmi, target_responses
from interp.contrib.post_training.preference import dpo_loss


def test_dpo_loss_hand_values():
    z = torch.zeros(3)
    assert float(dpo_loss(z, z, z, z)) == pytest.approx(math.log(2))
    # margin (1 - 0) - (0 - 0) = 1 at β = 2: -log σ(2) = log(1 + e^-2)
    one = torch.ones(1)
    assert float(dpo_loss(one, 0 * one, 0 * one, 0 * one, beta=2.0)) == pytest.approx(math.log(1 + math.exp(-2)))


def test_sequence_probabilities_sum_to_one():
    torch.manual_seed(0)
    pol = ContextPolicy(n_contexts=2, vocab=3, length=2, d=4, hidden=8)
    ys = torch.tensor(list(itertools.product(range(3), repeat=2)))
    for c in range(2):
        with torch.no_grad():
            total = pol.logprob(torch.full((9,), c), ys).exp().sum()
        assert float(total) == pytest.approx(1.0, abs=1e-5)


def test_pmi_zero_when_context_is_ignored():
    torch.manual_seed(0)
    pol = ContextPolicy(n_contexts=4, vocab=5, length=3, d=4, hidden=8)
    with torch.no_grad():
        pol.ctx.weight.zero_()  # every context embeds the same: π(y|x) = π(y)
    assert pmi(pol, 8, torch.Generator().manual_seed(0)) == pytest.approx(0.0, abs=1e-6)


def test_pairs_and_data():
    g = torch.Generator().manual_seed(0)
    t = target_responses(5, 4, 3, g)
    assert len({tuple(r) for r in t.tolist()}) == 5
    x, y = make_base_data(t[:3], t[3:], 1.0, 20, g)
    assert torch.equal(y, t[:3][x])  # p_follow = 1: always the context's target
    pol = ContextPolicy(3, 4, 3)
    xs, yp, yn = mipo_pairs(pol, torch.tensor([0, 1, 2]), g)
    assert yp.shape == yn.shape == (3, 3)


def test_bad_input():
    with pytest.raises(ValueError, match="beta"):
        dpo_loss(torch.zeros(1), torch.zeros(1), torch.zeros(1), torch.zeros(1), beta=0)
    with pytest.raises(ValueError, match="same"):
        dpo_loss(torch.zeros(2), torch.zeros(1), torch.zeros(1), torch.zeros(1))
    with pytest.raises(ValueError, match="at least 2 contexts"):
        mipo_pairs(ContextPolicy(1, 3, 2), torch.tensor([0]), torch.Generator())


def test_quick_experiment_runs():
    out = main(["--quick"])
    assert set(out["toy"][0]) == {"base", "self-SFT", "MIPO", "MIPO (table)", "PMI reweighting"}
    assert str(out["lambda"]) in out["lambda_tuning"]


def test_cross_logprobs_with_a_uniform_and_a_copying_lm():
    from interp.contrib.post_training.mipo import cross_logprobs, pmi_from_cross

    vocab = 5
    uniform = lambda ids: torch.zeros(*ids.shape, vocab)  # noqa: E731
    prompts, responses = torch.tensor([[0, 1], [2, 3], [4, 0]]), torch.tensor([[1, 1], [3, 3], [0, 0]])
    cross = cross_logprobs(uniform, prompts, responses, batch=4)
    torch.testing.assert_close(cross, torch.full((3, 3), 2 * -math.log(vocab), dtype=torch.float64))
    assert pmi_from_cross(cross)[0] == pytest.approx(0.0)

    def copy_lm(ids):  # predicts the previous token again, with log-odds 10
        return 10.0 * torch.nn.functional.one_hot(ids, vocab).float()

    cross = cross_logprobs(copy_lm, prompts, responses)
    pmi_val, own = pmi_from_cross(cross)
    assert own == 1.0 and pmi_val > 0  # each response repeats its own prompt's last token
    with pytest.raises(ValueError, match="P >= 2"):
        cross_logprobs(uniform, prompts[:1], responses[:1])


def test_pmi_reweighting_table_matches_the_policy_and_raises_pmi():
    # the strong baseline's pieces on a tiny policy: the exact table agrees with the policy's own metrics,
    # λ = 0 is the base model, and reweighting moves mass off a context-free response
    from interp.contrib.post_training.mipo import (
        all_responses,
        context_accuracy,
        pmi_reweighted,
        response_logprobs,
        table_metrics,
    )

    assert all_responses(3, 2).tolist()[:4] == [[0, 0], [0, 1], [0, 2], [1, 0]]
    g = torch.Generator().manual_seed(0)
    targets = target_responses(6, 4, 3, g)
    targets, generic = targets[:4], targets[4:]
    torch.manual_seed(0)
    pol = ContextPolicy(4, 4, 3, d=8, hidden=16)
    opt = torch.optim.Adam(pol.parameters(), lr=1e-2)
    for _ in range(200):  # follows its context half the time, else a generic response
        x, y = make_base_data(targets, generic, 0.5, 64, g)
        loss = -pol.logprob(x, y).mean()
        opt.zero_grad(), loss.backward(), opt.step()
    logp = response_logprobs(pol)
    assert logp.shape == (4, 64) and torch.allclose(logp.exp().sum(1), torch.ones(4), atol=1e-5)
    base = table_metrics(logp, targets, generic, torch.Generator().manual_seed(1))
    assert base["π(T|x)"] == pytest.approx(context_accuracy(pol, targets), abs=1e-6)
    assert torch.allclose(pmi_reweighted(logp, 0.0), logp, atol=1e-6)
    rw = table_metrics(pmi_reweighted(logp, 0.5), targets, generic, torch.Generator().manual_seed(1))
    assert rw["generic mass"] < base["generic mass"] - 0.05 and rw["PMI"] > base["PMI"]
    with pytest.raises(ValueError, match="lam"):
        pmi_reweighted(logp, -1.0)
