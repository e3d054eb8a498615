"""SAE training survives kills exactly, refuses foreign stores, and never unpickles a file it did not write.

Causes 2, 3, 4, 5, 10 and 12 of issue 17; each test failed before its fix. Seconds each (tiny stores).
"""

import json
import os
import signal
from contextlib import contextmanager

import pytest
import torch

from sae.synthetic import write_store
from sae.train import TrainConfig, train_sae


def _data(n=2048, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.relu(torch.randn(n, 32, generator=g)) @ torch.randn(32, d, generator=g)


@contextmanager
def deadline(seconds):
    """Fail (instead of hanging the suite) when the block runs longer than `seconds`."""

    def boom(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _kill_at_step(monkeypatch, n):
    import sae_lens.training.sae_trainer as st

    real, calls = st.SAETrainer.step, {"n": 0}

    def dying_step(self, batch):
        calls["n"] += 1
        if calls["n"] == n:
            raise KeyboardInterrupt
        return real(self, batch)

    monkeypatch.setattr(st.SAETrainer, "step", dying_step)
    return lambda: monkeypatch.setattr(st.SAETrainer, "step", real)


@pytest.mark.parametrize("arch", ["c2r", "c2r_topk"])
def test_killed_and_resumed_c2r_run_is_bitwise_the_uninterrupted_one(tmp_path, monkeypatch, arch):
    store = write_store(tmp_path / "store", _data(), rows_per_shard=512)
    # interval 1: the permutation is drawn every step; chunk 8 < d_sae: the permutation matters.
    cfg = TrainConfig(
        arch=arch,
        d_sae=32,
        k=4,
        total_tokens=128 * 10,
        batch_size=128,
        checkpoint_every=3,
        settings={"c2r_interval": 1, "c2r_chunk_size": 8, "c2r_lambda": 1.0},
    )
    full, _ = train_sae(store, cfg, tmp_path / "full", progress=False)
    restore = _kill_at_step(monkeypatch, 8)
    with pytest.raises(KeyboardInterrupt):
        train_sae(store, cfg, tmp_path / "cut", progress=False)
    restore()
    torch.manual_seed(12345)  # a resumed process starts with some other global RNG state
    resumed, rep = train_sae(store, cfg, tmp_path / "cut", progress=False)
    assert rep["resumed_from_step"] == 6
    for (name, a), b in zip(full.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_resuming_on_another_store_is_refused(tmp_path, monkeypatch):
    a = write_store(tmp_path / "a", _data(seed=0), rows_per_shard=512)
    b = write_store(tmp_path / "b", _data(seed=1), rows_per_shard=512)  # same hook, width, row count, meta
    cfg = TrainConfig(arch="topk", d_sae=32, k=4, total_tokens=128 * 6, batch_size=128, checkpoint_every=2)
    restore = _kill_at_step(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        train_sae(a, cfg, tmp_path / "run", progress=False)
    restore()
    with pytest.raises(ValueError, match="another store|other store"):
        train_sae(b, cfg, tmp_path / "run", progress=False)
    settings = json.loads((tmp_path / "run" / "train_config.json").read_text())
    ident = settings["store_identity"]
    assert ident["hook"] == "synthetic.hook_x" and ident["model_sha256"] == "-" and len(ident["shards_sha256"]) == 64
    train_sae(a, cfg, tmp_path / "run", progress=False)  # the right store still resumes


def test_a_stale_checkpoint_old_does_not_break_later_checkpoints(tmp_path, monkeypatch):
    store = write_store(tmp_path / "store", _data(1024), rows_per_shard=512)
    run = tmp_path / "run"
    cfg = TrainConfig(arch="topk", d_sae=16, k=2, total_tokens=128 * 6, batch_size=128, checkpoint_every=2)
    restore = _kill_at_step(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        train_sae(store, cfg, run, progress=False)
    restore()
    (run / "checkpoint.old").mkdir()  # a kill while the previous swap was removing the old checkpoint
    (run / "checkpoint.old" / "sae_weights.safetensors").write_text("half deleted")
    _, rep = train_sae(store, cfg, run, progress=False)
    assert rep["resumed_from_step"] == 2
    assert (run / "checkpoint" / "cfg.json").is_file() and not (run / "checkpoint.old").exists()


def test_a_kill_between_the_two_renames_resumes_from_the_old_checkpoint(tmp_path, monkeypatch):
    store = write_store(tmp_path / "store", _data(1024), rows_per_shard=512)
    cfg = TrainConfig(arch="topk", d_sae=16, k=2, total_tokens=128 * 8, batch_size=128, checkpoint_every=2)
    full, _ = train_sae(store, cfg, tmp_path / "full", progress=False)
    run = tmp_path / "run"
    import sae.checkpoint as T

    real_replace, n = os.replace, {"swaps": 0}

    def dying_replace(src, dst):
        if str(src).endswith("checkpoint.tmp"):
            n["swaps"] += 1
            if n["swaps"] == 2:  # second checkpoint: the old one was moved aside, the new one not yet in
                raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(T.os, "replace", dying_replace)
    with pytest.raises(KeyboardInterrupt):
        train_sae(store, cfg, run, progress=False)
    monkeypatch.setattr(T.os, "replace", real_replace)
    assert not (run / "checkpoint").exists() and (run / "checkpoint.old").exists()
    resumed, rep = train_sae(store, cfg, run, progress=False)
    assert rep["resumed_from_step"] == 2
    assert torch.equal(resumed.W_dec, full.W_dec)


def test_a_batch_larger_than_the_store_is_a_clear_error_not_a_hang(tmp_path):
    store = write_store(tmp_path / "store", _data(300), rows_per_shard=100)
    cfg = TrainConfig(arch="topk", d_sae=16, k=2, total_tokens=4096, batch_size=1024)
    with deadline(60), pytest.raises(ValueError, match="batch"):
        train_sae(store, cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch PWNED_BY_TRAINER_STATE",))


def test_a_crafted_trainer_state_never_runs_code(tmp_path, monkeypatch):
    store = write_store(tmp_path / "store", _data(1024), rows_per_shard=512)
    cfg = TrainConfig(arch="topk", d_sae=16, k=2, total_tokens=128 * 6, batch_size=128, checkpoint_every=2)
    restore = _kill_at_step(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        train_sae(store, cfg, tmp_path / "run", progress=False)
    restore()
    ckpt = tmp_path / "run" / "checkpoint"
    for f in ckpt.glob("trainer_state*"):
        f.unlink()
    torch.save({"optimizer": _Payload()}, ckpt / "trainer_state.pt")  # what an attacker leaves in an --out
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(ValueError, match="trainer_state"):
        train_sae(store, cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "PWNED_BY_TRAINER_STATE").exists()


def test_checkpoints_hold_no_pickle(tmp_path):
    store = write_store(tmp_path / "store", _data(1024), rows_per_shard=512)
    cfg = TrainConfig(arch="c2r", d_sae=16, k=2, total_tokens=128 * 4, batch_size=128, checkpoint_every=2)
    train_sae(store, cfg, tmp_path / "run", progress=False)
    names = sorted(p.name for p in (tmp_path / "run" / "checkpoint").iterdir())
    assert not [n for n in names if n.endswith((".pt", ".pth", ".pkl", ".bin"))], names


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"k": 0}, "k must be"),
        ({"k": -3}, "k must be"),
        ({"k": 64}, "k must be"),  # more active latents than latents
        ({"lr": 0.0}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"outlier_norm_multiple": 0.0}, "outlier_norm_multiple"),
        ({"settings": {"c2r_lambda": "abc"}}, "c2r_lambda"),
        ({"settings": {"c2r_lambda": -1.0}}, "c2r_lambda"),
        ({"settings": {"no_such_field": 1}}, "no_such_field"),
    ],
)
def test_invalid_options_fail_in_the_config_and_write_nothing(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**{"arch": "c2r", "d_sae": 32, **kwargs})


def test_a_run_that_failed_before_its_first_checkpoint_does_not_block_the_corrected_command(tmp_path, monkeypatch):
    store = write_store(tmp_path / "store", _data(1024), rows_per_shard=512)
    restore = _kill_at_step(monkeypatch, 1)  # dies in the first step: nothing worth protecting on disk
    with pytest.raises(KeyboardInterrupt):
        train_sae(
            store,
            TrainConfig(arch="topk", d_sae=16, k=2, total_tokens=512, batch_size=128),
            tmp_path / "run",
            progress=False,
        )
    restore()
    train_sae(
        store,
        TrainConfig(arch="topk", d_sae=16, k=3, total_tokens=512, batch_size=128),
        tmp_path / "run",
        progress=False,
    )


def test_running_out_of_memory_is_advice_naming_the_options(tmp_path, monkeypatch):
    store = write_store(tmp_path / "store", _data(1024), rows_per_shard=512)
    import sae_lens.training.sae_trainer as st

    def no_memory(self, batch):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 10737418240 bytes. Error code 12 (Cannot allocate memory)"
        )

    monkeypatch.setattr(st.SAETrainer, "step", no_memory)
    from interp.infra.oom import OutOfMemoryAdvice

    with pytest.raises(OutOfMemoryAdvice, match=r"CPU memory asking for 10.00 GiB.*--batch-size \(now 128\)"):
        train_sae(
            store,
            TrainConfig(arch="topk", d_sae=16, k=2, total_tokens=512, batch_size=128),
            tmp_path / "run",
            progress=False,
        )
