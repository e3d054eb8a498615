"""Impossible numbers are refused by the config dataclasses before anything starts (issue 17 cause 12)."""

from __future__ import annotations

import pytest

from circuits.finders.prune import PruneConfig
from circuits.finders.safeseek import SafeSeekConfig
from circuits.finders.weight_sparse import WeightSparseConfig
from interp.cache.caching import CacheConfig
from interp.probes.report import ProbeConfig


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: CacheConfig(out="x", max_tokens=0), "max_tokens"),
        (lambda: CacheConfig(out="x", seed=-1), "seed"),
        (lambda: CacheConfig(out="x", num_workers=0), "num_workers"),
        (lambda: CacheConfig(out="x", batch_size=True), "batch_size"),
        (lambda: PruneConfig(steps=-5), "steps"),
        (lambda: PruneConfig(lr=float("nan")), "lr"),
        (lambda: PruneConfig(lambda_range=(0.1, 0.01)), "lambda_range"),
        (lambda: SafeSeekConfig(steps=-5), "steps"),
        (lambda: SafeSeekConfig(eval_every=0), "eval_every"),
        (lambda: WeightSparseConfig(lr=0.0), "lr"),
        (lambda: WeightSparseConfig(batch_size=0), "batch_size"),
        (lambda: ProbeConfig(n_stream=0), "n_stream"),
    ],
)
def test_out_of_range_numbers_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_a_context_longer_than_the_model_is_refused_before_any_work(tmp_path):
    import interp
    from interp.cache.caching import cache_activations
    from interp.data import byte_tokenizer
    from interp.probes.report import run_probes
    from tests.tiny import tiny_hf

    model = interp.HookedModel(tiny_hf("gpt_neox"), byte_tokenizer(), {"weights_sha256": "-"})
    with pytest.raises(ValueError, match="ctx-len 100000 exceeds the model's context of 128"):
        cache_activations(CacheConfig(out=str(tmp_path / "s"), ctx_len=100_000, data="synthetic:repeat"), model=model)
    assert not (tmp_path / "s").exists()
    with pytest.raises(ValueError, match="ctx_len 100000 exceeds"):
        run_probes(model, ProbeConfig(ctx_len=100_000), progress=False, log=lambda *a: None)


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--k", "0"], "k must be"),
        (["--set", "c2r_lambda=abc"], "c2r_lambda"),
        (["--set", "c2r_lambda=-1"], "c2r_lambda"),
    ],
)
def test_sae_train_refuses_bad_options_in_one_line_and_writes_nothing(tmp_path, extra, match):
    import torch
    from typer.testing import CliRunner

    from interp.cli.main import app
    from sae.synthetic import write_store

    write_store(tmp_path / "store", torch.randn(512, 8), rows_per_shard=256)
    r = CliRunner().invoke(
        app,
        [
            "sae",
            "train",
            "--store",
            str(tmp_path / "store"),
            "--arch",
            "c2r",
            "--out",
            str(tmp_path / "run"),
            "--d-sae",
            "16",
            "--k",
            "2",
            *extra,
        ],
    )
    assert r.exit_code == 2 and match in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "run").exists()
