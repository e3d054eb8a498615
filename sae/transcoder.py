"""Transcoders: sparse replacements of a model's MLPs, read at the MLP's input and written at its output.

A transcoder of layer l reads `blocks.{l}.ln2.hook_normalized` (the MLP's input after its norm, before the
norm's weight: what circuit-tracer's models feed, with the weight folded into the MLP) and reconstructs
`blocks.{l}.hook_mlp_out`. Three kinds share the encoder side (this file) and differ in their decoders:

- `PerLayerTranscoders` (kind "plt"): each layer's features decode into that layer's MLP output only;
- the same with `skip=True` (kind "skip"): plus an affine skip `x @ W_skip.T` (Paulo et al. 2025);
- `CrossLayerTranscoder` (kind "clt", `sae.clt`): the features of layer i decode into every layer l >= i.

The shipped codes are a JumpReLU, `pre * (pre > threshold)`, with a per-layer threshold calibrated after
training (`sae.transcoder_train`): the form circuit-tracer reads. Decoding goes through sparse codes
(`Codes`, an `embedding_bag`), so a step costs O(k) per row in the decoder rather than O(d_transcoder).

    >>> tc = PerLayerTranscoders([0, 1], d_model=64, d_transcoder=256)
    >>> ys = tc([x0, x1])              # the reconstructed MLP outputs of both layers, [n, 64] each

Axis names: n rows (tokens), m = d_transcoder, d = d_model, s = output slots of a layer's decoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

INPUT_HOOK = "blocks.{layer}.ln2.hook_normalized"
OUTPUT_HOOK = "blocks.{layer}.hook_mlp_out"

TRANSCODER_ARCHS = {
    "transcoder": ("plt", "per-layer transcoder: MLP input after its norm -> MLP output"),
    "skip_transcoder": ("skip", "per-layer transcoder with an affine skip W_skip x"),
    "clt": ("clt", "cross-layer transcoder: layer i's features decode into every layer >= i"),
}
"""`interp sae train --arch` names of the transcoders -> (kind, description)."""


class Codes(NamedTuple):
    """Sparse codes of n rows, in `embedding_bag` form: row r holds latents `cols[offsets[r]:offsets[r+1]]`
    with values `vals[...]` (which carry the gradient to the encoder while training)."""

    cols: Tensor
    """[nnz] latent index of each active code, grouped by row."""
    vals: Tensor
    """[nnz] its value."""
    offsets: Tensor
    """[n] start of each row's codes in `cols`."""

    @staticmethod
    def from_flat(flat_idx: Tensor, values: Tensor, n: int, m: int) -> Codes:
        """Codes from indices into a flattened [n, m] matrix (any order) and the matrix's flat values."""
        flat_idx, _ = flat_idx.sort()
        rows = flat_idx // m
        offsets = torch.searchsorted(rows, torch.arange(n, device=rows.device))
        return Codes(flat_idx % m, values.flatten()[flat_idx], offsets)

    @staticmethod
    def from_dense(acts: Float[Tensor, "n m"]) -> Codes:
        """The nonzero entries of a dense code matrix."""
        return Codes.from_flat(acts.flatten().nonzero().flatten(), acts, *acts.shape)

    def n_active(self) -> int:
        return int((self.vals != 0).sum())


def decode_bag(codes: Codes, table: Float[Tensor, "m out"]) -> Float[Tensor, "n out"]:
    """sum_j vals_j * table[cols_j] per row, without building the dense [n, m] code matrix."""
    return F.embedding_bag(codes.cols, table, codes.offsets, mode="sum", per_sample_weights=codes.vals)


class Transcoders(nn.Module):
    """The encoders of every covered layer and the decoder biases; subclasses add the decoder weights.

    `layers` are the model layers covered, in order; index i of every parameter is `layers[i]`."""

    kind: str = ""

    def __init__(self, layers: Sequence[int], d_model: int, d_transcoder: int):
        super().__init__()
        layers = [int(x) for x in layers]
        if not layers or layers != sorted(set(layers)) or layers[0] < 0:
            raise ValueError(f"layers must be distinct, increasing and >= 0, got {layers}")
        if d_model < 1 or d_transcoder < 1:
            raise ValueError(f"d_model and d_transcoder must be >= 1, got {d_model}, {d_transcoder}")
        self.layers, self.d_model, self.d_transcoder = layers, int(d_model), int(d_transcoder)
        n = len(layers)
        self.W_enc = nn.ParameterList([nn.Parameter(torch.zeros(d_transcoder, d_model)) for _ in range(n)])
        self.b_enc = nn.Parameter(torch.zeros(n, d_transcoder))
        self.b_dec = nn.Parameter(torch.zeros(n, d_model))
        self.register_buffer("threshold", torch.zeros(n, d_transcoder))

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def init_weights(self, generator: torch.Generator) -> None:
        """Random unit-norm encoder rows (pre-activations of a normalised input are then about N(0, 1)) and
        unit-norm decoder rows; biases and the skip at zero."""
        with torch.no_grad():
            for w in self.W_enc:
                w.copy_(F.normalize(torch.randn(w.shape, generator=generator), dim=-1))
            for w in self.decoder_weights():
                w.copy_(torch.randn(w.shape, generator=generator))
            self.normalize_decoder_()

    # ------------------------------------------------------------------ encoder
    def pre_acts(self, i: int, x: Float[Tensor, "*n d"]) -> Float[Tensor, "*n m"]:
        """Pre-activations of layer index i: x @ W_enc.T + b_enc."""
        return F.linear(x, self.W_enc[i], self.b_enc[i])

    def encode(self, i: int, x: Float[Tensor, "*n d"]) -> Float[Tensor, "*n m"]:
        """The shipped codes of layer index i: JumpReLU, pre * (pre > threshold) (a ReLU at threshold 0)."""
        pre = self.pre_acts(i, x)
        return pre * (pre > self.threshold[i])

    # ------------------------------------------------------------------ decoder (per subclass)
    def decoder_weights(self) -> list[nn.Parameter]:
        """Every decoder weight whose rows are latents (normalised to unit norm while training)."""
        raise NotImplementedError

    def slots(self, i: int) -> list[int]:
        """Indices of the layers the features of layer index i write into."""
        raise NotImplementedError

    def decode_codes(self, i: int, codes: Codes) -> Float[Tensor, "n s d"]:
        """The contribution of layer index i's codes to each of its output slots (no bias, no skip)."""
        raise NotImplementedError

    def direct(self, i: int, x: Float[Tensor, "n d"]) -> Float[Tensor, "n d"]:
        """What layer index i's output gets besides the features: b_dec (and the skip term)."""
        return self.b_dec[i].expand_as(x)

    def normalize_decoder_(self) -> None:
        """Scale every latent's decoder (all its slots together) to unit norm."""
        with torch.no_grad():
            for w in self.decoder_weights():
                w.div_(w.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, *([1] * (w.ndim - 1))))

    def scale_outputs_(self, factor: Tensor) -> None:
        """Multiply the output of layer index l by factor[l] (folds a training-time target scale away)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ whole forward
    def reconstruct(self, codes: Sequence[Codes], xs: Sequence[Tensor]) -> list[Tensor]:
        """Outputs of every layer from the codes of every layer (with gradient while training)."""
        acc: list[Tensor] = [self.direct(i, x) for i, x in enumerate(xs)]
        for i, c in enumerate(codes):
            for slot, part in zip(self.slots(i), self.decode_codes(i, c).unbind(1), strict=True):
                acc[slot] = acc[slot] + part
        return acc

    def forward(self, xs: Sequence[Float[Tensor, "n d"]]) -> list[Float[Tensor, "n d"]]:
        """The reconstructed MLP outputs of every covered layer from their inputs (shipped codes)."""
        if len(xs) != self.n_layers:
            raise ValueError(f"expected the inputs of {self.n_layers} layers, got {len(xs)}")
        return self.reconstruct([Codes.from_dense(self.encode(i, x)) for i, x in enumerate(xs)], xs)


class PerLayerTranscoders(Transcoders):
    """One transcoder per layer (kind "plt"), optionally with a skip (kind "skip"):
    y_l = acts_l @ W_dec_l + b_dec_l (+ x_l @ W_skip_l.T)."""

    def __init__(self, layers: Sequence[int], d_model: int, d_transcoder: int, skip: bool = False):
        super().__init__(layers, d_model, d_transcoder)
        self.kind = "skip" if skip else "plt"
        n = self.n_layers
        self.W_dec = nn.ParameterList([nn.Parameter(torch.zeros(d_transcoder, d_model)) for _ in range(n)])
        self.W_skip = (
            nn.ParameterList([nn.Parameter(torch.zeros(d_model, d_model)) for _ in range(n)]) if skip else None
        )

    def decoder_weights(self) -> list[nn.Parameter]:
        return list(self.W_dec)

    def slots(self, i: int) -> list[int]:
        return [i]

    def decode_codes(self, i: int, codes: Codes) -> Tensor:
        return decode_bag(codes, self.W_dec[i]).unsqueeze(1)

    def direct(self, i: int, x: Tensor) -> Tensor:
        out = self.b_dec[i].expand_as(x)
        return out + F.linear(x, self.W_skip[i]) if self.W_skip is not None else out

    def scale_outputs_(self, factor: Tensor) -> None:
        with torch.no_grad():
            for i, f in enumerate(factor.tolist()):
                self.W_dec[i].mul_(f)
                self.b_dec[i].mul_(f)
                if self.W_skip is not None:
                    self.W_skip[i].mul_(f)
