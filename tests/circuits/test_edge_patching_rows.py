"""Edge patching through the rows that carry ablated (or kept) edges gives the numbers of the dense sum."""

import pytest
import torch

from circuits.evaluation import edge_patching
from circuits.evaluation.edge_patching import patched_metric, upstream_means
from circuits.model.residual_graph import EdgeGraph
from tests.circuits.conftest import make_model
from tests.circuits.test_eap import pairs


def _masks(graph: EdgeGraph) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    valid = graph.valid
    out = [valid.clone(), torch.zeros_like(valid)]
    for density in (0.02, 0.3, 0.7, 0.98):
        out.append(valid & (torch.rand(valid.shape, generator=g) < density))
    one_row = torch.zeros_like(valid)
    one_row[3] = valid[3]  # one upstream node kept into everything
    out += [one_row, valid & ~one_row]
    return out


@pytest.mark.parametrize("arch", ["gpt_neox_seq", "gpt_neox", "llama"])
@pytest.mark.parametrize("ablation", ["corrupt", "mean", "zero"])
def test_sparse_rows_match_the_dense_sum(arch, ablation, monkeypatch):
    model = make_model(arch)
    graph = EdgeGraph.of(model)
    batch = pairs(n=5, length=7, seed=1)
    means = upstream_means(model, batch, graph) if ablation == "mean" else None
    for keep in _masks(graph):
        fast = patched_metric(model, batch, keep, "logit-diff", ablation, means, 2, graph)["metric"]
        monkeypatch.setattr(edge_patching, "_SPARSE_ROWS", False)
        slow = patched_metric(model, batch, keep, "logit-diff", ablation, means, 2, graph)["metric"]
        monkeypatch.setattr(edge_patching, "_SPARSE_ROWS", True)
        torch.testing.assert_close(fast, slow, atol=1e-4, rtol=1e-4)
    full = patched_metric(model, batch, graph.valid, "logit-diff", ablation, means, 2, graph)["metric"]
    empty = patched_metric(model, batch, torch.zeros_like(graph.valid), "logit-diff", ablation, means, 2, graph)
    assert (full - empty["metric"]).abs().max() > 1e-3  # the masks change the output: the comparison can fail
