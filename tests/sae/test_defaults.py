"""The defaults give a usable SAE in a short run, ship codes as good as the batch codes, and every run
folder loads in plain sae-lens as the model `sae.load_sae` gives.

Why these thresholds (issue 24). The generator (`hierarchical_split`, d 64) plants 88 directions (56
features, 8 of them split four ways); the SAE has 64 latents, fewer than the directions, so every latent
has something to learn and a dead one is a training failure, not a spare. Measured with the defaults at
300 steps of 1,024 rows: dead 0% (BatchTopK) and 2% (Matryoshka), shipped/batch FVU 0.997 / 1.000, L0
3.04 / 3.03 for k 3 (thresholds calibrated on training rows, scored on the held-out ones). The bound of
20% dead is the issue's; it fails with what the defaults replaced: with d_sae 128 the official AuxK and
its 10M-token window leave 53% dead (defaults: 20%), and sae-lens's running-average threshold
(`calibrate=False`) ships L0 2.91 after 300 steps and 5x k on SmolLM2 after 100. The FVU bound of 5% is
the issue's; the L0 bound of 10% is the issue's too.
"""

import json
import os
import subprocess
import sys

import pytest
import torch

from sae import load_sae, make_sae
from sae.baselines import ARCHS, BASELINE_OF, base_of, paper_settings, training_class
from sae.synthetic import hierarchical_split, write_store
from sae.train import TrainConfig, train_sae


@pytest.fixture(scope="module")
def synthetic_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("syn")
    train = hierarchical_split(n=65_536, seed=0)
    test = hierarchical_split(n=16_384, seed=1000, dict_seed=0)
    return write_store(d / "store", torch.cat([train.x, test.x]), rows_per_shard=16_384)


@pytest.mark.parametrize("arch", ["batchtopk", "matryoshka"])
def test_defaults_train_a_live_sae_whose_shipped_codes_match_the_batch_codes(arch, synthetic_store, tmp_path):
    cfg = TrainConfig(
        arch=arch, d_sae=64, k=3, total_tokens=300 * 1024, batch_size=1024, holdout_shards=1, exclude="none"
    )
    _, rep = train_sae(synthetic_store, cfg, tmp_path / arch, progress=False)
    shipped, batch = rep["heldout_eval"], rep["batch_codes_eval"]
    assert shipped["split"] == "heldout" and shipped["rows"] == 16_384
    assert shipped["dead_frac"] < 0.20, rep
    assert abs(shipped["fvu"] / batch["fvu"] - 1) < 0.05, rep
    assert abs(shipped["l0"] / 3 - 1) < 0.10, rep
    assert shipped["fvu"] < 0.5, rep  # it learned something (0.23-0.25 measured; the mean predictor is 1)
    assert rep["calibration"]["split"] == "train"  # never the scored rows
    assert json.loads((tmp_path / arch / "train_report.json").read_text())["shipped_vs_batch"]["fvu_ratio"] < 1.05


def test_median_init_keeps_latents_alive_when_rows_share_a_large_component(tmp_path):
    """Residual streams have a large shared component (SmolLM2 layer 15: mean row norm 0.79x the median row
    norm). The same generator shifted by an offset of twice the median row norm: from b_dec = 0 (sae-lens's
    init) the offset decides every top-k and 45% of latents die in 300 steps (FVU 0.84); from the geometric
    median (the default) 0% (FVU 0.24), measured."""
    train = hierarchical_split(n=32_768, seed=0)
    test = hierarchical_split(n=16_384, seed=1000, dict_seed=0)
    x = torch.cat([train.x, test.x])
    off = torch.randn(x.shape[1], generator=torch.Generator().manual_seed(5))
    store = write_store(tmp_path / "store", x + off / off.norm() * 2 * x.norm(dim=-1).median(), rows_per_shard=16_384)
    got = {}
    for init in ("zeros", "median"):
        cfg = TrainConfig(
            arch="batchtopk",
            d_sae=64,
            k=3,
            total_tokens=300 * 1024,
            batch_size=1024,
            holdout_shards=1,
            exclude="none",
            init_b_dec=init,
        )
        got[init] = train_sae(store, cfg, tmp_path / init, progress=False)[1]["heldout_eval"]
    assert got["median"]["dead_frac"] < 0.20 and got["median"]["fvu"] < 0.5, got
    assert got["zeros"]["dead_frac"] > got["median"]["dead_frac"] + 0.2, got


def test_a_variant_and_its_baseline_share_every_setting_but_their_own():
    """c2r_relu / coh / poly_relu train with relu's L1; C²R has no batch normalisation by default, the
    BatchTopK family sae-lens's AuxK; the papers' settings are one dict away."""
    for arch, base in BASELINE_OF.items():
        kw = {"rank2": 4, "rank3": 4} if arch.startswith("poly") else {}
        v, b = make_sae(arch, 16, 32, **kw).cfg, make_sae(base, 16, 32).cfg
        shared = set(vars(b)) & set(vars(v)) - {"metadata", "k"}
        differ = {f for f in shared if getattr(v, f) != getattr(b, f)}
        if arch.startswith("poly"):
            differ -= {"rescale_acts_by_decoder_norm"}  # PolySAE's decoder is not rescaled (its paper's choice)
        assert not differ, (arch, base, {f: (getattr(v, f), getattr(b, f)) for f in differ})
    assert make_sae("coh", 16, 32).cfg.l1_coefficient == make_sae("relu", 16, 32).cfg.l1_coefficient == 5.0
    assert make_sae("c2r", 16, 32, k=2).cfg.c2r_ref_batch is None
    bt = make_sae("batchtopk", 16, 32, k=2).cfg
    assert (bt.auxk_style, bt.aux_loss_coefficient) == ("sae_lens", 1.0)
    official = make_sae("c2r", 16, 32, k=2, **paper_settings("c2r")).cfg
    assert (official.auxk_style, official.aux_loss_coefficient, official.c2r_ref_batch) == ("official", 1 / 32, 2048)
    assert base_of("c2r_matryoshka") == "matryoshka" and set(BASELINE_OF) < set(ARCHS)
    assert training_class("coh")[1]  # every name resolves


def test_dead_window_and_warmup_scale_with_the_run():
    cfg = TrainConfig(arch="topk", d_sae=64, k=4, total_tokens=1024 * 100, batch_size=1024)
    assert cfg.dead_window(100) == 5 and cfg.dead_window(4000) == 200 and cfg.dead_window(10**6) == 1000
    assert cfg.warmup(100) == 5 and cfg.warmup(10**6) == 1000
    assert TrainConfig(arch="topk", d_sae=64, dead_window_tokens=10_000_000, batch_size=1000).dead_window(100) == 10_000
    assert cfg.lr == pytest.approx(1e-3) and TrainConfig(arch="topk", d_sae=16384).lr == pytest.approx(2e-4)


PLAIN = """
import sys, torch
from sae_lens import SAE
x = torch.load(sys.argv[1])
got = {}
for run in sys.argv[3:]:
    s = SAE.load_from_disk(run)
    got[run] = {"arch": s.cfg.architecture(), "out": s(x).detach(), "codes": s.encode(x).detach()}
assert "sae" not in sys.modules, "plain sae-lens must not need our package"
torch.save(got, sys.argv[2])
"""
PLAIN_ARCHS = {
    "batchtopk": "jumprelu",
    "matryoshka": "jumprelu",
    "c2r": "jumprelu",
    "topk": "topk",
    "relu": "standard",
    "coh_topk": "topk",
}


@pytest.fixture(scope="module")
def plain_loads(tmp_path_factory):
    """A short run folder of every architecture, then one plain sae-lens process that loads them all."""
    root = tmp_path_factory.mktemp("plain")
    g = torch.Generator().manual_seed(0)
    x = torch.relu(torch.randn(4096, 32, generator=g)) @ torch.randn(32, 16, generator=g)
    store = write_store(root / "store", x, rows_per_shard=1024)
    trained = {}
    for arch in PLAIN_ARCHS:
        kw = {} if arch == "relu" else {"k": 4}
        cfg = TrainConfig(arch=arch, d_sae=32, total_tokens=256 * 8, batch_size=256, exclude="none", **kw)
        trained[arch], _ = train_sae(store, cfg, root / arch, progress=False)
    xt = x[:64]
    torch.save(xt, root / "x.pt")
    runs = [str(root / arch) for arch in PLAIN_ARCHS]
    # -I: isolated mode, so neither PYTHONPATH nor the working folder can put our package on the path
    subprocess.run(
        [sys.executable, "-I", "-c", PLAIN, str(root / "x.pt"), str(root / "o.pt"), *runs],
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        cwd=root,
    )
    got = torch.load(root / "o.pt")
    return root, xt, trained, {arch: got[str(root / arch)] for arch in PLAIN_ARCHS}


@pytest.mark.parametrize("arch", list(PLAIN_ARCHS))
def test_run_folders_load_in_plain_sae_lens_as_the_same_model(arch, plain_loads):
    root, xt, trained, got = plain_loads
    ours = load_sae(root / arch)
    assert got[arch]["arch"] == PLAIN_ARCHS[arch]
    with torch.no_grad():
        assert torch.allclose(got[arch]["out"], ours(xt), atol=1e-5)
        assert torch.equal(got[arch]["codes"] > 0, ours.encode(xt) > 0)
    back = load_sae(root / arch, inference=False)  # the training form sits in training_sae/
    assert type(back) is type(trained[arch]) and torch.allclose(back.W_dec, trained[arch].W_dec)
