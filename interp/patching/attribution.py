"""Attribution patching: the first-order estimate of every activation-patching sweep from one clean
forward and one corrupted forward + backward.

    effect(site) ~= (clean_act - corrupted_act)[site] . d metric / d act [corrupted run]

summed over the site's features (and over the batch, since a sweep patches every row at once). Nanda's
"attribution patching" (2023); exact when the metric is linear in the activation (tested with a frozen
final-norm scale). The parameters' own gradients are never computed: the corrupted run starts its
graph at the embedding output.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from interp.patching.activation import _labels, baseline_and_clean
from interp.patching.result import PatchResult
from interp.patching.sites import HEAD_KINDS, Metric, Sweep, make_sweep, prepare_inputs, resolve_metric, scalar


@contextmanager
def _activation_grads_only(model) -> Iterator[None]:
    """Turn off parameter gradients; make the embedding output the leaf the graph starts from."""
    flags = [(p, p.requires_grad) for p in model.hf_model.parameters()]
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        with model.hooks([("hook_embed", lambda t, hook: t.detach().requires_grad_(True))]):
            yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


def _reduce(sweep: Sweep, delta: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """Sum (delta * grad) down to the sweep's per-layer shape."""
    prod = (delta.float() * grad.float()).sum(-1)  # features (d_model / d_head / key position)
    pos = torch.tensor(sweep.positions, device=prod.device)
    if sweep.per == "layer":
        return prod.sum()
    if sweep.per == "pos":
        return prod.sum(0)[pos]
    if sweep.kind == "pattern":  # [batch, head, query] -> [query, head]
        prod = prod.transpose(1, 2)
    return prod.sum((0, 1)) if sweep.per == "head" else prod.sum(0)[pos]


def attribution_patching(
    model,
    clean,
    corrupted,
    kinds: str | Sequence[str] = ("resid_pre", "attn_out", "mlp_out", "z"),
    metric: Metric | None = None,
    *,
    answer=None,
    wrong=None,
    per: str | None = None,
    layers: list[int] | None = None,
    positions: list[int] | None = None,
    fwd_hooks=(),
    prepend_bos: bool | None = None,
) -> PatchResult | dict[str, PatchResult]:
    """All the sweeps `activation_patching` would run for `kinds`, estimated to first order at once.

    Arguments as in `activation_patching` (`per` applies to the head kinds). Returns one `PatchResult`
    for a single kind, else {kind: PatchResult}; values are `baseline + estimated effect`.
    """
    single = isinstance(kinds, str)
    kinds = [kinds] if single else list(kinds)
    c_ids, c_mask, x_ids, x_mask = prepare_inputs(model, clean, corrupted, prepend_bos)
    metric = resolve_metric(model, metric, c_ids, c_mask, x_ids, x_mask, answer, wrong)
    sweeps = [
        make_sweep(model, k, per if per == "layer" or k in HEAD_KINDS else None, layers, positions, c_ids.shape[1])
        for k in kinds
    ]
    names = sorted({s.hook(l) for s in sweeps for l in s.layers})
    base, clean_value, clean_cache = baseline_and_clean(model, metric, c_ids, c_mask, x_ids, x_mask, names, fwd_hooks)
    with model.hooks(fwd_hooks), _activation_grads_only(model):
        _, acts, grads = model.run_with_grads(
            {"input_ids": x_ids, "attention_mask": x_mask},
            names=names,
            loss_fn=lambda logits, ids, mask: scalar(metric(logits)),
        )
    out = {}
    for sweep in sweeps:
        per_layer = []
        for l in sweep.layers:
            name = sweep.hook(l)
            if name not in grads:  # the metric does not depend on it (e.g. nothing after it reaches the logits)
                per_layer.append(torch.zeros(sweep.shape()[1:]))
                continue
            per_layer.append(_reduce(sweep, clean_cache[name] - acts[name], grads[name]).cpu())
        values = base + torch.stack(per_layer)
        out[sweep.kind] = PatchResult(
            values, sweep.dims, sweep.kind, base, clean_value, _labels(model, c_ids, sweep), "attribution"
        )
    return out[kinds[0]] if single else out
