"""The probe scan: one forward per batch over a corpus with the massive-activation and sink scanners
hooked in (statistics accumulate inside the hooks; no activation is kept), so a scan costs about a
bare forward.

    from interp.probes import probe_scan
    result = probe_scan(model, corpus.tokens)          # {"massive": {...}, "sinks": {...}}
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp.infra import logs
from interp.probes.ablation import check_tokens
from interp.probes.massive import MassiveCriterion, MassiveScanner
from interp.probes.sinks import DEFAULT_EPS, SinkScanner


class PatternsNotCapturedError(RuntimeError):
    """The attention patterns of some layers never reached `attn.hook_pattern`."""


def _check_model(model) -> None:
    from interp import HookedModel

    if not isinstance(model, HookedModel):
        raise TypeError(f"expected an interp.HookedModel, got {type(model).__name__}; wrap it: interp.HookedModel(hf_model, tokenizer)")


@torch.no_grad()
def probe_scan(model, tokens: Tensor, mask: Tensor | None = None, criterion: MassiveCriterion | None = None,
               eps: float = DEFAULT_EPS, batch_size: int = 8, fwd_hooks=(), min_queries: int = 16,
               progress: bool = True, return_scanners: bool = False):
    """Scan a corpus for massive activations and attention sinks in one forward per batch.

    `fwd_hooks` run first (e.g. an ablation), so the scan measures the intervened model.
    Raises `PatternsNotCapturedError` when a layer's attention pattern never reached the hook (a model whose
    attention does not run through the hooked attention function, e.g. switched to SDPA or flash attention).
    """
    _check_model(model)
    check_tokens(tokens)
    criterion = criterion or MassiveCriterion()
    mask = torch.ones_like(tokens) if mask is None else mask
    massive = MassiveScanner(model.n_layers, criterion)
    sinks = SinkScanner(model.n_layers, model.n_heads, eps=eps, min_queries=min(min_queries, tokens.shape[1] // 2 or 1))
    hooks = list(fwd_hooks) + [("blocks.*.hook_resid_post", massive.hook), ("blocks.*.attn.hook_pattern", sinks.hook)]
    with model.hooks(hooks):
        for i in logs.progress(range(0, tokens.shape[0], batch_size), desc="probe scan", enabled=progress, leave=False):
            ids = tokens[i : i + batch_size].to(model.device)
            m = mask[i : i + batch_size].to(model.device)
            massive.begin_batch(ids, m)
            sinks.begin_batch(ids, m)
            model.hf_model(input_ids=ids, attention_mask=m, use_cache=False)
    missing = [layer for layer, n in enumerate(sinks.n_seq) if n == 0]
    if missing:
        impl = getattr(model.hf_model.config, "_attn_implementation", None)
        raise PatternsNotCapturedError(
            f"attention patterns of layers {missing} were not captured (attention implementation {impl!r}); "
            "the probes need the hooked eager attention that interp.HookedModel installs: do not switch the model "
            "to sdpa/flash attention after wrapping it (re-wrap with interp.HookedModel(hf_model, tokenizer))")
    decode = _decoder(model)
    result = {"massive": massive.report(decode), "sinks": sinks.report(decode)}
    return (result, massive, sinks) if return_scanners else result


def _decoder(model):
    tok = model.tokenizer
    if tok is None:
        return lambda ids: str(ids[0])
    return lambda ids: tok.decode(ids)
