"""Metrics on cases with known answers."""

import torch

import interp
from sae import make_sae
from sae import metrics as M
from tests.tiny import tiny_hf


class _Identity(torch.nn.Module):
    def forward(self, x):
        return x


def test_spliced_loss_identity_recovers_everything_and_zero_ablation_nothing():
    model = interp.HookedModel(tiny_hf("llama"), interp.data.byte_tokenizer())
    ids = torch.randint(0, 257, (3, 12), generator=torch.Generator().manual_seed(0))
    r = M.spliced_loss(model, _Identity(), "blocks.0.hook_resid_post", ids)
    assert abs(r["ce_sae"] - r["ce_clean"]) < 1e-5 and r["kl"] < 1e-6 and r["ce_zero"] != r["ce_clean"]
    assert abs(r["ce_recovered"] - 1) < 1e-4


def test_reconstruction_and_probe_and_w1():
    sae = make_sae("topk", 8, 16, seed=0, k=16, rescale_acts_by_decoder_norm=False)
    with torch.no_grad():  # an exact autoencoder for non-negative inputs in the first 8 latents
        sae.W_enc.zero_()
        sae.W_enc[:, :8] = torch.eye(8)
        sae.W_dec.zero_()
        sae.W_dec[:8] = torch.eye(8)
    x = torch.rand(100, 8)
    r = M.reconstruction(sae, [x[:50], x[50:]])
    assert r["fvu"] < 1e-10 and r["l0"] == 8 and r["dead_frac"] == 0.5
    y = torch.arange(400) % 4 == 0
    z = torch.rand(400, 10) * 0.1
    z[:, 3] += 2 * y
    assert M.sparse_probe_f1(z[:300], y[:300], z[300:], y[300:], k=1) == {"f1": 1.0, "accuracy": 1.0, "latents": [3]}
    w1 = M.mean_w1(z, y)
    assert abs(w1 - 2 / 10) < 0.02  # only latent 3 differs, by a shift of 2


def test_ground_truth_absorption_on_a_hand_made_sae():
    from sae.synthetic import hierarchical_split

    syn = hierarchical_split(n=4000, seed=0)
    sae = make_sae("relu", 64, syn.directions.shape[0], seed=0, l1_coefficient=0.0)
    with torch.no_grad():
        sae.W_dec.copy_(syn.directions)
        sae.b_dec.zero_()
        sae.b_enc.zero_()
    z = syn.active.clone()
    parents, children = syn.info["parents"], syn.info["children"]
    z[:, parents[0]] *= ~(syn.active[:, children[0]] > 0).any(1)  # parent 0 is silent whenever a child fires
    r = M.gt_absorption(sae, syn, z)
    assert abs(r["absorption"] - 1 / len(parents)) < 1e-6 and r["unmatched_parents"] == 0
    assert M.split_count(sae, syn, syn.active) == 1.0 and M.mmcs(sae, syn.directions) > 0.999


def test_held_out_synthetic_set_shares_the_features_not_the_samples():
    from sae.synthetic import hierarchical_split

    train = hierarchical_split(n=2000, seed=0)
    test = hierarchical_split(n=2000, seed=7, dict_seed=0)
    assert torch.equal(train.directions, test.directions) and not torch.equal(train.x, test.x)
    # the features explain the held-out set as well as the training set (a wrong dictionary would not)
    coef = torch.linalg.lstsq(train.directions.T, test.x.T).solution
    resid = (test.x.T - train.directions.T @ coef).square().sum() / test.x.square().sum()
    assert resid < 0.05
    assert not torch.equal(hierarchical_split(n=10, seed=7).directions, train.directions)


def test_w1_in_input_units_is_invariant_to_decoder_scaling():
    """Scaling a decoder atom by c and its code by 1/c leaves the reconstruction and W1 unchanged."""
    from sae import make_sae

    torch.manual_seed(0)
    s = make_sae("relu", 8, 16, seed=0)
    x = torch.randn(400, 8)
    y = x[:, 0] > 0
    with torch.no_grad():
        z = s.encode(x)
        before = M.w1_common(s, z, y)
        c = torch.linspace(0.1, 20, 16)
        s.W_dec.mul_(c[:, None])
        z2 = z / c
        after = M.w1_common(s, z2, y)
    assert abs(before - after) < 1e-5 * max(1.0, before)
    raw_before, raw_after = M.mean_w1(z, y), M.mean_w1(z2, y)
    assert abs(raw_after - raw_before) > 0.1 * raw_before  # raw codes are not invariant


def _saebench_word(x, z, W, p, main, full_cos=0.025, frac_cos=0.1, prop=0.4, n_abs=3):
    """SAEBench's per-word branches (feature_absorption_calculator.calculate_absorption), one word at a time."""
    cos = [float(W[i] @ p) for i in range(W.shape[0])]
    proj = [float(z[i]) * cos[i] for i in range(len(cos))]
    act = float(x @ p)
    main_proj = sum(proj[i] for i in main)
    cands = sorted(proj[i] for i in range(len(cos)) if i not in main and cos[i] >= frac_cos and proj[i] > 0)
    total = sum(cands[::-1][:n_abs])
    if main_proj >= act or total / act < prop:
        frac = 0.0
    elif main_proj <= 0:
        frac = 1.0
    else:
        absorbed = min(total, act - main_proj)
        frac = min(max(absorbed / (absorbed + main_proj), 0.0), 1.0)
    top = max(range(len(proj)), key=lambda i: proj[i])
    full = all(float(z[i]) < 1e-8 for i in main) and cos[top] >= full_cos and act >= 0 and proj[top] / act >= prop
    return frac, full


def test_saebench_absorption_equals_saebench_s_rules_word_by_word():
    g = torch.Generator().manual_seed(0)
    d, m, n = 16, 40, 300
    W = torch.nn.functional.normalize(torch.randn(m, d, generator=g), dim=1)
    p = torch.nn.functional.normalize(W[0] + 0.5 * W[1] + 0.3 * torch.randn(d, generator=g), dim=0)
    z = torch.relu(torch.randn(n, m, generator=g)) * (torch.rand(n, m, generator=g) < 0.15)
    z[: n // 3, 0] = 0.0  # the main latent silent on a third of the words
    x = z @ W + 0.05 * torch.randn(n, d, generator=g)
    got = M.saebench_absorption(x, z, W, p, [0])
    ref = [_saebench_word(x[i], z[i], W, p, [0]) for i in range(n)]
    assert abs(got["absorption_fraction"] - sum(f for f, _ in ref) / n) < 1e-6
    assert got["n_saebench_full_absorption"] == sum(f for _, f in ref)
    assert 0 < got["absorption_fraction"] < 1 and 0 < got["full_absorption_rate"] < 1  # both branches exercised
