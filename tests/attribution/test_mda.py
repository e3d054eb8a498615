import pytest
import torch

from attribution.influence import HeadComponent
from attribution.mda import (
    emergence_step,
    icl_score,
    induction_scores,
    induction_targets,
    prefix_matching_scores,
    previous_token_scores,
    rank_training_samples,
)
from attribution.train import Intervention, data_stream
from tests.attribution.test_influence import micro_neox


def test_induction_target_alignment_correct_and_legacy():
    a, b, c = 5, 6, 7
    ids = torch.tensor([[a, b, c, a, b, c]])
    correct = induction_targets(ids)[0].tolist()
    assert correct[4] == b and correct[5] == c  # prediction at t-1 of tokens[t]
    assert correct[:4] == [-1, -1, -1, -1]
    legacy = induction_targets(ids, legacy_current_match=True)[0].tolist()
    assert legacy[3] == b and legacy[4] == c  # key = tokens[t]: the released code's two-ahead target


def _pattern_model(kind):
    """A micro model whose layer-1 head 0 attention is overwritten to a known pattern via a hook."""
    model = micro_neox()

    def force(p, hook):
        q = p.shape[-1]
        eye = torch.eye(q)
        if kind == "prev":
            target = torch.diag(torch.ones(q - 1), -1)
            target[0, 0] = 1
        else:  # prefix matching on [BOS, r, r] with half = (q - 1) // 2
            half = (q - 1) // 2
            target = eye.clone()
            for i in range(half + 1, 2 * half + 1):
                target[i] = 0
                target[i, i - half + 1] = 1
        p = p.clone()
        p[:, 0] = target
        return p

    return model, [("blocks.1.attn.hook_pattern", force)]


def test_pattern_scores_read_planted_patterns():
    model, hooks = _pattern_model("prev")
    with model.hooks(hooks):
        prev = previous_token_scores(model, n=4, length=12)
    assert prev[1, 0] == 1.0 and prev[1, 1] < 0.9
    model, hooks = _pattern_model("prefix")
    with model.hooks(hooks):
        pm = prefix_matching_scores(model, n=4, half=6, bos=0)
    assert pm[1, 0] == 1.0 and pm[1, 1] < 0.9


def test_induction_and_icl_scores_run_and_are_finite():
    model = micro_neox()
    ind = induction_scores(model, n=4, half=6, heads=[(1, 0), (0, 1)])
    assert torch.isfinite(ind[1, 0]) and torch.isnan(ind[1, 1])
    ids = torch.randint(0, 16, (4, 16))
    assert isinstance(icl_score(model, ids, early=2, late=14), float)


def test_emergence_step():
    evals = [{"step": 0, "pm": 0.0}, {"step": 10, "pm": 0.2}, {"step": 20, "pm": 0.5}]
    assert emergence_step(evals, "pm", 0.3) == 20 and emergence_step(evals, "pm", 0.9) is None


def test_data_stream_interventions_keep_order_of_the_rest():
    base = data_stream(10, 30, seed=0).tolist()
    removed = data_stream(10, 27, seed=0, intervention=Intervention(remove=[3])).tolist()
    assert 3 not in removed and [i for i in base if i != 3] == removed
    dup = data_stream(10, 30, seed=0, intervention=Intervention(duplicate=[3])).tolist()
    assert dup[:11].count(3) == 2


def test_rank_training_samples_prefers_repetitive_sequences_on_a_copying_head():
    model = micro_neox()
    g = torch.Generator().manual_seed(0)
    plain = torch.randint(0, 16, (12, 12), generator=g)
    rep = torch.randint(0, 16, (12, 6), generator=g).repeat(1, 2)
    train = torch.cat([plain, rep])
    res = rank_training_samples(model, HeadComponent(1, 0, "qk"), train, n_probe=8, half=6)
    assert res["scores"].shape == (24,) and torch.isfinite(res["scores"]).all()
    assert sorted(res["order"].tolist()) == list(range(24))


def test_survival_helpers_on_hand_cases():
    from attribution.mda import kaplan_meier, kaplan_meier_median, logrank_test, restricted_mean

    # 4 runs: formed at 100 and 300, two censored at 400 -> S = 3/4 after 100, 3/4 * 2/3 = 1/2 after 300
    times, events = [100, 300, 400, 400], [True, True, False, False]
    assert kaplan_meier(times, events) == [(100, 0.75), (300, 0.5)]
    assert kaplan_meier_median(times, events) == 300
    assert kaplan_meier_median([400, 400], [False, False]) is None  # never formed: censored, no median
    assert restricted_mean(times, events, 400) == 100 + 0.75 * 200 + 0.5 * 100
    # identical groups: no difference; a group that never forms against one that forms early: a clear one
    same = logrank_test([10, 20, 30], [True] * 3, [10, 20, 30], [True] * 3)
    assert same["chi2"] == 0 and same["p"] == 1
    late = logrank_test([50] * 6, [False] * 6, [5, 6, 7, 8, 9, 10], [True] * 6)
    assert late["observed_a"] == 0 and late["expected_a"] > 2 and late["p"] < 0.01


def test_removal_pool_keeps_the_stream_and_marks_the_repeat_subset():
    from attribution.experiments.mda_removal import arm_pool, build_pool, fillers, later

    pool, has, lengths = build_pool(40, 24, 16, 0.25, (3, 8), seed=0, kind="span", background="no-repeat")
    assert int(has.sum()) == 10 and bool(((lengths > 0) == (has > 0)).all())

    def repeated_bigrams(row):
        pairs = list(zip(row, row[1:]))
        return len(pairs) - len(set(pairs))

    assert all(repeated_bigrams(r) == 0 for r, h in zip(pool.tolist(), has.tolist()) if not h)  # cannot teach induction
    assert all(repeated_bigrams(r) > 0 for r, h in zip(pool.tolist(), has.tolist()) if h)
    filler = fillers(40, 24, 16, seed=1, background="no-repeat")
    assert all(repeated_bigrams(r) == 0 for r in filler.tolist())
    removed = torch.nonzero(has).flatten().tolist()
    arm = arm_pool(pool, filler, removed)
    kept = [i for i in range(40) if i not in removed]
    assert torch.equal(arm[kept], pool[kept]) and torch.equal(arm[removed], filler[removed])
    # the same seed gives the same stream whatever is removed: every kept row sits at the same step
    stream = data_stream(40, 200, seed=3)
    at_kept = torch.isin(stream, torch.tensor(kept))
    assert torch.equal(arm[stream][at_kept], pool[stream][at_kept])
    assert later(None, 100) and later(200, 100)  # a censored run is later than any formed one
    assert not later(100, 100) and not later(None, None) and not later(100, None)


def test_removal_uniform_background_repeats_only_by_chance():
    from attribution.experiments.mda_removal import build_pool, fillers

    vocab, ctx = 64, 48
    pool, has, lengths = build_pool(400, ctx, vocab, 0.5, (8, 12), seed=0, kind="span", background="uniform")
    assert int(has.sum()) == 200 and bool((pool[:, 0] == 0).all()) and bool((pool[:, 1:] >= 1).all())

    def longest_repeat(row):  # longest substring occurring twice (non-overlapping not required)
        best = 0
        for i in range(len(row)):
            for j in range(i + 1, len(row)):
                n = 0
                while j + n < len(row) and row[i + n] == row[j + n]:
                    n += 1
                best = max(best, n)
        return best

    rows, flags = pool.tolist(), has.tolist()
    # the planted span is where the long repeats are: every repeat row holds one of its planted length, no
    # background row holds a repeat as long as the shortest planted span
    assert all(longest_repeat(r) >= int(n) for r, h, n in zip(rows, flags, lengths.tolist()) if h)
    assert all(longest_repeat(r) < 8 for r, h in zip(rows, flags) if not h)
    # but chance repeats exist (unlike the no-repeat background), and the token after a repeated token matches
    # what followed its earlier occurrence at chance rate 1/(vocab-1): induction cannot beat chance there
    hits = trials = 0
    for r, h in zip(rows, flags):
        if h:
            continue
        last: dict[int, int] = {}
        for t in range(1, ctx - 1):
            if r[t] in last:
                trials += 1
                hits += r[last[r[t]] + 1] == r[t + 1]
            last[r[t]] = t
    assert trials > 2000 and 0.5 / (vocab - 1) < hits / trials < 1.6 / (vocab - 1)
    filler = fillers(400, ctx, vocab, seed=1, background="uniform")
    assert all(longest_repeat(r) < 8 for r in filler.tolist()[:50]) and not torch.equal(filler, pool)
    with pytest.raises(ValueError, match="background"):
        build_pool(10, ctx, vocab, 0.5, (8, 12), seed=0, background="zipf")


def test_mda_removal_quick_runs_every_arm(tmp_path):
    from attribution.experiments.mda_removal import main

    res = main(["--out", str(tmp_path), "--quick"])
    assert set(res["arms"]) == {"full", "mda_top", "random_0", "repeat_k", "oracle"}
    assert res["repeat_share_removed"]["oracle"] == 1.0 and res["verdict"]["text"]
    assert all(len(row["formation_steps"]) == 1 for row in res["arms"].values())
    assert (tmp_path / "ranking_s0.json").exists() and (tmp_path / "result.json").exists()
    again = main(["--out", str(tmp_path), "--quick"])  # resumes from the saved runs
    assert again["arms"] == res["arms"]
