"""SAEBench's sparse-probing protocol on token-level tasks (`sae.sparse_probing`); against SAEBench's own
`probe_training` when it is installed beside the environment (`SAE_BENCH_DIR`, skipped otherwise)."""

import pytest
import torch

from sae import sparse_probing as S
from sae.experiments.saebench_referee import add_saebench_path
from sae.synthetic import write_store


def planted(n=600, d=12, seed=0):
    """Three classes; class c lifts column c by 3 (and nothing else): top-1 must find column c."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for c in range(3):
        x = torch.randn(n, d, generator=g)
        x[:, c] += 3.0
        out[f"c{c}"] = x
    return out


def test_top_k_and_probe_find_the_planted_column():
    train, test = planted(seed=0), planted(n=200, seed=1)
    torch.manual_seed(0)
    x, y = S.one_vs_rest(train, "c1")
    assert S.top_k_mean_diff(x, y, 1).tolist() == [1]
    assert y.sum() == len(y) // 2  # balanced
    torch.manual_seed(0)
    acc = S.probe_accuracy(train, test, 1)
    assert all(0.85 < a < 1 for a in acc.values()), acc  # one column separates at ~93%, not perfectly
    torch.manual_seed(0)
    assert min(S.probe_accuracy(train, test, None).values()) >= min(acc.values()) - 0.02


def test_token_classes_follow_the_tokens_text():
    text = {0: " the", 1: "The", 2: " 42", 3: ",", 4: " def", 5: "x1"}
    tokens = torch.tensor([0, 1, 2, 3, 4, 5, 0, 4])
    cls = S.token_classes(tokens, text.__getitem__)
    assert cls["token_kind"]["digits"].tolist() == [2]
    assert cls["token_kind"]["lowercase_word"].tolist() == [0, 4, 6, 7]
    assert cls["token_kind"]["capitalized_word"].tolist() == [1]
    assert cls["token_kind"]["punctuation"].tolist() == [3]
    assert cls["python_keyword"]["keyword"].tolist() == [4, 7]
    assert cls["leading_space"]["bare_word"].tolist() == [1]


def test_store_tasks_reads_rows_of_each_class(tmp_path):
    x = torch.randn(640, 8)
    st = write_store(tmp_path / "s", x, hook="h", rows_per_shard=320, tokens=torch.arange(640) % 10)
    text = {t: (" w" if t % 2 else " 7") for t in range(10)}
    tasks = S.store_tasks(st, "h", text.__getitem__, n_train=40, n_test=10, min_rows=20, seed=0)
    assert set(tasks) == {"token_kind"}  # the only task with two classes here
    tr, te = tasks["token_kind"]
    assert set(tr) == {"digits", "lowercase_word"} and all(len(v) <= 40 for v in tr.values())
    assert all(v.shape == (10, 8) for v in te.values())
    rows = torch.cat([torch.nonzero((x[:, None] == v[None]).all(-1))[:, 0] for v in tr.values()])
    assert len(set(rows.tolist())) == 80  # distinct store rows, read back exactly


def test_same_sets_and_accuracies_as_saebench():
    why = add_saebench_path()
    if why:
        pytest.skip(why)
    import jaxtyping

    jaxtyping.config.update("jaxtyping_disable", True)  # see sae.experiments.saebench_sparse_probing
    from sae_bench.evals.sparse_probing import probe_training as P

    train, test = planted(seed=0), planted(n=200, seed=1)
    torch.manual_seed(5)
    theirs = P.prepare_probe_data(train, "c2")
    torch.manual_seed(5)
    ours = S.one_vs_rest(train, "c2")
    assert torch.equal(theirs[0], ours[0]) and torch.equal(theirs[1], ours[1])
    for k in (1, 2):
        torch.manual_seed(7)
        _, acc_t = P.train_probe_on_activations(train, test, select_top_k=k)
        torch.manual_seed(7)
        acc_o = S.probe_accuracy(train, test, k)
        assert max(abs(acc_t[c] - acc_o[c]) for c in acc_o) <= 0.01, (acc_t, acc_o)


def test_saebench_record_takes_the_store_tasks_means():
    from sae.saebench import saebench_records

    train, test = planted(seed=0), planted(n=200, seed=1)
    tasks = {"planted": S.sparse_probing(train, test, lambda x: x.relu())}
    letter = {"absorption": 0.0, "n_split": 1, "f1_k1": 0.5, "accuracy_k": [0.6, 0.7]}
    letter |= {"absorption_fraction": 0.0, "full_absorption_rate": 0.0, "n_saebench_full_absorption": 0}
    fl = {
        "mean_absorption": 0.0,
        "mean_absorption_fraction": 0.0,
        "mean_full_absorption": 0.0,
        "mean_num_split": 1.0,
        "mean_f1_k1": 0.5,
        "letters": {"a": letter},
    }
    core = {"fvu": 0.5, "mse": 1.0, "l0": 3.0, "dead_frac": 0.1}
    rec = saebench_records(fl, core, "x", "h", "m", tasks=tasks)["sparse_probing"]
    assert (
        rec["eval_result_metrics"]["sae"]["sae_top_1_test_accuracy"]
        == tasks["planted"]["mean"]["sae_top_1_test_accuracy"]
    )
    assert rec["eval_result_metrics"]["llm"]["llm_test_accuracy"] > 0.9
    assert rec["eval_config"]["k_values"] == [1, 2, 5]
    assert [d["dataset_name"] for d in rec["eval_result_details"]] == ["first_letter_a", "store_tokens_planted"]


def test_selection_firing_names_a_frequent_latent_chosen_for_its_frequency():
    g = torch.Generator().manual_seed(3)
    n, m = 400, 50
    z = {c: torch.relu(torch.randn(n, m, generator=g) - 2.0) for c in ("a", "b")}
    z["a"][:, 7] += 3.0  # latent 7 fires on every row of class a (and often on b)
    z["b"][: n // 2, 7] += 1.0
    picks = {1: {"a": torch.tensor([7]), "b": torch.tensor([7])}, 2: {"a": torch.tensor([3, 4])}}
    sel = S.selection_firing(z, picks)
    assert sel["firing_chosen_top_1"] > 0.7 and sel["firing_ratio_top_1"] > 5
    assert sel["firing_ratio_top_2"] < 2
    out = S.sparse_probing({"a": z["a"][:300], "b": z["b"][:300]}, {"a": z["a"][300:], "b": z["b"][300:]}, lambda x: x)
    assert out["selection"]["firing_ratio_top_1"] > 5  # the probe's own top-1 pick is that latent


def test_ruled_rows_drop_the_rows_the_rule_drops(tmp_path):
    from interp.cache.rows import RowRule
    from sae.evaluate import ruled_rows
    from sae.synthetic import write_store

    x = torch.randn(500, 8, generator=torch.Generator().manual_seed(0))
    x[[3, 77, 400]] *= 100  # norm outliers
    st = write_store(tmp_path / "s", x, rows_per_shard=128)
    filt = RowRule.parse("norm-outliers:10").bind(st, "synthetic.hook_x")
    kept = ruled_rows(st, "synthetic.hook_x", filt, chunk=100)
    assert len(kept) == 497 and not ({3, 77, 400} & set(kept.tolist()))
