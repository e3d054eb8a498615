"""The cross-layer transcoder (CLT; Ameisen et al. 2025, "Circuit Tracing"): an encoder per layer, and a decoder
from the features of layer i into the MLP output of every layer l >= i.

    y_l = b_dec_l + sum_{i <= l} acts_i @ W_dec_i[:, l - i, :]

`W_dec[i]` is [d_transcoder, n_layers - i, d_model]: slot j of layer i's features writes into layer i + j, the
layout circuit-tracer's `W_dec_{i}.safetensors` files hold. A CLT covers layers 0..n-1 of its model (every
later layer is a slot of every earlier one), so `layers` must be that range.

    >>> clt = CrossLayerTranscoder(range(4), d_model=64, d_transcoder=128)
    >>> ys = clt([x0, x1, x2, x3])     # y_3 sums the features of all four layers
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from sae.transcoder import Codes, Transcoders, decode_bag


class CrossLayerTranscoder(Transcoders):
    """Kind "clt": per-layer encoders (`Transcoders`) and decoders into every later layer."""

    kind = "clt"

    def __init__(self, layers: Sequence[int], d_model: int, d_transcoder: int):
        super().__init__(layers, d_model, d_transcoder)
        if self.layers != list(range(self.n_layers)):
            raise ValueError(
                f"a cross-layer transcoder covers layers 0..n-1 (its features write into every later layer), got "
                f"{self.layers}: pass --layers 0-{self.layers[-1]} or leave --layers out"
            )
        n = self.n_layers
        self.W_dec = nn.ParameterList([nn.Parameter(torch.zeros(d_transcoder, n - i, d_model)) for i in range(n)])

    def decoder_weights(self) -> list[nn.Parameter]:
        return list(self.W_dec)

    def slots(self, i: int) -> list[int]:
        return list(range(i, self.n_layers))

    def decode_codes(self, i: int, codes: Codes) -> Tensor:
        w = self.W_dec[i]
        return decode_bag(codes, w.flatten(1)).view(-1, w.shape[1], self.d_model)

    def scale_outputs_(self, factor: Tensor) -> None:
        with torch.no_grad():
            for i, w in enumerate(self.W_dec):
                w.mul_(factor[i:].to(w)[None, :, None])
            self.b_dec.mul_(factor.to(self.b_dec)[:, None])
