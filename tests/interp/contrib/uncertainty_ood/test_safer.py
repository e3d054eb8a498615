import pytest
import torch

from interp.contrib.uncertainty_ood.safer import SAFER, fingerprint, reshape, sbm_graph, sgc_features


def test_fingerprint_and_reshape_closed_form():
    # points on the x-axis around (0, 5): mean (0, 5), direction ±e1; reshape keeps x, drops the y offset
    x = torch.tensor([[-1.0, 5.0], [1.0, 5.0], [-2.0, 5.0], [2.0, 5.0]])
    mu, u = fingerprint(x, 1)
    assert mu.tolist() == pytest.approx([0.0, 5.0])
    assert abs(float(u[0, 0])) == pytest.approx(1.0)
    phi, resid = reshape(torch.tensor([[3.0, 7.0]]), mu, u)
    assert phi[0].tolist() == pytest.approx([3.0, 5.0])
    assert resid.item() == pytest.approx(4.0)


def test_safer_routes_tasks_and_flags_unknowns():
    g = torch.Generator().manual_seed(0)

    # 3 tasks in separate 2-D subspaces of R^8, 2 classes each; unknowns in a fourth subspace
    def blob(dims, sign, n=60):
        x = 0.05 * torch.randn(n, 8, generator=g)
        x[:, dims[0]] += 3.0 * sign
        x[:, dims[1]] += torch.randn(n, generator=g)
        return x

    safer = SAFER(rank=2, gamma=1.0, steps=200)
    for t, dims in enumerate(((0, 1), (2, 3), (4, 5))):
        x = torch.cat([blob(dims, +1), blob(dims, -1)])
        safer.learn_task(x, torch.tensor([2 * t] * 60 + [2 * t + 1] * 60))
    test = torch.cat([blob((2, 3), +1, 20), blob((4, 5), -1, 20)])
    pred, score = safer.predict(test)
    assert (pred[:20] == 2).all() and (pred[20:] == 5).all()
    _, unk = safer.predict(blob((6, 7), +1, 20))
    assert unk.min() > score.max()


def test_graph_generator_and_sgc():
    a, x, y = sbm_graph(40, 4, 0.5, 0.05, 3, 1.0, seed=0)
    assert torch.equal(a, a.T) and a.diagonal().sum() == 0 and set(a.unique().tolist()) <= {0.0, 1.0}
    # SGC with one hop on a graph with no edges is the identity (self-loops only)
    assert torch.allclose(sgc_features(torch.zeros(3, 3), torch.eye(3), hops=1), torch.eye(3))
    # two nodes joined by an edge: Â = [[.5, .5], [.5, .5]]
    assert torch.allclose(
        sgc_features(torch.tensor([[0.0, 1.0], [1.0, 0.0]]), torch.tensor([[2.0], [0.0]]), 1),
        torch.tensor([[1.0], [1.0]]),
    )


def test_bad_input():
    with pytest.raises(ValueError, match="rank"):
        SAFER(rank=0)
    with pytest.raises(ValueError, match="no task"):
        SAFER().predict(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="two classes"):
        SAFER(rank=1).learn_task(torch.randn(4, 3), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="labels"):
        SAFER(rank=1).learn_task(torch.randn(4, 3), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="rank=5"):
        fingerprint(torch.randn(4, 3), 5)
    with pytest.raises(ValueError, match="p_out"):
        sbm_graph(10, 2, 0.1, 0.5, 2, 1.0, 0)


def test_mahalanobis_prototypes_pool_the_covariance_across_tasks():
    from interp.contrib.uncertainty_ood.experiments.safer import MahalanobisPrototypes, Prototypes

    # two classes, one per task, elongated along axis 0: the means differ along axis 1 only
    g = torch.Generator().manual_seed(0)
    scale = torch.tensor([10.0, 0.5])
    xa, xb = torch.randn(200, 2, generator=g) * scale, torch.randn(200, 2, generator=g) * scale + torch.tensor([0, 2.0])
    m = MahalanobisPrototypes(shrink=0.0)
    m.learn_task(xa, torch.zeros(200, dtype=torch.long))
    m.learn_task(xb, torch.ones(200, dtype=torch.long))
    assert m.n == 400 and torch.allclose(m.scatter / 398, torch.diag(scale**2).double(), rtol=0.25, atol=0.1)
    # a point far out along the long axis but on class 0's side: Mahalanobis keeps it, Euclidean prototypes do not
    probe = torch.tensor([[8.0, 0.2], [0.0, 25.0]])
    pred, score = m.predict(probe)
    assert pred[0] == 0 and score[1] > score[0]  # the off-manifold point is the more "unknown" one
    e = Prototypes()
    e.learn_task(xa, torch.zeros(200, dtype=torch.long))
    e.learn_task(xb, torch.ones(200, dtype=torch.long))
    assert e.predict(probe)[1][0] > score[0]  # Euclidean energy calls the first point far more unusual
