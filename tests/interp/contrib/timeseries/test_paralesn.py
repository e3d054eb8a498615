import pytest
import torch

from interp.contrib.timeseries.paralesn import (
    ClassicESN,
    ParalESN,
    ParalESNConfig,
    apply_readout,
    chunked_scan_linear,
    mackey_glass,
    memory_capacity,
    ridge_readout,
    scan_linear,
    sequential_linear,
)


def _rand_complex(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.complex(
        torch.randn(shape, generator=g, dtype=torch.float64), torch.randn(shape, generator=g, dtype=torch.float64)
    )


def test_hand_computed_recurrence():
    # h_t = 0.5 h_{t-1} + u_t with u = (1, 1, 1): h = (1, 1.5, 1.75)
    a, u = torch.tensor([0.5], dtype=torch.float64), torch.ones(3, 1, dtype=torch.float64)
    for f in (sequential_linear, scan_linear, chunked_scan_linear):
        assert f(a, u)[:, 0].tolist() == pytest.approx([1.0, 1.5, 1.75], abs=1e-15)


@pytest.mark.parametrize("T", [1, 2, 7, 64, 257])
@pytest.mark.parametrize("chunk", [None, 1, 5])
def test_scans_match_the_sequential_recurrence(T, chunk):
    n = 9
    g = torch.Generator().manual_seed(T)
    a = torch.polar(
        0.3 + 0.69 * torch.rand(n, generator=g, dtype=torch.float64),
        6.28 * torch.rand(n, generator=g, dtype=torch.float64),
    )
    u, h0 = _rand_complex((T, n), T), _rand_complex((n,), T + 1)
    ref = sequential_linear(a, u, h0)
    assert torch.allclose(scan_linear(a, u, h0), ref, atol=1e-12)
    assert torch.allclose(chunked_scan_linear(a, u, h0, chunk=chunk), ref, atol=1e-12)


def test_reservoir_eigenvalues_in_the_annulus_and_features_agree_across_paths():
    cfg = ParalESNConfig(n_units=40, n_layers=3, rho_min=0.4, rho_max=0.9, seed=3)
    esn = ParalESN(cfg, d_in=2)
    for lam in esn.lams:
        assert lam.abs().min() >= 0.4 - 1e-12 and lam.abs().max() <= 0.9 + 1e-12
    x = torch.randn(150, 2, dtype=torch.float64)
    H = esn.features(x)
    assert H.shape == (150, 2 * 40 * 3)
    for mode in (False, "doubling", "chunked"):
        assert torch.allclose(esn.features(x, parallel=mode), H, atol=1e-10)


def test_echo_state_property_forgets_the_initial_state():
    a = torch.full((4,), 0.5 + 0.0j, dtype=torch.complex128)
    u = _rand_complex((60, 4), 0)
    diff = scan_linear(a, u, torch.full((4,), 10.0 + 0j, dtype=torch.complex128)) - scan_linear(a, u)
    assert torch.allclose(diff[-1].abs(), torch.full((4,), 10 * 0.5**60, dtype=torch.float64), rtol=1e-6)


def test_ridge_readout_recovers_a_linear_map_and_memory_capacity_is_bounded():
    H = torch.randn(200, 3, dtype=torch.float64)
    Y = H @ torch.tensor([[1.0], [-2.0], [0.5]], dtype=torch.float64) + 3.0
    W = ridge_readout(H, Y, 0.0)
    assert torch.allclose(W[:, 0], torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64), atol=1e-10)
    assert torch.allclose(apply_readout(H, W), Y, atol=1e-10)
    esn = ParalESN(ParalESNConfig(n_units=20, rho_max=0.9), 1)
    mc = memory_capacity(esn.features, T=800, max_delay=30, washout=50)
    # a linear reservoir of N complex units has at most 2N real features: MC <= min(2N, delays)
    assert 1.0 < mc <= 30.0


def test_mackey_glass_is_bounded_and_chaotic_range():
    s = mackey_glass(500)
    assert s.shape == (500,) and 0.2 < float(s.min()) and float(s.max()) < 1.5 and float(s.std()) > 0.1


def test_classic_esn_shapes_and_spectral_radius():
    esn = ClassicESN(30, 1, rho=0.8)
    assert torch.linalg.eigvals(esn.W).abs().max().item() == pytest.approx(0.8)
    assert esn.features(torch.randn(20)).shape == (20, 30)


@pytest.mark.parametrize("kw", [dict(n_units=0), dict(rho_max=1.0), dict(rho_min=0.9, rho_max=0.5), dict(leak=0.0)])
def test_bad_config(kw):
    with pytest.raises(ValueError):
        ParalESNConfig(**kw)


def test_bad_inputs():
    a = torch.ones(3, dtype=torch.complex128)
    with pytest.raises(ValueError, match="T >= 1"):
        scan_linear(a, torch.zeros(0, 3, dtype=torch.complex128))
    with pytest.raises(ValueError, match="diagonal"):
        chunked_scan_linear(torch.ones(2, dtype=torch.complex128), torch.zeros(4, 3, dtype=torch.complex128))
    esn = ParalESN(ParalESNConfig(n_units=5), d_in=2)
    with pytest.raises(ValueError, match=r"\[T, 2\]"):
        esn.features(torch.randn(10, 3))
    with pytest.raises(ValueError, match="parallel"):
        esn.features(torch.randn(10, 2), parallel="gpu")
    with pytest.raises(ValueError, match="same T"):
        ridge_readout(torch.randn(5, 2), torch.randn(4, 1))


def test_tuning_picks_the_validation_best_setting_and_the_quick_baseline_runs():
    # a huge ridge α flattens the readout (validation NRMSE near 1): the search must choose the small one, and
    # of two reservoirs the one whose own validation error is lower
    from interp.contrib.timeseries.experiments.paralesn import TUNED, TUNED_PARAL, esn_factory, main, tune

    s = mackey_glass(900, seed=0)
    s = s - s.mean()
    best = tune(esn_factory(30, 0), {"rho": (0.9,), "input_scaling": (0.5,), "leak": (1.0,)}, s, 500, 10, (1e-7, 1e6))
    assert best["alpha"] == 1e-7 and best["val_nrmse"] < 0.5
    grid = {"rho": (0.9,), "input_scaling": (0.5,), "leak": (0.1, 1.0)}
    own = [tune(esn_factory(30, 0), {**grid, "leak": (lk,)}, s, 500, 10)["val_nrmse"] for lk in grid["leak"]]
    assert tune(esn_factory(30, 0), grid, s, 500, 10)["val_nrmse"] == pytest.approx(min(own))
    out = main(["--tuned-esn", "--quick"])
    run = out["forecast"][0]
    assert set(run["settings"]) == {TUNED, TUNED_PARAL} and 0 < run[TUNED]["84"] < 1
