"""Attribution beyond language models: our EK-FAC on an MLP classifier through a Kronfluence-style task object,
checked against the exact damped Gauss-Newton inverse, and by LDS on digits (beside Kronfluence when installed)."""

import pytest
import torch
from scipy.stats import spearmanr

from attribution.ekfac_linear import EKFAC, per_example_gradients
from attribution.lds import lds, random_subsets, retrain_subsets
from attribution.lds_classifier import ClassifierTask, DigitsTask, mlp


def _exact_ggn(model, layer, x):
    """sum over examples of J^T (diag p - p p^T) J for one Linear's weight and bias, J = d logits / d theta."""
    from torch.func import functional_call, jacrev

    theta = torch.cat([layer.weight, layer.bias[:, None]], 1).detach()
    name = [n for n, m in model.named_modules() if m is layer][0]

    def logits(t, xi):
        return functional_call(model, {f"{name}.weight": t[:, :-1], f"{name}.bias": t[:, -1]}, (xi[None],))[0]

    total = 0
    for xi in x:
        p = logits(theta, xi).softmax(-1).detach()
        J = jacrev(logits)(theta, xi).flatten(1)  # [10, n_params]
        total = total + J.T @ (torch.diag(p) - torch.outer(p, p)) @ J
    return total / len(x)


def test_ekfac_on_any_module_tracks_the_exact_damped_ggn():
    digits = DigitsTask(n_train=120, n_query=4, steps=8)  # an unconfident model: the sampled Fisher converges fast
    model = digits.train(torch.arange(120))
    x, y, xq, yq = digits.data()
    task = ClassifierTask()
    ek = EKFAC(model, task, modules=["4"]).fit(digits.batches("train"), label_samples=16)
    got = ek.scores(digits.batches("train"), digits.batches("query"))
    layer = model[4]
    mods = {"4": layer}
    ggn = _exact_ggn(model, layer, x)
    damp = ek.factors.damping()["4"]
    gq = per_example_gradients(mods, lambda: task.compute_measurement((xq, yq), model))[0]["4"].flatten(1)
    gtr = per_example_gradients(mods, lambda: task.compute_train_loss((x, y), model))[0]["4"].flatten(1)
    exact = gtr @ torch.linalg.solve(ggn + damp * torch.eye(len(ggn)), gq.T)
    rhos = [spearmanr(got[:, q].numpy(), exact[:, q].detach().numpy()).statistic for q in range(4)]
    assert min(rhos) > 0.6, rhos  # EK-FAC is an approximation: 0.65-0.8 here; a sign or scale error gives < 0


def test_a_task_without_kronfluence_methods_is_refused():
    with pytest.raises(TypeError, match="Kronfluence.s Task methods"):
        EKFAC(mlp(), object())


def test_digits_lds_of_ekfac_is_well_above_chance(tmp_path):
    digits = DigitsTask(n_train=160, n_query=16, steps=80)
    masks = random_subsets(digits.n_train, 12, 0.5, seed=0)
    losses = retrain_subsets(digits, masks, tmp_path / "retrain", progress=False)
    model = digits.train(torch.arange(digits.n_train))
    scores = (
        EKFAC(model, ClassifierTask())
        .fit(digits.batches("train"), label_samples=2)
        .scores(digits.batches("train"), digits.batches("query"))
    )
    ours = lds(scores, masks, losses)
    noise = lds(torch.randn(scores.shape, generator=torch.Generator().manual_seed(0)), masks, losses)
    assert ours.mean > 0.3 and ours.low > noise.high, (ours, noise)
    assert lds(-scores, masks, losses).mean < -0.3  # the sign is the harness's


def test_our_scores_rank_as_kronfluence_s_when_installed(tmp_path):
    pytest.importorskip(
        "kronfluence",
        reason="kronfluence is not installed: put it on PYTHONPATH (ATTRIBUTION_ANCHORS, attribution/README.md) "
        "to compare our EK-FAC with its scores",
    )
    from attribution.experiments.digits_lds import kronfluence_scores

    digits = DigitsTask(n_train=160, n_query=8, steps=8)  # unconfident: 16 sampled labels per row pin the Fisher
    model = digits.train(torch.arange(digits.n_train))
    ours = (
        EKFAC(model, ClassifierTask())
        .fit(digits.batches("train"), label_samples=16)
        .scores(digits.batches("train"), digits.batches("query"))
    )
    theirs = kronfluence_scores(model, digits, tmp_path, repeats=16)
    rhos = [spearmanr(ours[:, q].numpy(), theirs[:, q].numpy()).statistic for q in range(8)]
    assert min(rhos) > 0.8, rhos
