import math

import pytest
import torch

from circuits.finders.prune import PruneConfig, TargetNotReached, bisect_k, prune
from circuits.finders.weight_sparse import (
    WeightSparseConfig,
    abs_topk,
    build_model,
    l0_schedule,
    project_topk_,
    sparse_parameters,
    train_weight_sparse,
)
from circuits.tasks.binary import get_task
from interp.data import tokenize_texts


@pytest.mark.parametrize(
    "shape, frac, j", [((64, 256), 1 / 8, 4), ((256, 64), 1 / 4, 4), ((30, 50), 0.1, 2), ((100,), 0.2, 4)]
)
def test_projection_keeps_exactly_the_budget_and_the_row_minimum(shape, frac, j):
    w = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    orig = w.clone()
    kept = project_topk_(w, frac, j)
    k = math.ceil(frac * w.numel())
    assert int((w != 0).sum()) == kept == max(k, shape[0] * j if w.ndim == 2 else 0)
    if w.ndim == 2:
        assert int((w != 0).sum(1).min()) >= j
    # what is kept keeps its value, and beyond the row minima it is the largest magnitudes
    assert torch.equal(w[w != 0], orig[w != 0])
    if w.ndim == 1:
        assert orig.abs()[w == 0].max() <= orig.abs()[w != 0].min()


def test_projection_when_the_row_minimum_exceeds_the_budget():
    w = torch.randn(64, 256)
    assert project_topk_(w, 1 / 256, 4) == 64 * 4
    assert ((w != 0).sum(1) == 4).all()


def test_projection_with_ties_still_keeps_the_exact_count():
    w = torch.ones(10, 10)
    assert project_topk_(w, 0.25, 1) == 25 and int((w != 0).sum()) == 25


def test_l0_schedule_values():
    f = lambda t: l0_schedule(int(t * 1000), 1000, 1 / 16, 0.01, 0.5)  # noqa: E731
    assert f(0) == 1.0 and f(0.01) == 1.0
    assert f(0.25) == pytest.approx(1 + (1 / 16 - 1) * (0.24 / 0.49))
    assert f(0.5) == pytest.approx(1 / 16) and f(1.0) == pytest.approx(1 / 16)


def test_abs_topk_keeps_the_largest_magnitudes():
    x = torch.tensor([[0.1, -3.0, 2.0, -0.5]])
    assert abs_topk(x, 2).tolist() == [[0.0, -3.0, 2.0, 0.0]]


def test_abstopk_in_the_model_limits_active_neurons():
    cfg = WeightSparseConfig(d_model=32, n_heads=2, d_mlp=64, afrac=0.25)
    model = build_model(cfg)
    _, cache = model.run_with_cache("x = 'abc", names=["blocks.0.mlp.hook_post", "blocks.0.hook_attn_out"])
    assert int((cache["blocks.0.mlp.hook_post"] != 0).sum(-1).max()) <= 16
    assert int((cache["blocks.0.hook_attn_out"] != 0).sum(-1).max()) <= 8


def _data(texts, tok, bs=16):
    return lambda step: tokenize_texts(tok, texts[(step * bs) % len(texts) :][:bs])


def test_training_keeps_every_matrix_at_its_budget():
    cfg = WeightSparseConfig(d_model=32, n_heads=2, d_mlp=64, steps=8, l0=1 / 8, min_per_neuron=2, batch_size=8)
    model = build_model(cfg)
    texts = get_task("quotes").train_texts(64, 0)
    model, report = train_weight_sparse(cfg, _data(texts, model.tokenizer, 8), model=model, progress=False)
    for name, p in sparse_parameters(model.hf_model):
        budget = math.ceil(p.numel() / 8)
        expect = max(budget, p.shape[0] * 2) if p.ndim == 2 else budget
        assert int((p != 0).sum()) == expect, name
    assert report.losses and math.isfinite(report.final_loss)


def test_bisection_returns_the_minimal_k_on_a_monotone_toy():
    loss = lambda k: 1.0 / k  # noqa: E731
    assert bisect_k(100, loss, 0.05) == (20, 0.05)
    assert bisect_k(100, loss, 0.001) is None
    assert bisect_k(100, loss, 2.0)[0] == 1


def test_unreachable_target_raises_with_the_best_circuit(neox):
    cfg = PruneConfig(steps=3, lambda_steps=1, target_loss=1e-4, n_train=16, n_eval=16, batch_size=8)
    with pytest.raises(TargetNotReached, match="no circuit reached task loss") as err:
        prune(neox, get_task("quotes"), cfg, progress=False)
    best = err.value.best
    assert best.metrics["reached_target"] is False and best.metrics["n_nodes"] > 0


def test_prune_finds_a_circuit_at_a_reachable_target(neox):
    task = get_task("quotes")
    cfg = PruneConfig(steps=5, lambda_steps=2, target_loss=10.0, n_train=16, n_eval=16, batch_size=8)
    circuit = prune(neox, task, cfg, progress=False)
    assert circuit.metrics["reached_target"] and circuit.metrics["n_nodes"] == len(circuit.nodes) >= 1
    assert circuit.metrics["task_loss"] <= 10.0
