import itertools
import math

import pytest
import torch

from interp.contrib.graphs.hial import (
    Hypergraph,
    clique_expansion,
    diffusion,
    edge_consistency,
    greedy,
    hial_objective,
    hial_propagation,
    lazy_greedy,
)


def _hg():
    # a triangle hyperedge {0,1,2} and a pair {2,3}
    return Hypergraph([[0, 1, 2], [2, 3]], 4)


def test_hand_computed_propagation_weights():
    hg = _hg()
    # clique expansion: node 2 links to 0, 1, 3 with weight 1 each
    assert clique_expansion(hg)[2].tolist() == pytest.approx([1 / 3, 1 / 3, 0, 1 / 3])
    # HIAL without features: the triangle spreads 1/(3-1) per pair, the pair 1/(2-1): node 2 -> (0.5, 0.5, 0, 1)/2
    assert hial_propagation(hg)[2].tolist() == pytest.approx([0.25, 0.25, 0, 0.5])
    assert hial_propagation(hg)[3].tolist() == pytest.approx([0, 0, 1, 0])


def test_edge_consistency_closed_form():
    hg = _hg()
    X = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    # triangle: cosines (1, 0, 0) -> mean 1/3; pair: cos = -1 -> clipped to 0
    assert edge_consistency(hg, X).tolist() == pytest.approx([1 / 3, 0.0])


def test_diffusion_rows_sum_to_one_and_zero_steps_is_identity():
    P = hial_propagation(_hg())
    assert torch.allclose(diffusion(P, 3).sum(1), torch.ones(4, dtype=torch.float64))
    assert torch.allclose(diffusion(P, 0), torch.eye(4, dtype=torch.float64))


def _small_objective(seed=0, n=9):
    g = torch.Generator().manual_seed(seed)
    edges = [
        sorted(torch.randperm(n, generator=g)[: int(torch.randint(2, 5, (1,), generator=g))].tolist()) for _ in range(7)
    ]
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    hg = Hypergraph(edges, n)
    return hial_objective(hial_propagation(hg, X), X), n


def test_objective_is_monotone_submodular_by_brute_force():
    f, n = _small_objective()
    nodes = range(n)
    for A in itertools.combinations(nodes, 2):
        for extra in nodes:
            if extra in A:
                continue
            B = list(A) + [extra]
            for v in nodes:
                if v in B:
                    continue
                gain_A, gain_B = f(list(A) + [v]) - f(list(A)), f(B + [v]) - f(B)
                assert gain_A >= -1e-12 and gain_A >= gain_B - 1e-12


def test_lazy_greedy_matches_greedy_and_the_1_minus_1_over_e_bound():
    for seed in range(3):
        f, n = _small_objective(seed)
        S = lazy_greedy(f, n, 3)
        assert S == greedy(f, n, 3)
        best = max(f(list(c)) for c in itertools.combinations(range(n), 3))
        assert f(S) >= (1 - 1 / math.e) * best - 1e-12


def test_bad_inputs():
    with pytest.raises(ValueError, match="no hyperedges"):
        Hypergraph([], 3)
    with pytest.raises(ValueError, match="distinct"):
        Hypergraph([[0, 0]], 3)
    with pytest.raises(ValueError, match="outside"):
        Hypergraph([[0, 5]], 3)
    with pytest.raises(ValueError, match="n_nodes"):
        edge_consistency(_hg(), torch.randn(3, 2))
    with pytest.raises(ValueError, match="budget"):
        lazy_greedy(lambda S: float(len(S)), 4, 5)
    with pytest.raises(ValueError, match="alpha"):
        diffusion(torch.eye(2, dtype=torch.float64), 2, alpha=1.0)


def test_kmeans_baseline_picks_one_node_per_cluster():
    from interp.contrib.graphs.experiments.hial import kmeans_select

    # three tight, far-apart clusters of 10 nodes: three picks, one in each, each nearest its cluster's centre
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]], dtype=torch.float64)
    F = centres.repeat_interleave(10, 0) + 0.1 * torch.randn(30, 2, generator=g, dtype=torch.float64)
    got = kmeans_select(F, 3, seed=0)
    assert sorted(v // 10 for v in got) == [0, 1, 2]
    for v in got:
        members = F[(v // 10) * 10 : (v // 10 + 1) * 10]
        assert int((members - members.mean(0)).norm(dim=1).argmin()) == v % 10
    # as many picks as nodes: every node once
    assert sorted(kmeans_select(F[:5], 5, seed=0)) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="budget"):
        kmeans_select(F, 31, seed=0)
