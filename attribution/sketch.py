"""CountSketch and TensorSketch of per-example gradients, computed from activations and output gradients.

The per-example gradient of a Linear layer `y = W a + b` over a sequence is `G = sum_l delta_l a_l^T`
(`delta` = d loss / d y). It is never built: both factors are CountSketched to m dimensions and combined
by circular convolution, which the FFT turns into a product (Pham & Pagh 2013):

    TS(G) = irfft( sum_l rfft(C_out delta_l) * rfft(C_in a_l), n=m )

This equals a CountSketch of vec(G) with hash `H(i, j) = (h_out[i] + h_in[j]) mod m` and sign
`S(i, j) = s_out[i] s_in[j]` (`explicit_outer_sketch` builds that reference for tests). Because the sketch
is linear and the hashes are fixed per parameter (a seeded `torch.Generator`), sketches of the same
parameter can be summed across tokens, loop steps and checkpoints: the sum of sketches is the sketch of
the sum. Inner products of sketches are unbiased estimates of gradient inner products (no 1/sqrt(m)
scaling needed), with variance falling like 1/m.

- Linear weight: `tensor_sketch_linear(acts, grads, hashes)`.
- Linear / LayerNorm bias: `count_sketch(grads.sum(1), hash)`.
- LayerNorm weight: `count_sketch((grads * normalized).sum(1), hash)` (exact per-example grad, d-dim).
- Embedding weight: `tensor_sketch_embedding(ids, grads, hashes)`: the one-hot factor is a signed shift,
  so vocab x d is never built.

Shapes: acts [batch, pos, d_in], grads [batch, pos, d_out], sketches [batch, m], all float32.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class CountHash:
    """A CountSketch of a d-dimensional vector into m buckets: bucket `h[i]`, sign `s[i]`."""

    h: Tensor
    """[d] int64 buckets in [0, m)."""
    s: Tensor
    """[d] float32 signs in {-1, +1}."""
    m: int

    @classmethod
    def make(cls, d: int, m: int, seed: int, device: torch.device | str = "cpu") -> CountHash:
        """Seeded hash: the same (d, m, seed) gives the same hash on every call and every machine."""
        if m <= 0:
            raise ValueError(f"sketch size m must be positive, got {m}")
        g = torch.Generator(device="cpu").manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
        h = torch.randint(0, m, (d,), generator=g)
        s = torch.randint(0, 2, (d,), generator=g).float().mul_(2).sub_(1)
        return cls(h.to(device), s.to(device), m)

    def to(self, device) -> CountHash:
        return CountHash(self.h.to(device), self.s.to(device), self.m)


def param_seed(seed: int, name: str, part: str = "") -> int:
    """A per-parameter seed derived from the run seed and the parameter's name (stable across processes)."""
    return (seed * 1_000_003 + zlib.crc32(f"{name}|{part}".encode())) & 0x7FFF_FFFF


def count_sketch(x: Tensor, hash: CountHash) -> Tensor:
    """CountSketch of the last axis: [..., d] -> [..., m], `out[..., h[i]] += s[i] x[..., i]` (float32)."""
    x = x.float()
    out = torch.zeros(*x.shape[:-1], hash.m, dtype=torch.float32, device=x.device)
    return out.index_add_(-1, hash.h, x * hash.s)


def tensor_sketch_linear(acts: Tensor, grads: Tensor, h_in: CountHash, h_out: CountHash) -> Tensor:
    """TensorSketch of each example's `sum_l grads[b, l] acts[b, l]^T` -> [batch, m], via the FFT.

    acts [batch, pos, d_in], grads [batch, pos, d_out]. The sum over tokens is taken in the Fourier
    domain (the sketch is linear), so memory is O(batch * pos * m), never batch * d_out * d_in.
    """
    m = h_in.m
    if h_out.m != m:
        raise ValueError(f"input and output hashes must share m, got {h_in.m} and {h_out.m}")
    fa = torch.fft.rfft(count_sketch(acts, h_in), n=m)
    fb = torch.fft.rfft(count_sketch(grads, h_out), n=m)
    return torch.fft.irfft((fa * fb).sum(-2), n=m)


def tensor_sketch_embedding(ids: Tensor, grads: Tensor, h_tok: CountHash, h_out: CountHash) -> Tensor:
    """TensorSketch of each example's embedding gradient `sum_l onehot(ids[b,l]) grads[b,l]^T` -> [batch, m].

    Uses the Linear construction with the one-hot token as the input factor: its CountSketch is the
    single signed bucket `s_tok[id] e_{h_tok[id]}`, so the convolution is a signed circular shift of
    the sketched output gradient. (Rows are vocab ids; columns the embedding dimensions.)
    """
    m = h_out.m
    sb = count_sketch(grads, h_out)  # [b, l, m]
    shift = h_tok.h[ids]  # [b, l]
    idx = (torch.arange(m, device=ids.device) - shift[..., None]) % m  # out[k] = sb[k - shift]
    rolled = torch.gather(sb, -1, idx)
    return (rolled * h_tok.s[ids][..., None]).sum(-2)


def explicit_outer_sketch(g: Tensor, h_in: CountHash, h_out: CountHash) -> Tensor:
    """Reference: CountSketch of vec(G) for G [d_out, d_in] (or [batch, d_out, d_in]) with the combined hash.

    Materialises G; for tests only.
    """
    m = h_in.m
    bucket = (h_out.h[:, None] + h_in.h[None, :]) % m  # [d_out, d_in]
    sign = h_out.s[:, None] * h_in.s[None, :]
    flat = (g.float() * sign).flatten(-2)
    out = torch.zeros(*g.shape[:-2], m, dtype=torch.float32, device=g.device)
    return out.index_add_(-1, bucket.flatten(), flat)
