import numpy as np
import pytest

from interp.contrib.security.fuse_fss import (
    FixedPoint,
    TableGate,
    baseline_eval,
    exp,
    fit_spec,
    fused_eval,
    plain_fixed_eval,
    share,
    silu,
    trunc_share,
)

U64 = np.uint64


def test_fixed_point_format_from_range_by_hand():
    assert FixedPoint.from_range(-8, 7.9) == FixedPoint(16, 12, 16)  # [-8, 8) needs 3 integer bits
    assert FixedPoint.from_range(-8, 8) == FixedPoint(16, 11, 16)  # 8 itself needs one more
    assert FixedPoint.from_range(0.1, 0.9, bits=8) == FixedPoint(8, 7, 16)
    fp = FixedPoint(8, 4, 4)
    assert fp.decode(fp.encode([1.25, -2.5, 100.0])).tolist() == [1.25, -2.5, 127 / 16]  # saturates


def test_shares_and_truncation_reconstruct():
    rng = np.random.default_rng(0)
    x = FixedPoint(16, 8, 8).encode(np.array([3.5, -1.25, 0.0]))
    a, b = share(x, rng)
    assert ((a + b) == x).all()
    z = (x.view(np.int64) * 256).view(U64)  # 2^8 times the value
    a, b = share(z, rng)
    got = (trunc_share(a, 0, 8) + trunc_share(b, 1, 8)).view(np.int64)
    assert np.abs(got - x.view(np.int64)).max() <= 1


def test_table_gate_keys_alone_do_not_depend_on_the_function():
    t1, t2 = np.arange(16, dtype=U64), np.zeros(16, dtype=U64)
    g1 = TableGate.deal(t1, r=5, rng=np.random.default_rng(3))
    g2 = TableGate.deal(t2, r=5, rng=np.random.default_rng(3))
    assert (g1.key0 == g2.key0).all()  # party 0's key is pure randomness
    # reconstruction: at x̂ = x + r the two key entries sum to g(x)
    with np.errstate(over="ignore"):
        assert all(int(g1.eval(0, (x + 5) % 16) + g1.eval(1, (x + 5) % 16)) == x for x in range(16))
    gb = TableGate.deal(t1, r=2, rng=np.random.default_rng(4), boolean=True)
    assert int(gb.eval(0, 9) ^ gb.eval(1, 9)) == 7


@pytest.mark.parametrize("fn,lo,hi", [(silu, -4.0, 4.0), (exp, -6.0, 0.0)])
def test_protocol_matches_plaintext_on_every_input_of_a_small_domain(fn, lo, hi):
    fp = FixedPoint.from_range(lo, hi, bits=8, arith_frac=12)
    spec = fit_spec(fn, lo, hi, pieces=4, degree=2, fp=fp)
    enc = np.arange(-128, 128, dtype=np.int64).view(U64)  # every 8-bit input
    rng = np.random.default_rng(1)
    x0, x1 = share(enc, rng)
    (y0, y1), (b0, b1), stats = fused_eval(spec, x0, x1, rng)
    (z0, z1), base = baseline_eval(spec, x0, x1, rng)
    plain = plain_fixed_eval(spec, enc).view(np.int64)
    xmax = 2 ** (fp.bits - 1 - fp.frac)
    bound = 1 + spec.degree * (1 + xmax) ** (spec.degree - 1)  # ±1 per truncation, carried by Horner
    assert np.abs((y0 + y1).view(np.int64) - plain).max() <= bound
    assert np.abs((z0 + z1).view(np.int64) - plain).max() <= bound
    # the packed comparison returns every predicate bit [x < t_k]
    bits = (b0 ^ b1).astype(np.int64)
    tb = spec.int_breakpoints()
    want = ((enc.view(np.int64)[:, None] < tb[None]) * (1 << np.arange(len(tb)))).sum(1)
    assert (bits == want).all()
    assert stats.fss_calls == 2 and base.fss_calls == len(tb) + 1 and stats.triples == 2


def test_fit_reaches_the_papers_accuracy_on_silu():
    fp = FixedPoint.from_range(-8, 8)
    spec = fit_spec(silu, -8, 8, pieces=32, degree=2, fp=fp)
    x = np.linspace(-8, 7.99, 2001)
    assert np.abs(fp.decode(plain_fixed_eval(spec, fp.encode(x))) - silu(x)).max() <= 1e-3


def test_bad_input():
    with pytest.raises(ValueError, match="bits"):
        FixedPoint(20, 4)
    with pytest.raises(ValueError, match="frac"):
        FixedPoint(8, 8)
    with pytest.raises(ValueError, match="lo < hi"):
        FixedPoint.from_range(1.0, 1.0)
    with pytest.raises(ValueError, match="more than"):
        FixedPoint.from_range(-1e6, 1e6)
    fp = FixedPoint(8, 4)
    with pytest.raises(ValueError, match="inside the format"):
        fit_spec(silu, -20, 1, 4, 2, fp)
    with pytest.raises(ValueError, match="pieces"):
        fit_spec(silu, -1, 1, 0, 2, fp)
    with pytest.raises(ValueError, match="spacing"):
        fit_spec(silu, -1, 1, 4, 2, fp, spacing="log")
