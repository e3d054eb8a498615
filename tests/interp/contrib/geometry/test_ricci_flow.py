import pytest
import torch

from interp.cache import ActivationCache
from interp.contrib.geometry.ricci_flow import (
    forman_curvature,
    graph_distances,
    knn_graph,
    modularity,
    ricci_flow,
    scalar_curvature,
    states_from_cache,
)


def test_knn_graph_on_a_line():
    x = torch.tensor([[0.0], [1.0], [3.0], [6.0], [10.0]])
    assert knn_graph(x, 1).tolist() == [[0, 1], [1, 2], [2, 3], [3, 4]]


def test_forman_curvature_exact_cases():
    tri = torch.tensor([[0, 1], [0, 2], [1, 2]])
    assert forman_curvature(tri, 3, augmented=False).tolist() == [0.0, 0.0, 0.0]
    assert forman_curvature(tri, 3, augmented=True).tolist() == [3.0, 3.0, 3.0]
    path = torch.tensor([[0, 1], [1, 2], [2, 3]])
    assert forman_curvature(path, 4).tolist() == [1.0, 0.0, 1.0]
    assert scalar_curvature(path, forman_curvature(path, 4), 4).tolist() == [1.0, 1.0, 1.0, 1.0]


def test_modularity_of_two_triangles():
    e = torch.tensor([[0, 1], [0, 2], [1, 2], [3, 4], [3, 5], [4, 5]])
    assert modularity(e, torch.tensor([0, 0, 0, 1, 1, 1]), 6) == pytest.approx(0.5)
    assert modularity(e, torch.zeros(6, dtype=torch.long), 6) == pytest.approx(0.0)


def test_graph_distances_caps_unreachable_pairs():
    d = graph_distances(torch.tensor([[0, 1], [1, 2]]), 4)
    assert d[0, 2] == 2 and d[0, 3] == 3 and d[3, 3] == 0


def test_scaling_preserves_the_graph_so_nothing_moves():
    x = torch.randn(60, 5, generator=torch.Generator().manual_seed(0))
    res = ricci_flow([x, 3 * x, -x], k=5)
    assert torch.all(res.node_change == 0)


def test_pulling_clusters_apart_stretches_negatively_curved_edges():
    g = torch.Generator().manual_seed(0)
    pts = torch.randn(200, 2, generator=g)
    labels = torch.arange(200) % 2
    offset = torch.tensor([1.5, 0.0])
    x0 = pts + labels[:, None] * offset
    x1 = pts + labels[:, None] * offset * 4
    res = ricci_flow([x0, x1], k=8, labels=labels, distance="euclidean")
    # Forman curvature of a kNN graph is mostly degree noise, so the correlation is weak but negative
    assert res.edge_coefficients[0] < -0.02
    assert ricci_flow([x0, x1], k=8, distance="geodesic").edge_coefficients[0] < -0.02
    assert res.modularity[1] > res.modularity[0]
    assert res.summary()["global_coefficient"] != res.summary()["global_coefficient"]  # NaN with 1 transition


def test_bad_inputs():
    x = torch.randn(10, 3)
    with pytest.raises(ValueError, match="k must be"):
        knn_graph(x, 10)
    with pytest.raises(ValueError, match="same points"):
        ricci_flow([x, x[:5]])
    with pytest.raises(ValueError, match="NaN"):
        ricci_flow([x, x.clone().fill_(float("nan"))])
    with pytest.raises(ValueError, match="distance"):
        ricci_flow([x, x], distance="cosine")


def test_states_from_cache_drops_padding_and_first_position():
    acts = {
        f"blocks.{l}.hook_resid_post": torch.arange(2 * 4 * 3, dtype=torch.float).reshape(2, 4, 3) + l for l in range(2)
    }
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    cache = ActivationCache(acts, tokens=torch.zeros(2, 4, dtype=torch.long), attention_mask=mask)
    states = states_from_cache(cache, max_points=None)
    assert len(states) == 2 and states[0].shape == (4, 3)
    assert torch.equal(states[1] - states[0], torch.ones(4, 3))
