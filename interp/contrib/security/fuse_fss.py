"""FuseFSS: fused function-secret-sharing (FSS) nonlinearities for two-server secure inference.

Paper/code: ponyyuhan/FuseFSS (C++/CUDA on EzPC GPU-MPC). Each fixed-point nonlinearity is a *spec*:
an interval partition with breakpoints t_1 < ... < t_{K-1}, a low-degree polynomial per interval and
the predicate bits the operator needs. Instead of one bespoke protocol (and K-1 comparisons) per
operator, the compiler emits exactly two batched FSS evaluations on the public masked input
x̂ = x + r: one packed comparison returning all predicate bits, and one interval lookup returning the
active piece's coefficients; the polynomial is then evaluated on additive shares.

What is here, exactly, in Python (the CUDA compiler, its key formats and its speed are out of scope):

- Two parties hold additive shares over Z_{2^64} (numpy uint64, wrap-around arithmetic); values are
  fixed point (the input with `frac` fractional bits, coefficients and outputs with
  `arith_frac`); the nonlinearity's input lives in an n-bit two's-complement
  domain (n <= 16), `FixedPoint.from_range` picks the integer/fraction split from a value range.
- FSS gates are *table-based* (`TableGate`): for a function g on Z_{2^n} and the dealer's mask r, the
  dealer gives party 0 a uniformly random table and party 1 the difference to g((x̂ - r) mod 2^n); each
  key alone is uniform, whatever g is (information-theoretic security), and evaluation is one table
  read. This is the exact, small-domain instance of FSS; the paper uses PRG-based DCF keys of size
  O(n·λ) instead of 2^n words, which is what makes large domains practical.
- `fused_eval`: 1 packed comparison (every predicate bit [x < t_k], XOR-shared in one word) + 1 interval
  lookup (the active coefficients and x - centre lifted to Z_{2^64}, arithmetic shares) + Horner on shares with
  dealer Beaver triples and SecureML local truncation. `baseline_eval`: one comparison gate per
  breakpoint (K-1 FSS calls, arithmetic bit shares), the active coefficients selected locally from
  the public coefficients, plus one lift gate: K FSS calls in all.
- `fit_spec` fits the pieces by least squares on a grid and reports the maximum error against the real
  function; `plain_fixed_eval` is the plaintext fixed-point reference that the protocol must match up
  to the truncation's ±1 unit in the last place per multiplication.

    spec = fit_spec(silu, lo=-8, hi=8, pieces=16, degree=2, fp=FixedPoint.from_range(-8, 8))
    x0, x1 = share(spec.fp.encode(x), rng)            # the parties' input shares
    (y0, y1), bits, stats = fused_eval(spec, x0, x1, rng)  # stats: FSS calls, key words, triples
    spec.fp.decode(y0 + y1)                           # ≈ silu(x), at arith_frac bits
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

U64 = np.uint64


@dataclass(frozen=True)
class FixedPoint:
    """A two's-complement fixed-point format: the nonlinearity's input domain is Z_{2^bits}."""

    bits: int
    """Width of the input domain (the FSS tables have 2^bits entries; at most 16 here)."""
    frac: int
    """Fractional bits of the input (resolution 2^-frac)."""
    arith_frac: int = 16
    """Fractional bits of the coefficients, the lifted input and the output in Z_{2^64} (Q16 as in the
    catalog's spec); at least `frac`."""

    def __post_init__(self):
        if not 2 <= self.bits <= 16:
            raise ValueError(f"bits={self.bits}: table-based FSS needs 2 <= bits <= 16")
        if not 0 <= self.frac < self.bits:
            raise ValueError(f"frac={self.frac} must lie in [0, bits={self.bits})")
        if not self.frac <= self.arith_frac <= 24:
            raise ValueError(f"arith_frac={self.arith_frac} must lie in [frac={self.frac}, 24]")

    @classmethod
    def from_range(cls, lo: float, hi: float, bits: int = 16, arith_frac: int = 16) -> FixedPoint:
        """The most fractional bits such that [lo, hi] fits in the signed `bits`-bit input domain
        (values in [-2^(bits-1-frac), 2^(bits-1-frac)))."""
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
            raise ValueError(f"need a finite range lo < hi; got [{lo}, {hi}]")
        for frac in range(bits - 1, -1, -1):  # the finest grid whose signed range holds [lo, hi]
            if lo >= -(2 ** (bits - 1)) / 2**frac and hi <= (2 ** (bits - 1) - 1) / 2**frac:
                break
        else:
            raise ValueError(f"range [{lo}, {hi}] needs more than {bits} bits")
        return cls(bits, frac, max(arith_frac, frac))

    @property
    def lo(self) -> float:
        return -(2 ** (self.bits - 1)) / 2**self.frac

    @property
    def hi(self) -> float:
        return (2 ** (self.bits - 1) - 1) / 2**self.frac

    def encode(self, x) -> np.ndarray:
        """Round to the grid, saturate to the domain, and embed as signed integers in Z_{2^64}."""
        q = np.clip(
            np.round(np.asarray(x, dtype=float) * 2**self.frac), -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
        )
        return q.astype(np.int64).view(U64)

    def decode(self, y: np.ndarray) -> np.ndarray:
        """Real value of outputs (at `arith_frac` fractional bits)."""
        return np.asarray(y, dtype=U64).view(np.int64).astype(float) / 2**self.arith_frac


@dataclass
class Spec:
    """A piecewise-polynomial nonlinearity in fixed point."""

    fp: FixedPoint
    breakpoints: np.ndarray
    """[K-1] real breakpoints (interval k is [t_k, t_{k+1}); the first and last are unbounded)."""
    coeffs: np.ndarray
    """[K, degree+1] real coefficients, lowest order first, of piece k in powers of (x - centers[k])
    (centred pieces keep the fixed-point rounding of high-order coefficients from growing with |x|)."""
    centers: np.ndarray
    """[K] expansion point of each piece (on the input grid)."""
    max_error: float = float("nan")
    """Max |spec(x) - f(x)| over the fitted grid (float evaluation of the pieces)."""

    @property
    def degree(self) -> int:
        return self.coeffs.shape[1] - 1

    def int_breakpoints(self) -> np.ndarray:
        return np.round(self.breakpoints * 2**self.fp.frac).astype(np.int64)

    def int_coeffs(self) -> np.ndarray:
        return np.round(self.coeffs * 2**self.fp.arith_frac).astype(np.int64)

    def int_centers(self) -> np.ndarray:
        """Centres at the arithmetic scale."""
        return np.round(self.centers * 2**self.fp.arith_frac).astype(np.int64)

    def interval(self, x_int: np.ndarray) -> np.ndarray:
        """Index of the active piece of signed fixed-point inputs."""
        return np.searchsorted(self.int_breakpoints(), x_int, side="right")


def fit_spec(
    fn: Callable[[np.ndarray], np.ndarray],
    lo: float,
    hi: float,
    pieces: int,
    degree: int,
    fp: FixedPoint,
    grid: int = 4096,
    spacing: str = "linear",
) -> Spec:
    """Least-squares polynomial per interval of [lo, hi] (equal width, or equal ratio with
    `spacing="log"` for positive ranges such as rsqrt's); inputs outside use the edge pieces.
    Breakpoints are rounded to the fixed-point grid so that float and fixed evaluations agree."""
    if pieces < 1 or degree < 0:
        raise ValueError(f"pieces={pieces} must be >= 1 and degree={degree} >= 0")
    if not fp.lo <= lo < hi <= fp.hi:
        raise ValueError(f"[{lo}, {hi}] must lie inside the format's range [{fp.lo}, {fp.hi}]")
    if spacing not in ("linear", "log") or (spacing == "log" and lo <= 0):
        raise ValueError(f"spacing={spacing!r}: 'linear', or 'log' for a positive range")
    raw = np.linspace(lo, hi, pieces + 1) if spacing == "linear" else np.geomspace(lo, hi, pieces + 1)
    edges = np.unique(np.round(raw * 2**fp.frac) / 2**fp.frac)
    pieces = len(edges) - 1
    coeffs = np.zeros((pieces, degree + 1))
    centers = np.round((edges[:-1] + edges[1:]) / 2 * 2**fp.frac) / 2**fp.frac
    for k in range(pieces):
        xs = np.linspace(edges[k], edges[k + 1], max(grid // pieces, 4 * (degree + 2)))
        coeffs[k] = np.polynomial.polynomial.polyfit(xs - centers[k], fn(xs), degree)
    spec = Spec(fp, edges[1:-1], coeffs, centers)
    xs = np.linspace(lo, hi, grid) if spacing == "linear" else np.geomspace(lo, hi, grid)
    k = np.searchsorted(spec.breakpoints, xs, side="right")
    approx = np.array([np.polynomial.polynomial.polyval(x - centers[i], coeffs[i]) for x, i in zip(xs, k)])
    spec.max_error = float(np.abs(approx - fn(xs)).max())
    return spec


# ----------------------------------------------------------------------------- sharing primitives


def share(x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Additive shares over Z_{2^64} of uint64 values."""
    x = np.asarray(x, dtype=U64)
    r = rng.integers(0, 2**64, size=x.shape, dtype=U64)
    with np.errstate(over="ignore"):
        return r, x - r


def trunc_share(z: np.ndarray, party: int, f: int) -> np.ndarray:
    """SecureML local truncation by f bits: party 0 shifts its share, party 1 negates, shifts, negates.
    The reconstruction is ⌊z / 2^f⌋ up to ±1, except with probability about |z| / 2^63."""
    s = z.view(np.int64)
    return (s >> f).view(U64) if party == 0 else (-((-s) >> f)).view(U64)


@dataclass
class TableGate:
    """Keys of a table-based FSS gate for g(x̂ - r) on Z_{2^bits}: key0 uniform, key0 + key1 = table."""

    key0: np.ndarray
    key1: np.ndarray
    boolean: bool = False
    """XOR sharing (packed bits) instead of additive sharing."""

    @classmethod
    def deal(cls, table: np.ndarray, r: int, rng: np.random.Generator, boolean: bool = False) -> TableGate:
        table = np.roll(np.asarray(table, dtype=U64), r, axis=0)  # index x̂ reads entry (x̂ - r) mod 2^n
        k0 = rng.integers(0, 2**64, size=table.shape, dtype=U64)
        return cls(k0, (table ^ k0) if boolean else (table - k0), boolean)

    def eval(self, party: int, x_hat: int) -> np.ndarray:
        return (self.key0 if party == 0 else self.key1)[x_hat]

    @property
    def words(self) -> int:
        return int(self.key0.size)


def _signed_domain(fp: FixedPoint) -> np.ndarray:
    """Signed integer value of each table index u in Z_{2^bits}."""
    u = np.arange(2**fp.bits, dtype=np.int64)
    return np.where(u >= 2 ** (fp.bits - 1), u - 2**fp.bits, u)


def _lift(fp: FixedPoint, x_int: np.ndarray) -> np.ndarray:
    """Input integers (frac bits) at the arithmetic scale (arith_frac bits)."""
    return np.asarray(x_int, dtype=np.int64) << (fp.arith_frac - fp.frac)


def _beaver_mul(x0, x1, y0, y1, rng, f: int):
    """Shares of trunc(x·y) from shares of x and y, with a dealer triple (a, b, ab); one opening."""
    a, b = rng.integers(0, 2**64, size=2, dtype=U64)
    a0, a1 = share(np.array(a), rng)
    b0, b1 = share(np.array(b), rng)
    c0, c1 = share(np.array(a * b), rng)
    e = (x0 - a0) + (x1 - a1)  # opened x - a
    d = (y0 - b0) + (y1 - b1)  # opened y - b
    z0 = c0 + e * b0 + d * a0 + e * d
    z1 = c1 + e * b1 + d * a1
    return trunc_share(z0, 0, f), trunc_share(z1, 1, f)


@dataclass
class Stats:
    fss_calls: int = 0
    """FSS gate evaluations per input element."""
    key_words: int = 0
    """64-bit words in one party's keys per element (table-based keys: 2^bits rows each)."""
    triples: int = 0
    """Beaver triples per element."""


def _horner(coef0, coef1, x0, x1, degree: int, f: int, rng):
    y0, y1 = coef0[degree], coef1[degree]
    for k in range(degree - 1, -1, -1):
        y0, y1 = _beaver_mul(y0, y1, x0, x1, rng, f)
        y0, y1 = y0 + coef0[k], y1 + coef1[k]
    return y0, y1


def _open_masked(x0, x1, fp: FixedPoint, rng):
    """The dealer's mask r (shared), and the opened x̂ = x + r mod 2^bits (a ring homomorphism from 2^64)."""
    mod = U64(2**fp.bits)
    r = int(rng.integers(0, 2**fp.bits))
    r0, r1 = share(np.array(r, dtype=U64), rng)
    x_hat = int(((x0 + r0) + (x1 + r1)) % mod)
    return r, x_hat


def fused_eval(spec: Spec, x0: np.ndarray, x1: np.ndarray, rng: np.random.Generator):
    with np.errstate(over="ignore"):
        return _fused_eval(spec, np.asarray(x0, dtype=U64), np.asarray(x1, dtype=U64), rng)


def _fused_eval(spec: Spec, x0: np.ndarray, x1: np.ndarray, rng: np.random.Generator):
    """FuseFSS: per element, 1 packed comparison + 1 interval lookup, then Horner on shares.
    Returns ((y0, y1), (bits0, bits1), Stats): output shares and the XOR-shared packed predicate words."""
    fp, d = spec.fp, spec.degree
    dom = _signed_domain(fp)
    tb, ci = spec.int_breakpoints(), spec.int_coeffs()
    packed = (dom[:, None] < tb[None]).astype(np.uint64) @ (U64(1) << np.arange(len(tb), dtype=U64))
    piece = spec.interval(dom)
    centred = _lift(fp, dom) - spec.int_centers()[piece]
    lookup = np.concatenate([ci[piece], centred[:, None]], 1).view(U64)  # coefficients, lifted x - centre
    out0, out1 = np.zeros(len(x0), U64), np.zeros(len(x0), U64)
    bits0, bits1 = np.zeros(len(x0), U64), np.zeros(len(x0), U64)
    stats = Stats(2, 0, d)
    for i in range(len(x0)):
        r, x_hat = _open_masked(x0[i], x1[i], fp, rng)
        cmp_gate = TableGate.deal(packed, r, rng, boolean=True)
        lut = TableGate.deal(lookup, r, rng)
        bits0[i], bits1[i] = cmp_gate.eval(0, x_hat), cmp_gate.eval(1, x_hat)
        v0, v1 = lut.eval(0, x_hat), lut.eval(1, x_hat)
        out0[i], out1[i] = _horner(v0[:-1], v1[:-1], v0[-1], v1[-1], d, fp.arith_frac, rng)
        stats.key_words = cmp_gate.words + lut.words
    return (out0, out1), (bits0, bits1), stats


def baseline_eval(spec: Spec, x0: np.ndarray, x1: np.ndarray, rng: np.random.Generator):
    with np.errstate(over="ignore"):
        return _baseline_eval(spec, np.asarray(x0, dtype=U64), np.asarray(x1, dtype=U64), rng)


def _baseline_eval(spec: Spec, x0: np.ndarray, x1: np.ndarray, rng: np.random.Generator):
    """Per-operator baseline: one comparison gate per breakpoint (arithmetic bit shares), local
    selection of the public coefficients and centre, one lift gate for x, then the same Horner."""
    fp, d = spec.fp, spec.degree
    dom = _signed_domain(fp)
    tb, ci, cc = spec.int_breakpoints(), spec.int_coeffs().view(U64), spec.int_centers().view(U64)
    out0, out1 = np.zeros(len(x0), U64), np.zeros(len(x0), U64)
    stats = Stats(len(tb) + 1, 0, d)
    for i in range(len(x0)):
        r, x_hat = _open_masked(x0[i], x1[i], fp, rng)
        gates = [TableGate.deal((dom < t).astype(U64), r, rng) for t in tb]
        lift = TableGate.deal(_lift(fp, dom).view(U64), r, rng)
        shares = []
        for p in (0, 1):
            lt = [g.eval(p, x_hat) for g in gates]  # shares of [x < t_k]
            # indicator of piece k: [x < t_{k+1}] - [x < t_k], with [x < t_0] = 0 and [x < t_K] = 1
            below = [U64(0)] + lt + [U64(p == 0)]
            ind = [below[k + 1] - below[k] for k in range(len(tb) + 1)]
            coef = [sum((ind[k] * ci[k, j] for k in range(len(ind))), U64(0)) for j in range(d + 1)]
            centre = sum((ind[k] * cc[k] for k in range(len(ind))), U64(0))
            shares.append((np.array(coef, dtype=U64), lift.eval(p, x_hat) - centre))
        (c0, xl0), (c1, xl1) = shares
        out0[i], out1[i] = _horner(c0, c1, xl0, xl1, d, fp.arith_frac, rng)
        stats.key_words = sum(g.words for g in gates) + lift.words
    return (out0, out1), stats


def plain_fixed_eval(spec: Spec, x_enc: np.ndarray) -> np.ndarray:
    """Plaintext fixed-point evaluation (Horner with floor truncation), as uint64 ring elements."""
    x = np.asarray(x_enc, dtype=U64).view(np.int64)
    piece = spec.interval(x)
    c = spec.int_coeffs()[piece]
    xl = _lift(spec.fp, x) - spec.int_centers()[piece]
    y = c[:, -1].copy()
    for k in range(spec.degree - 1, -1, -1):
        y = ((y * xl) >> spec.fp.arith_frac) + c[:, k]
    return y.view(U64)


# ----------------------------------------------------------------------------- the paper's operators


def gelu(x):
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf)(np.asarray(x) / math.sqrt(2)))


def silu(x):
    x = np.asarray(x, dtype=float)
    return x / (1 + np.exp(-x))


def exp(x):
    return np.exp(np.asarray(x, dtype=float))


def rsqrt(x):
    return 1 / np.sqrt(np.asarray(x, dtype=float))
