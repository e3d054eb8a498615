"""The third LDS task (a user's own Llama through `interp attribute lds --model`) and dattri's TRAK as an anchor."""

import json
import math
import sys

import pytest
import torch
from typer.testing import CliRunner

from attribution.experiments.tiny_llama import write_tiny_llama

DATTRI_REASON = (
    "dattri is not installed: put it on PYTHONPATH (ATTRIBUTION_ANCHORS, attribution/README.md) to run its TRAK "
    "beside our TRAK-style row"
)


def test_tiny_llama_folder_is_seeded_and_refuses_to_overwrite(tmp_path):
    import interp

    a = write_tiny_llama(tmp_path / "a", seed=0, ctx=16, d_model=32, layers=2)
    b = write_tiny_llama(tmp_path / "b", seed=0, ctx=16, d_model=32, layers=2)
    c = write_tiny_llama(tmp_path / "c", seed=1, ctx=16, d_model=32, layers=2)
    ma, mb, mc = (interp.load_model(str(p), device="cpu") for p in (a, b, c))
    assert (ma.n_layers, ma.n_heads, ma.hf_model.config.num_key_value_heads) == (2, 4, 2)
    assert ma.tokenizer("ab").input_ids == [97, 98]  # the byte tokenizer travels with the folder
    wa, wb, wc = (m.hf_model.model.layers[0].self_attn.q_proj.weight for m in (ma, mb, mc))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
    with pytest.raises(ValueError, match="not empty"):
        write_tiny_llama(a)


def test_the_llama_task_runs_through_the_public_path_and_module_groups_split_ekfac(tmp_path):
    """A tiny version of the third task: every method of ours gives a finite LDS; the attention and MLP groups of
    `ekfac_linear` pick Llama's q/k/v/o and gate/up/down, so (blocks per module, damping per module) their scores
    add up to the all-Linear scores exactly."""
    from safetensors.torch import load_file

    from attribution.cli import app
    from attribution.experiments import lds_table
    from attribution.lds import lds

    model = write_tiny_llama(tmp_path / "model", ctx=16, d_model=32, layers=2)
    out = tmp_path / "lds"
    methods = "ekfac_linear,ekfac_linear_attn,ekfac_linear_mlp,ekfac,tracin,grad_dot,trak"
    args = ["lds", "--out", str(out), "--model", str(model), "--data", "pydoc-topics", "--ctx-len", "16"]
    args += ["-m", "4", "--n-train", "16", "--n-query", "3", "--epochs", "1", "--methods", methods]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "lds.json").read_text())
    assert set(summary["methods"]) == set(methods.split(","))
    assert all(math.isfinite(m["lds"]) for m in summary["methods"].values()), summary["methods"]
    scores = {m: load_file(str(out / "scores" / f"{m}.safetensors"))["scores"].double() for m in methods.split(",")}
    table = lds_table.markdown(lds_table.collect({"llama": out}))  # the README's table reads the folder back
    assert "| EK-FAC, ours, MLP Linears | " in table and "heads (q" in table and "Kronfluence" not in table
    rebuilt = lds(scores["ekfac_linear"], lds_table._masks(summary), lds_table._losses(out)).mean
    assert rebuilt == pytest.approx(summary["methods"]["ekfac_linear"]["lds"], abs=1e-3)  # its subsets and losses
    both = scores["ekfac_linear_attn"] + scores["ekfac_linear_mlp"]
    assert torch.allclose(both, scores["ekfac_linear"], rtol=1e-4, atol=1e-6 * scores["ekfac_linear"].abs().max())
    assert not torch.allclose(scores["ekfac_linear_attn"], scores["ekfac_linear"], rtol=1e-2)


def test_an_absent_anchor_is_reported_with_its_reason(monkeypatch):
    from attribution.lds_methods import ANCHORS

    monkeypatch.setitem(sys.modules, "dattri", None)  # import dattri raises ImportError
    monkeypatch.setitem(sys.modules, "kronfluence", None)
    assert "dattri is not importable" in ANCHORS["dattri_trak"]()
    assert "kronfluence is not importable" in ANCHORS["kronfluence"]()


def test_dattri_trak_on_digits_beats_random_scores_when_installed(tmp_path):
    pytest.importorskip("dattri", reason=DATTRI_REASON)
    from attribution.experiments.digits_lds import dattri_trak
    from attribution.lds import lds, random_subsets, retrain_subsets
    from attribution.lds_classifier import DigitsTask

    digits = DigitsTask(n_train=160, n_query=16, steps=80)
    masks = random_subsets(digits.n_train, 12, 0.5, seed=0)
    losses = retrain_subsets(digits, masks, tmp_path / "retrain", progress=False)
    model = digits.train(torch.arange(digits.n_train))
    scores = dattri_trak(model, digits, proj_dim=64)  # fewer dimensions than rows: its kernel is not damped
    assert scores.shape == (160, 16) and torch.isfinite(scores).all()
    noise = lds(torch.randn(scores.shape, generator=torch.Generator().manual_seed(0)), masks, losses)
    theirs = lds(scores, masks, losses)
    assert theirs.mean > noise.high, (theirs, noise)
    assert lds(-scores, masks, losses).mean < -noise.high  # positive = helpful, the harness's sign


def test_dattri_trak_runs_on_a_language_model_when_installed(tmp_path):
    pytest.importorskip("dattri", reason=DATTRI_REASON)
    import interp
    from attribution.lds_methods import METHODS

    model = interp.load_model(str(write_tiny_llama(tmp_path / "m", ctx=16, d_model=32, layers=2)), device="cpu")
    g = torch.Generator().manual_seed(0)
    train, queries = torch.randint(0, 256, (24, 16), generator=g), torch.randint(0, 256, (3, 16), generator=g)
    scores = METHODS["dattri_trak"](model, [], train, queries, proj_dim=16)
    assert scores.shape == (24, 3) and torch.isfinite(scores).all() and scores.abs().max() > 0


def test_paired_difference_is_the_difference_of_lds_and_resolves_overlapping_intervals(tmp_path):
    from attribution.lds import lds, lds_difference, random_subsets, retrain_subsets
    from tests.attribution.lds_tasks import RidgeTask

    task = RidgeTask()
    masks = random_subsets(task.n_train, 40, 0.5, seed=1)
    losses = retrain_subsets(task, masks, tmp_path / "retrain", progress=False)
    exact = task.influence()
    noisy = exact + 0.2 * exact.std() * torch.randn(
        exact.shape, generator=torch.Generator().manual_seed(0), dtype=exact.dtype
    )
    d, a, b = lds_difference(exact, noisy, masks, losses), lds(exact, masks, losses), lds(noisy, masks, losses)
    assert d.mean == pytest.approx(a.mean - b.mean, abs=1e-12)
    assert d.low > 0 and a.low < b.high  # paired: the gap is resolved where the two intervals overlap
    assert d.high - d.low < b.high - b.low
    same = lds_difference(exact, exact, masks, losses)
    assert (same.mean, same.low, same.high) == (0.0, 0.0, 0.0)
    assert lds_difference(noisy, exact, masks, losses).high < 0
