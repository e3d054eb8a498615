import torch

from attribution.sdi import looped_featurizer, sdi_from_features, step_decomposed_influence, untied_step_gradients
from attribution.tracin import features, tracin
from tests.attribution.helpers import tiny_looped, trained_checkpoints


def _data(n, seed):
    return torch.randint(0, 32, (n, 16), generator=torch.Generator().manual_seed(seed))


def test_hook_step_gradients_equal_untied_copies_and_sum_to_full_gradient():
    model = tiny_looped()
    ids = _data(3, 0)
    hooked = looped_featurizer(model, None)(model, ids)
    untied = untied_step_gradients(model, ids)
    torch.testing.assert_close(hooked, untied, rtol=1e-4, atol=1e-7)
    from attribution.capture import per_example_lm_loss

    feat = looped_featurizer(model, None)
    params = [p for _, _, p in feat.param_tensors()]
    full = torch.autograd.grad(per_example_lm_loss(model, ids[:1], torch.ones_like(ids[:1])).sum(), params)
    torch.testing.assert_close(hooked[0].sum(0), torch.cat([g.flatten() for g in full]), rtol=1e-4, atol=1e-7)


def test_steps_sum_to_tracin_exact_and_sketched():
    model = tiny_looped()
    cks = trained_checkpoints(model)
    train, queries = _data(6, 1), _data(3, 2)
    for m in (None, 256):
        res = step_decomposed_influence(model, cks, train, queries, sketch_dim=m, step_matrix=True)
        scale = res.tracin.abs().max()
        assert (res.sdi.sum(-1) - res.tracin).abs().max() <= 1e-4 * scale
        assert (res.matrix.sum((-1, -2)) - res.tracin).abs().max() <= 1e-4 * scale
        tr = tracin(model, cks, looped_featurizer(model, m), train, queries)
        assert (tr - res.tracin).abs().max() <= 1e-4 * scale


def test_exact_sdi_from_hooks_equals_sdi_from_untied_copies():
    model = tiny_looped()
    cks = trained_checkpoints(model)
    train, queries = _data(4, 3), _data(2, 4)
    res = step_decomposed_influence(model, cks, train, queries, sketch_dim=None)
    ref = None
    for ck in cks:
        work = ck.load(model)
        part = sdi_from_features(untied_step_gradients(work, train), untied_step_gradients(work, queries), ck.lr)
        ref = part.sdi if ref is None else ref + part.sdi
    torch.testing.assert_close(res.sdi, ref, rtol=1e-4, atol=1e-6 * ref.abs().max().item())


def test_sketched_sdi_error_is_small_and_falls_with_sketch_size():
    model = tiny_looped()
    cks = trained_checkpoints(model)
    train, queries = _data(8, 5), _data(4, 6)
    exact = step_decomposed_influence(model, cks, train, queries, sketch_dim=None).sdi

    def err(m):
        errs = [
            (step_decomposed_influence(model, cks, train, queries, sketch_dim=m, seed=s).sdi - exact).norm()
            / exact.norm()
            for s in range(3)
        ]
        return torch.stack(errs).mean()

    small, large = err(64), err(4096)
    assert large < small / 3  # 64x the sketch: error ~ m^-1/2 -> 8x smaller
    assert large < 0.1


def test_features_are_batch_independent():
    model = tiny_looped()
    ids = _data(5, 7)
    feat = looped_featurizer(model, 128)
    torch.testing.assert_close(
        features(model, feat, ids, batch_size=5), features(model, feat, ids, batch_size=2), rtol=1e-4, atol=1e-6
    )


def test_the_experiments_slope_needs_two_sizes():
    """`python -m attribution.experiments.sdi --sizes 2048` (one size) reports its error and no slope."""
    from attribution.experiments.sdi import loglog_slope

    assert loglog_slope([2048], [0.05]) is None
    assert loglog_slope([512, 512], [0.1, 0.2]) is None
    assert abs(loglog_slope([256, 1024, 4096], [0.2, 0.1, 0.05]) + 0.5) < 1e-9
