"""Training from an ActivationStore: checkpoints, resumption, NaN stop, shape checks."""

import json

import pytest
import torch

from sae import load_sae
from sae.synthetic import write_store
from sae.train import NonFiniteError, TrainConfig, train_sae


def _data(n=4096, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.relu(torch.randn(n, 32, generator=g)) @ torch.randn(32, d, generator=g)


def test_resumed_run_equals_uninterrupted_run(tmp_path, monkeypatch):
    store = write_store(tmp_path / "store", _data(), rows_per_shard=1024)
    cfg = TrainConfig(arch="topk", d_sae=32, k=4, total_tokens=256 * 10, batch_size=256, checkpoint_every=4)
    full, rep = train_sae(store, cfg, tmp_path / "full", progress=False)
    assert (tmp_path / "full" / "cfg.json").exists() and rep["steps"] == 10

    import sae_lens.training.sae_trainer as st

    real, calls = st.SAETrainer.step, {"n": 0}

    def dying_step(self, batch):
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt
        return real(self, batch)

    monkeypatch.setattr(st.SAETrainer, "step", dying_step)
    with pytest.raises(KeyboardInterrupt):
        train_sae(store, cfg, tmp_path / "cut", progress=False)
    monkeypatch.setattr(st.SAETrainer, "step", real)
    resumed, rep2 = train_sae(store, cfg, tmp_path / "cut", progress=False)
    assert rep2["resumed_from_step"] == 4
    for (name, a), b in zip(full.state_dict().items(), resumed.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-6), name
    assert torch.allclose(load_sae(tmp_path / "cut", inference=False).W_dec, full.W_dec)


def test_other_settings_in_the_same_folder_are_refused(tmp_path):
    store = write_store(tmp_path / "store", _data(1024), rows_per_shard=1024)
    train_sae(
        store, TrainConfig(arch="relu", d_sae=16, total_tokens=512, batch_size=256), tmp_path / "run", progress=False
    )
    with pytest.raises(ValueError, match="other settings"):
        train_sae(
            store,
            TrainConfig(arch="relu", d_sae=24, total_tokens=512, batch_size=256),
            tmp_path / "run",
            progress=False,
        )


def test_nan_in_activations_stops_with_clear_error_and_keeps_good_checkpoint(tmp_path):
    x = _data(4096)
    x[3000:3100] = float("nan")
    store = write_store(tmp_path / "store", x, rows_per_shard=1024)
    cfg = TrainConfig(
        arch="c2r",
        d_sae=32,
        k=4,
        total_tokens=256 * 40,
        batch_size=256,
        checkpoint_every=1,
        exclude="none",
        normalize=False,
    )
    with pytest.raises(NonFiniteError, match="non-finite activations"):
        train_sae(store, cfg, tmp_path / "run", progress=False)
    ckpt = tmp_path / "run" / "checkpoint"
    if (ckpt / "cfg.json").exists():  # whatever was saved before the bad batch is intact
        good = load_sae(ckpt)
        assert all(torch.isfinite(p).all() for p in good.parameters())
    assert not (tmp_path / "run" / "cfg.json").exists()  # no final model was written


def test_store_hook_and_shape_checks(tmp_path):
    store = write_store(tmp_path / "store", _data(512), rows_per_shard=512)
    with pytest.raises(ValueError, match="not in the store"):
        train_sae(
            store,
            TrainConfig(arch="topk", d_sae=8, k=2, hook="blocks.0.hook_resid_post", total_tokens=256, batch_size=256),
            tmp_path / "r",
        )
    from sae.train import _check_shapes

    with pytest.raises(ValueError, match="d_model 16 but the SAE expects d_in 32"):
        _check_shapes(store, "synthetic.hook_x", 32)
    assert json.loads((tmp_path / "store" / "manifest.json").read_text())  # store untouched and readable


def test_held_out_shards_are_never_trained_on_and_eval_scores_on_them(tmp_path):
    from sae.cli import eval_rows

    x = _data(4096)
    x[3072:] = float("nan")  # the last shard: reading any of it would stop training with NonFiniteError
    store = write_store(tmp_path / "store", x, rows_per_shard=1024)
    cfg = TrainConfig(arch="topk", d_sae=32, k=4, total_tokens=256 * 20, batch_size=256, holdout_shards=1)
    _, rep = train_sae(store, cfg, tmp_path / "run", progress=False)  # 20 steps = 1.7 passes over 3 shards
    assert rep["heldout_shards"] == [3]
    split, rows = eval_rows(tmp_path / "run", store)
    assert split == "heldout" and rows.tolist() == list(range(3072, 4096))
    assert eval_rows(tmp_path / "run", store, "all")[1].numel() == 4096
    with pytest.raises(ValueError, match="leaves nothing to train on"):
        train_sae(
            store,
            TrainConfig(arch="topk", d_sae=8, k=2, total_tokens=256, batch_size=256, holdout_shards=4),
            tmp_path / "r2",
            progress=False,
        )
    assert not (tmp_path / "r2").exists()  # refused before anything was written
    with pytest.raises(ValueError, match="without held-out shards"):
        x2 = write_store(tmp_path / "clean", _data(1024), rows_per_shard=512)
        train_sae(
            x2,
            TrainConfig(arch="topk", d_sae=8, k=2, total_tokens=256, batch_size=256),
            tmp_path / "r4",
            progress=False,
        )
        eval_rows(tmp_path / "r4", x2, "heldout")


def test_running_a_finished_run_again_resumes_at_the_end(tmp_path):
    store = write_store(tmp_path / "store", _data(1024), rows_per_shard=512)
    cfg = TrainConfig(arch="topk", d_sae=16, k=2, total_tokens=256 * 3, batch_size=256)
    first, _ = train_sae(store, cfg, tmp_path / "run", progress=False)
    again, rep = train_sae(store, cfg, tmp_path / "run", progress=False)
    assert rep["resumed_from_step"] == 3 and rep["steady_seconds_per_step"] is None
    assert torch.allclose(again.W_dec, first.W_dec)
