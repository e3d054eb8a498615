"""The SynthSAEBench referee (sae/experiments/synthbench.py) on a tiny generator: an SAE holding the true
dictionary scores MCC 1 and recovery 1, a random one does not, and every row has every field."""

from __future__ import annotations

import math

import pytest
import torch

from sae import make_sae, to_inference
from sae.experiments import synthbench as S


@pytest.fixture(scope="module")
def bench() -> S.Bench:
    torch.set_num_threads(1)
    return S.make_bench(num_features=64, hidden_dim=32, d_sae=64, n_train=4096, n_eval=2048, chunk=1000)


def test_replay_gives_back_the_stored_rows_in_order():
    f = torch.zeros(5, 4)
    f[0, 1], f[2, 3], f[4, 0] = 1.0, 2.0, 3.0
    r = S.Replay.from_dense([f[:3], f[3:]])
    assert torch.equal(r.rows(0, 5), f)
    assert torch.equal(r.sample(3), f[:3])
    assert torch.equal(r.sample(4), torch.cat([f[3:], f[:2]]))  # wraps around
    assert torch.equal(r.fresh().sample(2), f[:2])


def test_true_dictionary_scores_perfectly_and_random_does_not(bench):
    k = max(1, round(bench.true_l0))
    F = bench.model.feature_dict.feature_vectors.detach()
    true = make_sae("topk", 32, 64, seed=0, k=k)
    with torch.no_grad():
        true.W_dec.copy_(F / F.norm(dim=-1, keepdim=True))
        true.W_enc.copy_(true.W_dec.T)
        true.b_enc.zero_()
        true.b_dec.copy_(bench.model.feature_dict.bias)
    good = S.score(to_inference(true), bench)
    bad = S.score(to_inference(make_sae("topk", 32, 64, seed=0, k=k)), bench)
    assert good["mcc"] > 0.99 and good["recovery"] == 1.0 and good["recovery_top"] == 1.0
    assert bad["recovery"] == 0.0 and bad["mcc"] < good["mcc"] - 0.3
    assert good["f1"] > bad["f1"] + 0.1  # 64 features in 32 dimensions: the true encoder still confuses some
    assert good["fvu"] < bad["fvu"]


def test_rows_have_every_field(bench):
    rows = S.run_bench(bench, ["topk", "relu"], ["ours", "sae_lens"], [0], [2.0], d_sae=16, steps=4)
    assert [(r["side"], r["arch"]) for r in rows] == [
        ("ours", "topk"),
        ("ours", "relu"),
        ("sae_lens", "topk"),
        ("sae_lens", "relu"),
    ]
    for r in rows:
        assert set(r) == set(S.FIELDS)
        for col in S.FIELDS[5:]:
            assert isinstance(r[col], (int, float)) and math.isfinite(r[col]), (r["arch"], col)
        assert 0 <= r["recovery"] <= 16 / 64  # 16 latents hold at most 16 of the 64 near-orthogonal features
    assert rows[0]["coef"] is None and rows[1]["coef"] is not None  # k for topk, a calibrated L1 for relu
    summary = S.summarise(rows)
    assert len(summary) == 4 and all(set(S.SUMMARY_COLS) <= set(s) for s in summary)
