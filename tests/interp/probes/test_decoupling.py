"""The decoupling experiment's models and a smoke run (the real run is a script, see interp/probes/README.md)."""

import json

import pytest
import torch

import interp
from interp.probes.experiments import decoupling
from interp.probes.experiments.norms import VARIANTS, build_model, small_config


def test_variants_share_weights_and_differ_in_forward():
    cfg = small_config(d_model=32, n_layers=2, n_heads=2, ctx=16)
    ids = torch.randint(0, 257, (2, 16))
    logits = {}
    for v in VARIANTS:
        m = build_model(v, cfg, seed=0)
        assert torch.equal(
            m.model.layers[0].self_attn.q_proj.weight,
            build_model("pre", cfg, 0).model.layers[0].self_attn.q_proj.weight,
        )
        hm = interp.HookedModel(m)
        out, cache = hm.run_with_cache(ids, names="blocks.*.hook_resid_post")
        assert torch.equal(out, m(ids).logits)
        logits[v] = out
    assert not torch.allclose(logits["pre"], logits["post"]) and not torch.allclose(logits["pre"], logits["sandwich"])
    # post-norm re-normalises the residual: the block output has RMS 1 (norm weights start at 1)
    post = interp.HookedModel(build_model("post", cfg, 0))
    _, c = post.run_with_cache(ids, names="blocks.1.hook_resid_post")
    assert c["resid_post", 1].pow(2).mean(-1).sqrt().sub(1).abs().max() < 1e-3
    with pytest.raises(ValueError, match="unknown normalisation"):
        build_model("layer", cfg)


def test_quick_run_and_refuses_other_settings(tmp_path):
    report = decoupling.main(["--out", str(tmp_path), "--quick", "--steps", "3", "--eval-seqs", "8"])
    assert set(report["variants"]) == set(VARIANTS)
    assert "| pre |" in report["table"]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["settings"]["steps"] == 3
    with pytest.raises(ValueError, match="other settings"):
        decoupling.main(["--out", str(tmp_path), "--quick", "--steps", "4", "--eval-seqs", "8"])


def test_rows_start_with_bos_and_bigram_backcopy_copies_after_triggers():
    from interp.probes.experiments.backcopy import BOS, bigram_backcopy

    rows = bigram_backcopy(200, ctx_len=32, vocab=16, n_triggers=3, seed=1)
    assert rows.shape == (200, 32) and (rows[:, 0] == BOS).all() and (rows[:, 1:] < 16).all()
    cur, prev, nxt = rows[:, 2:-1], rows[:, 1:-2], rows[:, 3:]
    trig = cur < 3
    assert trig.any() and torch.equal(nxt[trig], prev[trig])  # after a trigger: the token before it
    assert not torch.equal(nxt[~trig], prev[~trig])  # elsewhere: bigram steps, not copies
    assert torch.equal(rows, bigram_backcopy(200, ctx_len=32, vocab=16, n_triggers=3, seed=1))
    cfg = decoupling.TrainConfig(data="bigram-backcopy", ctx_len=16, max_tokens=16 * 40, eval_seqs=8)
    train, held = decoupling.corpus_split(cfg)
    assert train.shape == (32, 16) and held.shape == (8, 16)
    with pytest.raises(ValueError, match="ctx_len"):
        bigram_backcopy(4, ctx_len=2)
    # natural text: BOS replaces the first byte of every row when asked
    cfg = decoupling.TrainConfig(data="stdlib-docs", ctx_len=16, max_tokens=16 * 40, eval_seqs=8, bos=True)
    train, held = decoupling.corpus_split(cfg)
    assert (train[:, 0] == BOS).all() and (held[:, 0] == BOS).all()
    cfg = decoupling.TrainConfig(data="stdlib-docs", ctx_len=16, max_tokens=16 * 40, eval_seqs=8, bos=False)
    assert not (decoupling.corpus_split(cfg)[0][:, 0] == BOS).all()


def test_probe_curve_during_training(tmp_path):
    report = decoupling.main(
        [
            "--out",
            str(tmp_path),
            "--quick",
            "--steps",
            "4",
            "--eval-seqs",
            "8",
            "--variants",
            "pre",
            "--probe-every",
            "2",
            "--train-only",
        ]
    )
    curve = report["pre"]["curve"]
    assert [p["step"] for p in curve] == [2, 4] and all(p["ppl"] > 1 for p in curve)
    # the probes do not change training: same weights as a run without them
    plain = decoupling.main(
        [
            "--out",
            str(tmp_path / "plain"),
            "--quick",
            "--steps",
            "4",
            "--eval-seqs",
            "8",
            "--variants",
            "pre",
            "--train-only",
        ]
    )
    assert plain["pre"]["final_train_loss"] == report["pre"]["final_train_loss"]
