"""The one special-row rule (interp.cache.rows) and inference codes that do not depend on the batch."""

import pytest
import torch

from interp.cache.rows import DEFAULT_EXCLUDE, RowFilter, RowRule
from sae import make_sae
from sae.inference import ThresholdReLU, to_inference
from sae.train import TrainConfig, train_on_tensor, train_sae


def test_specs_parse_to_canonical_strings_and_bad_specs_name_the_fix():
    assert RowRule.parse("bos").spec == "positions:0"
    assert RowRule.parse("norm-outliers:10+positions:1,0").spec == "positions:0,1+norm-outliers:10"
    assert RowRule.parse("none").spec == "none"
    assert RowRule.parse(None).spec == DEFAULT_EXCLUDE
    r = RowRule.parse("positions:0+norm-outliers:10")
    assert RowRule.parse(r.spec) == r
    for bad in ["", "positions:", "positions:a", "norm-outliers:-1", "bogus", "none+bos"]:
        with pytest.raises(ValueError, match="row rule|norm-outliers|row positions"):
            RowRule.parse(bad)


def test_filter_is_per_row_and_uses_a_fixed_reference():
    x = torch.ones(6, 4)
    x[3] *= 100  # a massive row away from position 0
    pos = torch.tensor([0, 1, 2, 3, 0, 1])
    f = RowRule.parse("positions:0+norm-outliers:10").bind_tensor(x, pos)
    assert f.reference_norm == pytest.approx(2.0)
    assert f.keep_tensor(x, pos).tolist() == [False, True, True, False, False, True]
    # one row at a time gives the same answer: nothing depends on the batch
    assert [bool(f.keep_tensor(x[i : i + 1], pos[i : i + 1])) for i in range(6)] == f.keep_tensor(x, pos).tolist()
    assert RowFilter.from_config(f.config()) == f
    with pytest.raises(ValueError, match="positions"):
        f.keep_tensor(x, None)


def _seq_store(tmp_path):
    """A store of 8-token 'sequences' whose position-0 rows are 80x the others (like SmolLM2's sinks)."""
    from interp.store import ActivationStore, StoreMeta
    from interp.store.shards import write_shard_file

    g = torch.Generator().manual_seed(0)
    n, ctx = 2048, 8
    x = torch.relu(torch.randn(n, 24, generator=g)) @ torch.randn(24, 12, generator=g)
    pos = torch.arange(n) % ctx
    x[pos == 0] *= 80
    meta = StoreMeta(
        model="synthetic",
        model_sha256="-",
        hooks={"h": [12]},
        dtype="float32",
        tokenizer="-",
        ctx_len=ctx,
        data={"name": "t"},
    )
    st = ActivationStore.open_or_create(tmp_path / "store", meta, n_shards_planned=4)
    for i in range(4):
        sl = slice(i * 512, (i + 1) * 512)
        st.commit_shard(
            write_shard_file(
                st.path,
                i,
                {
                    "h": x[sl].contiguous(),
                    "tokens": torch.zeros(512, dtype=torch.int32),
                    "seq": torch.arange(n)[sl] // ctx,
                    "pos": pos[sl].to(torch.int32),
                },
            )
        )
    return st


def test_training_eval_and_dashboard_score_the_same_rows_the_same_way(tmp_path, monkeypatch):
    """The end-of-training report, `interp sae eval` and the dashboard's row mask agree (same rule, same codes)."""
    import json

    from typer.testing import CliRunner

    from sae.cli import app
    from sae.evaluate import sae_row_filter

    st = _seq_store(tmp_path)
    cfg = TrainConfig(arch="batchtopk", d_sae=32, k=3, total_tokens=256 * 12, batch_size=256, holdout_shards=1)
    _, rep = train_sae(st, cfg, tmp_path / "sae", progress=False)
    recorded = json.loads((tmp_path / "sae" / "train_config.json").read_text())["rows"]
    assert recorded["exclude"] == DEFAULT_EXCLUDE and recorded["reference_norm"] > 0
    res = CliRunner().invoke(app, ["eval", "--sae", str(tmp_path / "sae"), "--store", str(st.path)])
    assert res.exit_code == 0, res.output
    ev = json.loads(res.output)
    assert ev["row_rule"]["exclude"] == DEFAULT_EXCLUDE and ev["rows_excluded"] == 512 // 8
    assert ev["fvu"] == pytest.approx(rep["heldout_eval"]["fvu"], abs=1e-4)
    assert ev["l0"] == pytest.approx(rep["heldout_eval"]["l0"], abs=1e-4)
    # the dashboard masks exactly the rows eval left out
    rows = st.get_rows(st.shard_rows([3]), hooks="h")
    assert int((~sae_row_filter(tmp_path / "sae", st, "h").keep(rows)).sum()) == ev["rows_excluded"]
    # a bad rule is one clear error, exit 2
    bad = CliRunner().invoke(
        app, ["eval", "--sae", str(tmp_path / "sae"), "--store", str(st.path), "--exclude", "posn:0"]
    )
    assert bad.exit_code == 2 and "row rule" in bad.output


def test_threshold_codes_do_not_depend_on_the_chunk():
    g = torch.Generator().manual_seed(0)
    x = torch.relu(torch.randn(8192, 24, generator=g)) @ torch.randn(24, 12, generator=g)
    for arch in ("batchtopk", "c2r", "poly_batchtopk"):
        extra = {"rank2": 4, "rank3": 4} if arch.startswith("poly") else {}
        s = train_on_tensor(make_sae(arch, 12, 32, seed=0, k=3, **extra), x, steps=40, batch_size=512)
        inf = to_inference(s)
        with torch.no_grad():
            whole = inf.encode(x)
            singles = torch.cat([inf.encode(x[i : i + 1]) for i in range(0, 8192, 97)])
        assert torch.allclose(whole[::97], singles, atol=1e-5), arch


def test_threshold_equals_batch_topk_where_the_threshold_comes_from_the_same_batch():
    """With θ = the smallest activation batch top-k kept on this batch, JumpReLU(θ) keeps the same latents."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 12, generator=g)
    s = make_sae("batchtopk", 12, 48, seed=0, k=4).eval()
    with torch.no_grad():
        zb = s.encode(x)
        s.topk_threshold.fill_(float(zb[zb > 0].min()) - 1e-6)
        zt = to_inference(s).encode(x)
    assert torch.equal(zb > 0, zt > 0) and torch.allclose(zb, zt, atol=1e-6)


def test_threshold_matches_batch_topk_in_expectation_after_training():
    g = torch.Generator().manual_seed(2)
    x = torch.relu(torch.randn(16384, 32, generator=g)) @ torch.randn(32, 12, generator=g)
    s = train_on_tensor(make_sae("batchtopk", 12, 48, seed=0, k=4), x, steps=300, batch_size=1024, lr=3e-3)
    with torch.no_grad():
        l0_thr = float((to_inference(s).encode(x) > 0).sum(-1).float().mean())
    assert 3.0 < l0_thr < 5.0  # the mean L0 of the shipped codes is the trained k (4) up to the EMA's lag


def test_poly_batchtopk_inference_keeps_its_decoder_and_thresholds():
    s = make_sae("poly_batchtopk", 12, 32, seed=0, k=3, rank2=4, rank3=4)
    inf = to_inference(s)
    assert isinstance(inf.activation_fn, ThresholdReLU) and hasattr(inf, "linear_atoms")


def test_progress_is_a_bar_only_on_a_tty():
    import io

    from sae.progress import Progress

    buf = io.StringIO()  # not a TTY: one line per `every` steps, no carriage returns
    p = Progress(20, "train x", stream=buf, every=5)
    for i in range(20):
        p.set_postfix(loss=i)
        p.update(1)
    p.close()
    lines = buf.getvalue().splitlines()
    assert len(lines) == 4 and lines[-1].startswith("train x: step 20/20 (100%)") and "\r" not in buf.getvalue()
    quiet = io.StringIO()
    Progress(5, "q", stream=quiet, enabled=False).update(5)
    assert quiet.getvalue() == ""
