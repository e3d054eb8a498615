"""The decoder-bias initialisation: Weiszfeld's geometric median on cases with known answers."""

import pytest
import torch

from sae.geometric_median import geometric_median, initial_b_dec


def test_collinear_points_have_their_middle_point_as_median():
    x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0]])
    assert torch.allclose(geometric_median(x), torch.tensor([1.0, 0.0]), atol=1e-3)


def test_median_resists_an_outlier_that_moves_the_mean():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(999, 8, generator=g) * 0.1 + 3.0
    x = torch.cat([x, torch.full((1, 8), 1e4)])
    med, mean = geometric_median(x), x.mean(0)
    assert (med - 3.0).abs().max() < 0.05 and (mean - 3.0).abs().max() > 5


def test_median_minimises_the_sum_of_distances():
    x = torch.randn(200, 5, generator=torch.Generator().manual_seed(1)) ** 3
    med = geometric_median(x).double()
    cost = lambda y: (x.double() - y).norm(dim=-1).sum()
    for _ in range(20):
        assert cost(med) <= cost(med + 0.01 * torch.randn(5, dtype=torch.float64)) + 1e-9


def test_initial_b_dec_choices_and_bad_input():
    x = torch.randn(50, 3)
    assert initial_b_dec(x, "zeros") is None
    assert torch.allclose(initial_b_dec(x, "mean"), x.mean(0))
    with pytest.raises(ValueError, match="init_b_dec must be one of"):
        initial_b_dec(x, "median-ish")
    with pytest.raises(ValueError, match="non-empty"):
        geometric_median(torch.empty(0, 3))


def test_train_config_refuses_an_unknown_init():
    from sae.train import TrainConfig

    assert TrainConfig(arch="topk", d_sae=16, k=2).init_b_dec == "median"
    with pytest.raises(ValueError, match="init_b_dec must be one of"):
        TrainConfig(arch="topk", d_sae=16, k=2, init_b_dec="geometric")


def test_a_run_recorded_before_the_init_existed_still_resumes(tmp_path):
    """0.2.0 folders have no `init_b_dec` in train_config.json; they started from zeros and resume as such."""
    import json

    from sae.synthetic import hierarchical_split, write_store
    from sae.train import TrainConfig, train_sae

    store = write_store(tmp_path / "store", hierarchical_split(n=4096, seed=0).x, rows_per_shard=2048)
    cfg = TrainConfig(arch="topk", d_sae=16, k=2, total_tokens=2048, batch_size=512, exclude="none")
    train_sae(store, cfg, tmp_path / "run", progress=False)
    path = tmp_path / "run" / "train_config.json"
    saved = json.loads(path.read_text())
    assert saved.pop("init_b_dec") == "median"
    path.write_text(json.dumps(saved))
    _, rep = train_sae(store, cfg, tmp_path / "run", progress=False)
    assert json.loads(path.read_text())["init_b_dec"] == "zeros" and rep["steps"] == 4
