import math
import re

import pytest
import torch

from interp.contrib.faithfulness.cot_importance import (
    answer_probabilities,
    bernoulli_jsd,
    cir,
    cir_abs,
    sufficiency,
    truncation_report,
)


def test_jsd_exact_values():
    assert float(bernoulli_jsd(0.0, 1.0)) == pytest.approx(1.0)
    assert float(bernoulli_jsd(0.3, 0.3)) == pytest.approx(0.0, abs=1e-12)
    # JSD(Bern(1), Bern(.5)) = H(.75) - (H(1) + H(.5))/2, in bits
    h = lambda p: -(p * math.log2(p) + (1 - p) * math.log2(1 - p))  # noqa: E731
    assert float(bernoulli_jsd(1.0, 0.5)) == pytest.approx(h(0.75) - 0.5)


def test_cir_and_abs():
    assert cir(1.0, [0.0, 0.0, 1.0, 1.0]) == pytest.approx(0.5)
    assert cir_abs(0.9, [0.1, 0.5]) == pytest.approx((0.8 + 0.4) / 2)
    assert cir(0.7, [0.7, 0.7]) == pytest.approx(0.0, abs=1e-12)


def test_sufficiency():
    assert sufficiency([3, None, 5, 2], [3, 4, 5, 1]) == 0.5
    with pytest.raises(ValueError, match="one verdict per item"):
        sufficiency([1], [1, 2])


class _CopyLast:
    """A toy 'model': the next token is the last token of the reasoning that is < 10, with prob 0.9."""

    def __call__(self, ids, mask):
        b, p = ids.shape
        logits = torch.full((b, p, 12), math.log(0.1 / 11))
        for i in range(b):
            seen = 11  # nothing seen: predicts token 11
            for t in range(p):
                if mask[i, t] and ids[i, t] < 10:
                    seen = int(ids[i, t])
                logits[i, t, seen] = math.log(0.9)
        return logits


def test_answer_probabilities_exact():
    p = answer_probabilities(
        _CopyLast(), question=[10], reasoning_words=[[3], [7], [10, 5]], answer_prefix=[10], answer=[5]
    )
    torch.testing.assert_close(p, torch.tensor([0.1 / 11, 0.1 / 11, 0.1 / 11, 0.9], dtype=torch.float64))
    rep = truncation_report(p)
    assert rep["p_full"] == pytest.approx(0.9) and rep["cir"] == pytest.approx(float(bernoulli_jsd(0.9, 0.1 / 11)))


def test_answer_probabilities_on_hooked_model_batches_agree():
    import interp
    from tests.tiny import tiny_hf

    model = interp.HookedModel(tiny_hf("llama"))
    args = dict(question=[5, 6, 7], reasoning_words=[[8], [9, 10], [11], [12]], answer_prefix=[13], answer=[14, 15])
    p1 = answer_probabilities(model, **args, batch_size=1)
    p5 = answer_probabilities(model, **args, batch_size=5)
    torch.testing.assert_close(p1, p5, atol=1e-6, rtol=1e-4)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 13, 14, 15]])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids)[0].double(), -1)
    assert float(p1[2]) == pytest.approx(float((logp[6, 14] + logp[7, 15]).exp()), rel=1e-4)


def test_bad_input():
    with pytest.raises(ValueError, match="probabilities"):
        bernoulli_jsd(1.2, 0.5)
    with pytest.raises(ValueError, match="non-empty"):
        cir(0.5, [])
    with pytest.raises(ValueError, match="answer"):
        answer_probabilities(_CopyLast(), [1], [[2]], [3], [])


def test_smollm_item_sets_are_well_formed_and_bounded(capsys):
    from interp.contrib.faithfulness.experiments.cot_importance import ITEM_SETS, SMOL_ITEMS, main

    assert ITEM_SETS[0] is SMOL_ITEMS and len(ITEM_SETS) == 3
    questions = [q for s in ITEM_SETS for items in s.values() for q, _, _ in items]
    assert len(questions) == len(set(questions)) == 24  # 3 sets of 4 + 4, no item repeated
    for s in ITEM_SETS:
        assert {g: len(v) for g, v in s.items()} == {"arithmetic": 4, "known_fact": 4}
        for _, reasoning, answer in s["arithmetic"]:
            steps = re.findall(r"(\d+) ([+x-]) (\d+) = (\d+)", reasoning)
            assert steps and steps[-1][3] == answer.strip()  # the written chain ends on the answer
            for a, op, b, c in steps:  # and every step of it is right
                assert {"+": int(a) + int(b), "-": int(a) - int(b), "x": int(a) * int(b)}[op] == int(c), (a, op, b)
    with pytest.raises(SystemExit):
        main(["--item-sets", "4"])  # refused before any model is built
    assert "--item-sets must be at most 3" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--smollm-only", "--no-smollm"])
    assert "exclude each other" in capsys.readouterr().err
