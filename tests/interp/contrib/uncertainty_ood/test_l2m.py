import math

import pytest
import torch

from interp.contrib.uncertainty_ood.l2m import (
    GaussianLogisticModel,
    acquire,
    binary_entropy,
    forward_selection_order,
    global_importance_order,
)


def _model(rho=0.8):
    cov = torch.tensor([[1.0, rho, 0.0], [rho, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    return GaussianLogisticModel(
        torch.zeros(3, dtype=torch.float64), cov, torch.tensor([2.0, 0.0, 0.5], dtype=torch.float64), 0.0
    )


def test_gaussian_conditional_closed_form():
    m = _model()
    mean, cov = m.conditional(torch.tensor([0.0, 1.0, 0.0]), torch.tensor([False, True, False]))
    assert mean.tolist() == pytest.approx([0.8, 1.0, 0.0])  # E[x0 | x1 = 1] = ρ
    assert cov[0, 0].item() == pytest.approx(1 - 0.64)  # Var = 1 - ρ²
    assert cov[1, 1].item() == 0.0 and cov[2, 2].item() == pytest.approx(1.0)


def test_cmi_matches_monte_carlo_and_is_zero_for_an_irrelevant_feature():
    m = _model()
    x, obs = torch.zeros(3), torch.zeros(3, dtype=torch.bool)
    # brute force: I = H(p0) - E_{x_j}[H(p(y | x_j))], sampling x_j and using the exact conditional predictor
    g = torch.Generator().manual_seed(0)
    xs = torch.randn(20000, generator=g, dtype=torch.float64)
    p0 = m.predict(x, obs)
    hs = []
    for v in xs[:4000]:
        hs.append(
            binary_entropy(
                torch.tensor(m.predict(torch.tensor([float(v), 0.0, 0.0]), torch.tensor([True, False, False])))
            )
        )
    brute = float(binary_entropy(torch.tensor(p0)) - torch.stack(hs).mean())
    assert m.cmi(x, obs, 0) == pytest.approx(brute, abs=0.01)
    # x2 independent of the rest with weight 0.5 vs x0 with weight 2: x0 is worth more
    assert m.cmi(x, obs, 0) > m.cmi(x, obs, 2) > 0
    # once x0 is known, x1 (a noisy copy with zero weight) tells nothing more
    assert m.cmi(torch.tensor([0.3, 0.0, 0.0]), torch.tensor([True, False, False]), 1) == pytest.approx(0.0, abs=1e-9)


def test_probit_prediction_limits():
    m = _model()
    assert m.predict(torch.zeros(3), torch.zeros(3, dtype=torch.bool)) == pytest.approx(0.5)
    assert m.predict(torch.tensor([1.0, 0.0, 0.0]), torch.tensor([True, True, True])) == pytest.approx(
        1 / (1 + math.exp(-2))
    )


def test_acquisition_policies():
    m = _model()
    x = torch.tensor([0.5, 0.4, -1.0])
    assert acquire(m, x, 2, "cmi")[0] == 0
    assert acquire(m, x, 3, "fixed", order=[2, 1, 0]) == [2, 1, 0]
    assert sorted(acquire(m, x, 3, "random")) == [0, 1, 2]
    assert global_importance_order(m)[0] == 0


def test_fit_recovers_a_simple_model():
    g = torch.Generator().manual_seed(0)
    m = _model()
    x = torch.randn(3000, 3, generator=g, dtype=torch.float64) @ torch.linalg.cholesky(m.cov).T
    y = (torch.rand(3000, generator=g, dtype=torch.float64) < torch.sigmoid(x @ m.w)).long()
    obs = torch.rand(3000, 3, generator=g) > 0.3
    fit = GaussianLogisticModel.fit(x, obs, y, torch.ones(3000, dtype=torch.bool), ridge=0.0)
    assert torch.allclose(fit.cov, m.cov, atol=0.08)
    assert fit.w[0].item() == pytest.approx(2.0, abs=0.4)


def test_bad_input():
    m = _model()
    with pytest.raises(ValueError, match="already observed"):
        m.cmi(torch.zeros(3), torch.tensor([True, False, False]), 0)
    with pytest.raises(ValueError, match="budget"):
        acquire(m, torch.zeros(3), 4)
    with pytest.raises(ValueError, match="unknown policy"):
        acquire(m, torch.zeros(3), 1, "best")
    with pytest.raises(ValueError, match="permutation"):
        acquire(m, torch.zeros(3), 1, "fixed", order=[0, 0, 1])
    with pytest.raises(ValueError, match="two labeled"):
        GaussianLogisticModel.fit(
            torch.zeros(4, 2), torch.ones(4, 2, dtype=torch.bool), torch.zeros(4), torch.zeros(4, dtype=torch.bool)
        )


def test_forward_selection_order_follows_the_labels_and_the_missingness():
    # independent features, y depends on feature 2 strongly and on feature 0 a little
    d = 4
    m = GaussianLogisticModel(
        torch.zeros(d, dtype=torch.float64),
        torch.eye(d, dtype=torch.float64),
        torch.tensor([1.0, 0.0, 3.0, 0.0], dtype=torch.float64),
        0.0,
    )
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, d, generator=g, dtype=torch.float64)
    y = (torch.rand(200, generator=g, dtype=torch.float64) < torch.sigmoid(x @ m.w)).long()
    seen, labeled = torch.ones(200, d, dtype=torch.bool), torch.ones(200, dtype=torch.bool)
    assert forward_selection_order(m, x, seen, y, labeled, 2) == [2, 0]
    seen[:, 2] = False  # feature 2 never observed in the retrospective rows: it cannot help there
    assert forward_selection_order(m, x, seen, y, labeled, 1) == [0]
    with pytest.raises(ValueError, match="budget"):
        forward_selection_order(m, x, seen, y, labeled, d + 1)
