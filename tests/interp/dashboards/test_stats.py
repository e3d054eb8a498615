"""The streaming pass against brute force on tensors held in memory: counts, histograms, top-k, samples,
positions, co-activation; chunking does not change any result."""

import torch

from interp.dashboards.histogram import StreamingHistogram
from interp.dashboards.stats import FeatureStats, StatsConfig


def _acts(n=600, F=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = (
        torch.relu(torch.randn(n, F, generator=g)) * torch.linspace(0.5, 40, n)[:, None]
    )  # growing range: forces doublings
    z[:, 5] = 0  # a dead feature
    return z


def _run(z, chunk, cfg=None, F=None):
    n = len(z)
    seq, pos = torch.arange(n) // 20, torch.arange(n) % 20
    st = FeatureStats(
        z.shape[1] if F is None else F, cfg or StatsConfig(n_top=5, n_sample=8, before=2, after=1, n_pos=20)
    )
    for i in range(0, n, chunk):
        st.update(z[i : i + chunk], torch.arange(i, min(n, i + chunk)), seq[i : i + chunk], pos[i : i + chunk])
    return st


def test_histogram_counts_are_exact_after_doublings():
    g = torch.Generator().manual_seed(1)
    h = StreamingHistogram(2, bins=16)
    vals = [torch.rand(50, generator=g) * s for s in (0.1, 1.0, 7.0, 100.0)]
    for v in vals:
        h.add(torch.zeros(len(v), dtype=torch.long), v)
    allv = torch.cat(vals)
    edges, counts = h.feature(0)
    assert int(counts.sum()) == len(allv) and float(edges[-1]) >= float(allv.max()) > float(edges[-1]) / 2
    ref = torch.histogram(allv.double(), bins=edges.double()).hist
    assert torch.equal(counts, ref.long())
    assert int(h.feature(1)[1].sum()) == 0


def test_signed_histogram_keeps_negative_values():
    h = StreamingHistogram(1, bins=8, signed=True)
    h.add(torch.zeros(4, dtype=torch.long), torch.tensor([-1.0, -0.2, 0.3, 0.9]))
    h.add(torch.zeros(2, dtype=torch.long), torch.tensor([-3.5, 2.3]))
    edges, counts = h.feature(0)
    assert float(edges[0]) < -3.5 and int(counts.sum()) == 6
    assert torch.equal(
        counts,
        torch.histogram(torch.tensor([-1.0, -0.2, 0.3, 0.9, -3.5, 2.3]).double(), bins=edges.double()).hist.long(),
    )


def test_pass_matches_brute_force_and_chunking():
    z = _acts()
    a, b = _run(z, 600), _run(z, 37)
    fires = z > 0
    assert torch.equal(a.count, fires.sum(0)) and torch.equal(b.count, a.count)
    assert torch.allclose(b.max_value, z.max(0).values)
    assert torch.allclose(b.mean_active.float(), (z.sum(0) / fires.sum(0).clamp_min(1)).float(), rtol=1e-5)
    for st in (a, b):  # bin edges depend on the chunking (the range grows by doubling); counts are exact for each
        for f in range(5):
            edges, counts = st.hist.feature(f)
            col = z[:, f][z[:, f] > 0].double()
            assert torch.equal(counts, torch.histogram(col, bins=edges).hist.long())
    for f in range(5):
        top = z[:, f].topk(15).values
        assert torch.allclose(torch.tensor([v for v, _, _ in b.top.entries(f)]), top)
        assert len(b.sample.entries(f)) == 8 and all(z[r, f] == v for v, r, _ in b.sample.entries(f))
    assert b.top.entries(5) == [] and float(b.freq[5]) == 0
    pos = torch.arange(600) % 20
    assert torch.equal(b.pos_counts[0], torch.bincount(pos[fires[:, 0]], minlength=20))
    ff = fires.float()
    assert torch.equal(b.coact, ff.T @ ff) and torch.equal(a.coact, b.coact)


def test_windows_hold_the_feature_values_around_the_row():
    z = _acts()
    st = _run(z, 64)
    v, r, win = st.top.entries(2)[0]
    p = r % 20
    for k, o in enumerate(range(-2, 2)):
        if 0 <= p + o < 20:
            assert win[k] == float(z[r + o, 2])
        else:
            assert win[k] != win[k]  # NaN: no token there


def test_pair_coactivation_equals_dense_product():
    g = torch.Generator().manual_seed(0)
    F = 1100  # above the dense-product threshold: counts come from listing pairs
    z = torch.zeros(300, F)
    idx = torch.randint(0, F, (300, 4), generator=g)
    z.scatter_(1, idx, torch.rand(300, 4, generator=g) + 0.1)
    st = _run(z, 128, StatsConfig(n_top=2, n_sample=2, before=0, after=0, n_pos=20))
    ff = (z > 0).float()
    assert torch.equal(st.coact, ff.T @ ff)
    assert torch.allclose(st.coact_prod, z.T @ z, atol=1e-5)
    cos, pear = st.correlations(int(idx[0, 0]))
    f0 = int(idx[0, 0])
    ref = torch.nn.functional.cosine_similarity(z[:, f0 : f0 + 1], z, dim=0)
    assert torch.allclose(cos, ref, atol=1e-4)


def test_special_rows_are_left_out():
    z = _acts()
    n = len(z)
    keep = torch.arange(n) % 20 != 0
    st = FeatureStats(6, StatsConfig(n_top=3, n_sample=4, before=1, after=1, n_pos=20))
    st.update(z, torch.arange(n), torch.arange(n) // 20, torch.arange(n) % 20, keep)
    assert st.n_rows == int(keep.sum())
    assert torch.equal(st.count, (z[keep] > 0).sum(0))
    assert int(st.pos_counts[:, 0].sum()) == 0 and int(st.pos_rows[0]) == 0


def test_the_pass_counts_what_its_total_counts(caplog):
    """With a cap on ordinary rows the total counts those, and so does the end line (was 'done, 8064/4096')."""
    import logging
    from types import SimpleNamespace

    from interp.dashboards.build import collect

    def chunk(start):
        rows = torch.arange(start, start + 8)
        return SimpleNamespace(
            z=torch.rand(8, 3), rows=rows, seq=rows // 8, pos=rows % 8, keep=torch.arange(8) % 2 == 0
        )

    source = SimpleNamespace(n_rows=6, max_kept=6, chunks=lambda: iter([chunk(0), chunk(8)]))
    with caplog.at_level(logging.INFO, logger="interp"):
        collect(source, 3, progress=None)
    assert "dashboard pass: done, 6/6" in caplog.text, caplog.text
