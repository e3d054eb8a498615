"""Steering, latent ablation and splicing as hook contexts on an `interp` model.

Each is a context manager over `model.hooks(...)`, so it holds for every forward pass inside it:
`model(ids)`, `run_with_cache`, and generation (interp's hooks stay active inside
`model.hf_model.generate`, KV cache on, and `model.generate` where it exists).

    >>> with sae.steer(model, s, {123: 8.0}):                       # add 8 * d_123 at the SAE's hook
    ...     out = model.hf_model.generate(ids, max_new_tokens=20)
    >>> with sae.steer(model, s, pairs={(4, 9): 5.0}):              # PolySAE pair steering 5 (d_4 + d_9)
    ...     ...
    >>> with sae.ablate(model, s, [123, 456]): logits = model(ids)  # remove those latents' contribution
    >>> with sae.spliced(model, s): logits = model(ids)             # the SAE's reconstruction replaces the activation

Directions: `d_i` is latent i's unit decoder direction (PolySAE: its linear atom), so alpha is in the
input space's norm units whatever the decoder's normalisation. Steering applies to every position.
Ablation and splicing change only rows that are SAE inputs under the row rule (`rows`, an
`interp.cache.rows.RowFilter`). The default leaves position 0 alone (positions:0; a norm cut needs a
reference from a store: pass `sae.evaluate.sae_row_filter(folder, store, hook)` for the rule training
used); `rows="all"` changes every position, as sae-lens's `run_with_saes` does (`sae.hooked_sae` has that
whole surface). In a KV-cached decoding step the hooked tensor holds one new token, never position 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from interp.cache.rows import RowFilter, RowRule


def _hook_name(model: Any, sae: Any, hook: str | None) -> str:
    name = hook or getattr(sae.cfg.metadata, "hook_name", None)
    if not name:
        raise ValueError("the SAE records no hook_name: pass hook=... (e.g. 'blocks.15.hook_resid_post')")
    d_model = getattr(model, "d_model", None)
    if d_model is not None and d_model != sae.cfg.d_in:
        raise ValueError(f"the SAE has d_in {sae.cfg.d_in} but the model's d_model is {d_model}: wrong model or SAE")
    return name


def _keep(t: Tensor, rows: RowFilter | str | None) -> Tensor:
    """Bool [batch, seq] of the hooked tensor's rows that are SAE inputs."""
    if isinstance(rows, str):
        if rows != "all":
            raise ValueError(f"rows={rows!r}: pass 'all' (every position, sae-lens's rule) or a RowFilter")
        return torch.ones(t.shape[:-1], dtype=torch.bool, device=t.device)
    flat = t.reshape(-1, t.shape[-1])
    filt = rows if rows is not None else RowFilter(RowRule.parse("positions:0"), None)
    if t.dim() == 3 and t.shape[1] > 1:
        pos = torch.arange(t.shape[1]).repeat(t.shape[0])
    else:  # a KV-cached decoding step: one new token, never position 0
        pos = torch.full((flat.shape[0],), 1 << 30)
    return filt.keep_tensor(flat.float(), pos).reshape(t.shape[:-1])


def steering_vector(
    sae: Any, latents: dict[int, float] | None = None, pairs: dict[tuple[int, int], float] | None = None
) -> Tensor:
    """Σ alpha_i d_i + Σ alpha_ij (d_i + d_j) over unit decoder directions ([d_in])."""
    from sae.metrics import decoder_directions

    D = decoder_directions(sae)
    v = torch.zeros(D.shape[1], dtype=D.dtype)
    for i, a in (latents or {}).items():
        v += a * D[int(i)]
    for (i, j), a in (pairs or {}).items():
        v += a * (D[int(i)] + D[int(j)])
    return v


@contextmanager
def steer(
    model: Any,
    sae: Any,
    latents: dict[int, float] | None = None,
    *,
    pairs: dict[tuple[int, int], float] | None = None,
    hook: str | None = None,
) -> Iterator[Tensor]:
    """Add alpha_i d_i (and PolySAE-style alpha (d_i + d_j) for `pairs`) at the SAE's hook, all positions."""
    name = _hook_name(model, sae, hook)
    v = steering_vector(sae, latents, pairs)

    def fn(t: Tensor, hook: Any = None) -> Tensor:  # noqa: ARG001
        return t + v.to(t.dtype)

    with model.hooks(fwd_hooks=[(name, fn)]):
        yield v


@contextmanager
def ablate(
    model: Any, sae: Any, latents: Iterable[int], *, hook: str | None = None, rows: RowFilter | None = None
) -> Iterator[None]:
    """Remove the given latents' contribution: x - (x̂(z) - x̂(z with those latents zeroed)); the SAE's
    error term stays, so with no latents the model is unchanged."""
    name = _hook_name(model, sae, hook)
    idx = torch.tensor(sorted({int(i) for i in latents}), dtype=torch.long)

    def fn(t: Tensor, hook: Any = None) -> Tensor:  # noqa: ARG001
        keep = _keep(t, rows)
        x = t[keep].float()
        with torch.no_grad():
            z = sae.encode(x)
            z0 = z.clone()
            z0[:, idx] = 0
            delta = sae.decode(z) - sae.decode(z0)
        out = t.clone()
        out[keep] = (x - delta).to(t.dtype)
        return out

    with model.hooks(fwd_hooks=[(name, fn)]):
        yield


@contextmanager
def spliced(
    model: Any, sae: Any, *, hook: str | None = None, rows: RowFilter | str | None = None, keep_error: bool = False
) -> Iterator[None]:
    """Replace the hook's activation by the SAE's reconstruction on SAE-input rows.

    `keep_error=True` adds the error back (held constant): the model's output is unchanged, and the gradient
    reaching the activation is the one through the SAE's encoder and decoder, as in sae-lens. Rows: the
    training rule (default: every position but 0), or `rows="all"` for sae-lens's (every position); for
    sae-lens's whole surface (hook points on the latents, transcoders) see `sae.hooked_sae`.
    """
    name = _hook_name(model, sae, hook)

    def fn(t: Tensor, hook: Any = None) -> Tensor:  # noqa: ARG001
        keep = _keep(t, rows)
        x = t[keep].float()
        xh = sae.decode(sae.encode(x))
        if keep_error:
            xh = xh + (x - xh).detach()
        out = t.clone()
        out[keep] = xh.to(t.dtype)
        return out

    with model.hooks(fwd_hooks=[(name, fn)]):
        yield
