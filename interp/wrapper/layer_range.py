"""Running only part of the block stack: start at layer l from a given residual, or stop before layer l.

    with run_from_layer(model, 12, resid):   # blocks 0..11 are skipped; block 12 reads `resid`
        logits = model.hf_model(input_ids=ids, attention_mask=mask).logits

A patch at layer l changes nothing before layer l, so a patching sweep can start each run from the
cached residual at l (`interp.patching`); TransformerLens's `forward(start_at_layer=, stop_at_layer=)` are
built on the same two pieces. The HF model's own forward still runs: embeddings, rotary tables and
masks are computed as usual (cheap), the skipped blocks are swapped for a pass-through for the duration
of the block and put back in `finally`, and the residual is handed to block l by a forward pre-hook that
runs before any other hook there (so `blocks.l.hook_resid_pre` sees, and may edit, the given residual).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import Tensor, nn


class StopForward(Exception):
    """Raised by a stop hook once everything a run needs has been computed."""


class _PassThrough(nn.Module):
    """Stands in for a skipped block: returns its hidden states unchanged.

    Attribute reads fall through to the block it replaces (Gemma 3's forward reads `attention_type`).
    The block is kept out of `_modules`, so parameters are not listed twice.
    """

    def __init__(self, block: nn.Module):
        super().__init__()
        self.__dict__["_block"] = block

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_block"], name)


def blocks_of(model) -> nn.ModuleList:
    return model.hf_model.get_submodule(model.adapter.layers)


def check_layer(model, layer: int, what: str, allow_end: bool = True) -> int:
    """A layer index 0..n_layers (n_layers: the final norm), negative values counted from the end."""
    n = model.n_layers
    if layer < 0:
        layer += n
    if not 0 <= layer <= (n if allow_end else n - 1):
        raise ValueError(f"{what}={layer} is out of range for a model with {n} layers")
    return layer


@contextmanager
def run_from_layer(model, layer: int, resid: Tensor) -> Iterator[None]:
    """Skip blocks before `layer` and feed `resid` [batch, pos, d_model] to block `layer` (or to the final
    norm when `layer == n_layers`). The HF forward must be called with the same batch and length."""
    layer = check_layer(model, layer, "start_at_layer")
    blocks = blocks_of(model)
    target = blocks[layer] if layer < model.n_layers else model.hf_model.get_submodule(model.adapter.final_norm)

    def feed(module, args, kwargs):
        if args:
            return (resid.to(args[0].dtype), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": resid.to(kwargs["hidden_states"].dtype)}

    originals = [blocks[i] for i in range(layer)]
    handle = target.register_forward_pre_hook(feed, with_kwargs=True, prepend=True)
    try:
        for i, block in enumerate(originals):
            blocks[i] = _PassThrough(block)
        yield
    finally:
        handle.remove()
        for i, block in enumerate(originals):
            blocks[i] = block


@contextmanager
def stop_before_layer(model, layer: int, store: dict) -> Iterator[None]:
    """Raise `StopForward` at the input of block `layer` (the final norm at n_layers), after putting the
    residual stream there in `store["resid"]`."""
    layer = check_layer(model, layer, "stop_at_layer")
    target = (
        blocks_of(model)[layer] if layer < model.n_layers else model.hf_model.get_submodule(model.adapter.final_norm)
    )

    def stop(module, args, kwargs):
        store["resid"] = args[0] if args else kwargs["hidden_states"]
        raise StopForward

    handle = target.register_forward_pre_hook(stop, with_kwargs=True, prepend=True)  # before hooks there, as in TL
    try:
        yield
    finally:
        handle.remove()
