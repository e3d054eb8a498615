"""Each variant against its baseline on a small synthetic generator with fixed seeds: does it move the
quantity its paper claims? Small versions of `python -m sae.experiments.synthetic` (full results and
the claims that do not reproduce at this scale are in sae/README.md)."""

import pytest
import torch

from sae import make_sae
from sae import metrics as M
from sae.synthetic import compositional_pairs, double_circle, hierarchical_split
from sae.train import train_on_tensor


@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # these small matmuls run fastest on one thread of a busy machine
    yield
    torch.set_num_threads(n)


def _nn_cos2(sae, z):
    """Mean squared positive nearest-neighbour decoder cosine among live latents: what C²R penalises."""
    live = (z > 0).any(0)
    W = M.decoder_directions(sae)[live]
    c = W @ W.T
    c.fill_diagonal_(-2)
    return float(c.max(1).values.clamp_min(0).square().mean())


def test_c2r_pushes_live_decoder_directions_apart_on_the_hierarchy_toy():
    syn = hierarchical_split(n=20_000, seed=0)
    out = {}
    for arch, kw in [("batchtopk", {}), ("c2r", {"c2r_lambda": 1.0, "c2r_interval": 1})]:
        sae = make_sae(arch, 64, 256, seed=0, k=4, **kw)
        train_on_tensor(sae, syn.x, steps=150, batch_size=1024, lr=1e-3, seed=0)
        z = M.encode(sae, syn.x)
        out[arch] = {
            "nn_cos2": _nn_cos2(sae, z),
            "dup": M.duplicate_pairs(sae, z),
            "fvu": M.reconstruction(sae, [syn.x])["fvu"],
        }
    assert out["c2r"]["nn_cos2"] < out["batchtopk"]["nn_cos2"], out
    assert out["c2r"]["dup"] <= out["batchtopk"]["dup"], out
    # Not asserted: fidelity. At this length C²R with lambda 1 on every step costs FVU (measured 0.19 -> 0.27);
    # the full sweep in sae/README.md reports the FVU cost per lambda.


def test_polysae_interactions_single_out_compositional_pairs_better_than_covariance():
    syn = compositional_pairs(n=20_000, seed=0)
    res = {}
    for name, arch, kw in [
        ("topk", "topk", {"rescale_acts_by_decoder_norm": False}),
        ("poly", "poly", {"rank1": 64, "rank2": 8, "rank3": 8}),
    ]:
        sae = make_sae(arch, 64, 128, seed=0, k=4, **kw)
        train_on_tensor(sae, syn.x, steps=300, batch_size=1024, lr=1e-3, seed=0)
        res[name] = M.interaction_specificity(sae, syn)
    assert res["poly"]["statistic"] == "interaction" and res["topk"]["statistic"] == "covariance"
    assert res["poly"]["auroc_P"] > res["topk"]["auroc_P"], res


def test_coherence_lowers_locality_against_a_plain_relu_autoencoder():
    data = double_circle(n=4000, seed=0)
    loc = {}
    for name, arch, kw in [
        ("vanilla", "relu", {"l1_coefficient": 0.0}),
        ("coh", "coh", {"l1_coefficient": 0.0, "coh_lambda": 1.0}),
    ]:
        sae = make_sae(arch, 128, 32, seed=0, **kw)
        train_on_tensor(sae, data.x, steps=200, batch_size=256, lr=1e-3, seed=0)
        loc[name] = M.coherence_metrics(M.encode(sae, data.x))["locality"]
    assert loc["coh"] < loc["vanilla"], loc
