from types import SimpleNamespace

import pytest
import torch

from interp.probes import SinkScanner, alpha_per_key, attention_distance, head_sink_scores, sink_fraction, window_mask

# One head, 4 tokens: half of every later query's attention goes to the first token.
P = torch.tensor(
    [
        [1.0, 0.0, 0.0, 0.0],
        [0.5, 0.5, 0.0, 0.0],
        [0.5, 0.25, 0.25, 0.0],
        [0.5, 0.0, 0.25, 0.25],
    ]
)
UNIFORM = torch.ones(4, 4).tril() / torch.arange(1, 5.0)[:, None]


def patterns():
    return torch.stack([P, UNIFORM])[None]  # [batch 1, head 2, 4, 4]


def test_sink_scores_exact():
    a, counts = alpha_per_key(patterns())
    assert counts.tolist() == [[4, 3, 2, 1]]
    assert a[0, 0].tolist() == pytest.approx([(1 + 0.5 * 3) / 4, (0.5 + 0.25) / 3, (0.25 + 0.25) / 2, 0.25])
    uniform_first = (1 + 1 / 2 + 1 / 3 + 1 / 4) / 4
    assert head_sink_scores(patterns())[0].tolist() == pytest.approx([0.625, uniform_first])


def test_distances_exact():
    d = attention_distance(patterns())[0]
    # head 0: t=1: .5*1; t=2: .5*2 + .25*1; t=3: .5*3 + .25*1
    assert d[0].item() == pytest.approx((0.5 + 1.25 + 1.75) / 3)
    # uniform over 0..t: mean distance t/2
    assert d[1].item() == pytest.approx((0.5 + 1.0 + 1.5) / 3)
    d0 = attention_distance(patterns(), exclude_sink=True)[0]
    # without key 0: t=1: 0; t=2: (.25*1)/.5; t=3: (.25*1)/.5
    assert d0[0].item() == pytest.approx((0 + 0.5 + 0.5) / 3)
    # uniform over 1..t: mean distance (t-1)/2
    assert d0[1].item() == pytest.approx((0 + 0.5 + 1.0) / 3)


def test_padding_is_skipped():
    pat = torch.stack([patterns()[0], patterns()[0]])  # batch 2
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    a = head_sink_scores(pat, mask)
    assert a[1, 0].item() == pytest.approx((1 + 0.5 + 0.5) / 3)
    d = attention_distance(pat, mask)
    assert d[1, 0].item() == pytest.approx((0.5 + 1.25) / 2)


def test_sink_fraction_uses_strict_threshold():
    alpha = torch.tensor([[0.5, 0.1], [0.31, 0.3]])
    assert sink_fraction(alpha, 0.3) == 0.5
    with pytest.raises(ValueError, match="eps"):
        sink_fraction(alpha, -0.1)


def test_scanner_accumulates_and_finds_other_sinks():
    pat = torch.zeros(1, 1, 6, 6)
    for t in range(6):  # every query from 2 on puts 0.6 on key 2, the rest on itself
        if t < 2:
            pat[0, 0, t, t] = 1.0
        elif t == 2:
            pat[0, 0, t, 2] = 1.0
        else:
            pat[0, 0, t, 2], pat[0, 0, t, t] = 0.6, 0.4
    scanner = SinkScanner(n_layers=1, n_heads=1, eps=0.3, min_queries=2)
    ids = torch.tensor([[10, 11, 12, 13, 14, 15]])
    scanner.begin_batch(ids, None)
    scanner.hook(pat, SimpleNamespace(layer=0))
    rep = scanner.report()
    assert rep["alpha_first"] == [[pytest.approx(1 / 6)]]
    assert rep["sink_fraction"] == 0.0
    assert rep["other_sinks"]["positions"] == {"2": 1}
    assert rep["other_sinks"]["tokens"] == {"12": 1}


def test_window_mask():
    m = window_mask(6, window=2, n_sink=1)
    assert m.int().tolist() == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 0, 1, 1, 0, 0],
        [1, 0, 0, 1, 1, 0],
        [1, 0, 0, 0, 1, 1],
    ]
    with pytest.raises(ValueError, match="window"):
        window_mask(6, window=0, n_sink=0)
