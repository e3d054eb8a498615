"""Transcoders against the model they replace: per-layer reconstruction, and the replacement model's loss.

- `mlp_io(model, ids, layers)`: one no-grad forward recording every covered layer's MLP input
  (`ln2.hook_normalized`) and output (`hook_mlp_out`), as [n_layers, rows, d] (what training reads too).
- `layer_metrics`: per layer, on the ordinary rows (the row rule): NMSE (fraction of variance of
  mlp_out unexplained), L0 of the shipped codes, and the fraction of latents that never fired.
- `replaced_mlps(model, tc)`: a context in which every covered MLP's output is the transcoders' output,
  computed from the MLP inputs of the *same* forward (so errors compound through the layers, as in
  circuit-tracer's replacement model). Positions in `keep_positions` (default 0, the attention sink whose
  MLP output carries the model's massive activation) keep the MLP's own output, as circuit-tracer, which
  never gives position 0 features, keeps them in its error nodes.
- `replacement_metrics`: next-token CE of the original, the replacement and the zero-MLP model, top-1
  agreement and KL of the replacement with the original, on held-out token rows.

    >>> with replaced_mlps(model, tc):
    ...     loss = model(ids, return_type="loss")
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from interp.cache.rows import RowFilter
from sae.transcoder import INPUT_HOOK, OUTPUT_HOOK, Codes, Transcoders


def hook_names(layers: Sequence[int]) -> tuple[list[str], list[str]]:
    """(input hooks, output hooks) of the layers."""
    return [INPUT_HOOK.format(layer=x) for x in layers], [OUTPUT_HOOK.format(layer=x) for x in layers]


@torch.no_grad()
def mlp_io(model: Any, ids: Tensor, layers: Sequence[int], device: str | None = None) -> tuple[Tensor, Tensor]:
    """(xs, ys), each [n_layers, batch * pos, d_model] float32: the MLP inputs and outputs of one forward over
    token rows `ids` [batch, pos] (the forward stops after the last MLP output needed)."""
    ins, outs = hook_names(layers)
    _, cache = model.run_with_cache(ids, names=[*ins, *outs], return_logits=False)
    d = model.d_model

    def stack(names: list[str]) -> Tensor:
        return torch.stack([cache[h].reshape(-1, d).to(device or cache[h].device, torch.float32) for h in names])

    return stack(ins), stack(outs)


def keep_rows(filters: Sequence[RowFilter], ys: Tensor, pos: Tensor) -> Tensor:
    """Bool [rows]: ordinary in every layer (position rule, and each layer's norm cut on its MLP output)."""
    keep = torch.ones(ys.shape[1], dtype=torch.bool, device=ys.device)
    for f, y in zip(filters, ys, strict=True):
        keep &= f.keep_tensor(y, pos.to(ys.device))
    return keep


@torch.no_grad()
def layer_metrics(tc: Transcoders, xs: Tensor, ys: Tensor, keep: Tensor) -> list[dict[str, Any]]:
    """Per covered layer on the kept rows: nmse, l0 (shipped codes per row), dead_frac (never fired)."""
    xs, ys = xs[:, keep], ys[:, keep]
    out = []
    acc = [tc.direct(i, x) for i, x in enumerate(xs)]
    fired = []
    for i, x in enumerate(xs):
        acts = tc.encode(i, x)
        fired.append((acts != 0).sum(0))
        c = Codes.from_dense(acts)
        for slot, part in zip(tc.slots(i), tc.decode_codes(i, c).unbind(1), strict=True):
            acc[slot] = acc[slot] + part
    for i, layer in enumerate(tc.layers):
        y = ys[i]
        err = (y - acc[i]).pow(2).sum()
        var = (y - y.mean(0)).pow(2).sum().clamp_min(1e-12)
        out.append(
            {
                "layer": layer,
                "nmse": float(err / var),
                "l0": float(fired[i].sum()) / max(len(y), 1),
                "dead_frac": float((fired[i] == 0).float().mean()),
            }
        )
    return out


@contextmanager
def replaced_mlps(
    model: Any, tc: Transcoders, keep_positions: Sequence[int] = (0,), zero: bool = False
) -> Iterator[None]:
    """Every covered layer's `hook_mlp_out` replaced by the transcoders' output (or by zeros with `zero=True`),
    except at `keep_positions`. Hooks live only inside the block."""
    ins, outs = hook_names(tc.layers)
    index = {h: i for i, h in enumerate(ins)} | {h: i for i, h in enumerate(outs)}
    state: dict[str, list[Any]] = {}

    def read(t: Tensor, hook: Any) -> None:
        i = index[hook.name]
        if i == 0:  # a new forward: the first covered layer's input comes first
            state["acc"], state["x"] = [None] * tc.n_layers, [None] * tc.n_layers
        x = t.detach().reshape(-1, tc.d_model).to(tc.b_dec.device, torch.float32)
        state["x"][i] = x
        c = Codes.from_dense(tc.encode(i, x))
        acc = state["acc"]
        for slot, part in zip(tc.slots(i), tc.decode_codes(i, c).unbind(1), strict=True):
            acc[slot] = part if acc[slot] is None else acc[slot] + part

    def write(t: Tensor, hook: Any) -> Tensor:
        i = index[hook.name]
        if zero:
            y = torch.zeros_like(t)
        else:
            y = (tc.direct(i, state["x"][i]) + state["acc"][i]).view(t.shape).to(t.device, t.dtype)
        keep = [p for p in keep_positions if p < t.shape[1]]
        if keep:
            y[:, keep] = t[:, keep]
        return y

    hooks = [] if zero else [(h, read) for h in ins]
    with torch.no_grad(), model.hooks(fwd_hooks=[*hooks, *[(h, write) for h in outs]]):
        yield


@torch.no_grad()
def replacement_metrics(
    model: Any, tc: Transcoders, ids: Tensor, batch_size: int = 8, keep_positions: Sequence[int] = (0,)
) -> dict[str, Any]:
    """CE of the original / replacement / zero-MLP models on token rows `ids` [n, pos] (mean next-token loss over
    every position with a target), the replacement's top-1 agreement with the original, KL(original || replacement)
    and KL(original || zero-MLP) per token, and the fraction of the zero-MLP CE gap the replacement recovers."""
    sums = dict.fromkeys(
        ("ce_original", "ce_replacement", "ce_zero_mlp", "agreement", "kl_replacement", "kl_zero_mlp"), 0.0
    )
    n_tok = 0
    for start in range(0, len(ids), batch_size):
        b = ids[start : start + batch_size].to(model.device)
        logits, loss = model(b, return_type="both", loss_per_token=True)
        with replaced_mlps(model, tc, keep_positions):
            r_logits, r_loss = model(b, return_type="both", loss_per_token=True)
        lp, rp = logits[:, :-1].float().log_softmax(-1), r_logits[:, :-1].float().log_softmax(-1)
        del logits, r_logits
        sums["kl_replacement"] += float((lp.exp() * (lp - rp)).sum())
        sums["agreement"] += float((lp.argmax(-1) == rp.argmax(-1)).sum())
        del rp
        with replaced_mlps(model, tc, keep_positions, zero=True):
            z_logits, z_loss = model(b, return_type="both", loss_per_token=True)
        zp = z_logits[:, :-1].float().log_softmax(-1)
        sums["kl_zero_mlp"] += float((lp.exp() * (lp - zp)).sum())
        sums["ce_original"] += float(loss.sum())
        sums["ce_replacement"] += float(r_loss.sum())
        sums["ce_zero_mlp"] += float(z_loss.sum())
        n_tok += loss.numel()
    out: dict[str, Any] = {k: v / max(n_tok, 1) for k, v in sums.items()}
    gap = out["ce_zero_mlp"] - out["ce_original"]
    out["ce_recovered"] = (out["ce_zero_mlp"] - out["ce_replacement"]) / gap if gap > 0 else None
    out["tokens"] = n_tok
    out["original_positions_kept"] = list(keep_positions)
    return out
