"""The SynthSAEBench referee (sae/experiments/synthbench.py) on a tiny generator: an SAE holding the true
dictionary scores MCC 1 and recovery 1, a random one does not, and every row has every field."""

from __future__ import annotations

import json
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
    assert good["absorption"] == 0.0 and 0 < bad["absorption"]  # random latents carry parents by chance


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


def test_hierarchy_absorption_is_zero_for_separate_latents_and_counts_a_child_writing_its_parent():
    e = torch.eye(4)
    parents = [(0, [1, 2])]
    active = torch.tensor([[1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 1]]).bool()
    clean = S.hierarchy_absorption(active.float(), active, e, e, parents)
    assert clean == {"absorption": 0.0, "parent_latent_silent": 0.0, "child_parent_cos": 0.0}
    # no parent latent: each child's latent writes parent + child, and fires exactly when its child is on
    dec = torch.nn.functional.normalize(torch.stack([e[0] + e[1], e[0] + e[2], e[3]]), dim=-1)
    z = torch.stack([active[:, 1], active[:, 2], active[:, 3]], 1).float()
    got = S.hierarchy_absorption(z, active, e, dec, parents)
    # the parent's latent is child 1's (first of the two tied at cos 0.707): silent, with child 2's firing,
    # on the half of the parent's rows where child 2 is on
    assert got["absorption"] == 0.5 and got["parent_latent_silent"] == 0.5
    assert abs(got["child_parent_cos"] - 2**-0.5) < 1e-6
    assert S.hierarchy_absorption(z, active, e, dec, parents, cos_min=0.8)["absorption"] == 0.0  # no carrier
    assert math.isnan(S.hierarchy_absorption(z, active, e, dec, [])["absorption"])


def test_the_true_dictionary_absorbs_nothing_on_the_generator(bench):
    parents = S.hierarchy_parents(bench.model)
    assert parents and all(len(kids) >= 2 for _, kids in parents)
    F = torch.nn.functional.normalize(bench.model.feature_dict.feature_vectors.detach(), dim=-1)
    active = bench.eval.rows(0, bench.eval.n) > 0
    got = S.hierarchy_absorption(active.float(), active, F, F, parents)
    assert got["absorption"] == 0.0 and got["parent_latent_silent"] == 0.0
    assert abs(got["child_parent_cos"]) < 0.5


def test_paired_differences_are_per_seed_and_l0():
    def row(arch, seed, l0, v):
        return {"l0_target": l0, "side": "ours", "arch": arch, "seed": seed} | {c: v for c in S.SUMMARY_COLS}

    rows = [row("batchtopk", 0, 2.0, 1.0), row("batchtopk", 1, 2.0, 2.0), row("c2r", 0, 2.0, 1.5)]
    rows += [row("c2r", 1, 2.0, 2.5), row("c2r", 0, 4.0, 9.0), row("topk", 0, 2.0, 0.0)]
    got = S.paired(rows)
    assert len(got) == 1  # c2r at L0 4 has no base; topk is no variant
    assert got[0]["arch"] == "c2r" and got[0]["base"] == "batchtopk" and got[0]["n"] == 2
    assert got[0]["fvu"] == "+0.500 ± 0.000"
    md = S.table({"settings": {"d_sae": 4}, "rows": rows}).splitlines()
    assert "| 2.0 | ours | c2r - batchtopk | 2 | +0.500 ± 0.000 (2+/0-) |" in "\n".join(md)
    assert "| 2.0 | ours | batchtopk | 2 | 1.500 ± 0.707 |" in "\n".join(md)
    assert (
        md.count(
            "| 2.0 | ours | c2r - batchtopk | 2 | "
            + " | ".join(["+0.500 ± 0.000 (2+/0-)"] * 5)
            + " | "
            + "+0.125 ± 0.000 (2+/0-) | "
            + " | ".join(["+0.500 ± 0.000 (2+/0-)"] * 2)
            + " |"
        )
        == 1
    )


def test_parse_l0s_takes_numbers_and_multiples_of_the_true_l0():
    assert S.parse_l0s(None, 4.666) == [4.67]
    assert S.parse_l0s("x0.5,x1,3", 4.666) == [2.33, 4.67, 3.0]


def test_table_reads_several_results_as_one(tmp_path, capsys):
    def row(arch, seed, l0):
        return {"l0_target": l0, "side": "ours", "arch": arch, "seed": seed} | {c: 1.0 for c in S.SUMMARY_COLS}

    for name, l0 in (("a", 2.0), ("b", 4.0)):
        res = {"settings": {"d_sae": 8}, "rows": [row("topk", 0, l0), row("poly", 0, l0)]}
        (tmp_path / f"{name}.json").write_text(json.dumps(res))
    S.main(["--table", f"{tmp_path / 'a.json'},{tmp_path / 'b.json'}"])
    out = capsys.readouterr().out
    assert "| 2.0 | ours | poly - topk | 1 |" in out and "| 4.0 | ours | poly - topk | 1 |" in out
