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
