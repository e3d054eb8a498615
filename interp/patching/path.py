"""Path patching (Wang et al. 2022, "Interpretability in the Wild"): the effect of one sender head on
chosen receivers only, through the residual stream between them.

For each sender head h, on K stacked copies of the corrupted batch:
1. run with every attention head's output (`hook_z`) frozen at its corrupted value, except h, which
   takes its clean value; MLPs recompute (as in the paper). Record the receivers' inputs: the q, k
   and/or v of each receiver head, or the final residual stream for the receiver "logits".
2. run the corrupted input again with only those receiver inputs replaced by the recorded ones, and
   score it with the metric ("logits": step 1's own logits are the answer).

Result: [sender layer, sender head] over the layers before the first receiver. Under grouped-query
attention a receiver's k/v is its key/value head, which the other query heads of its group share.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from interp.patching.activation import baseline_and_clean
from interp.patching.result import PatchResult
from interp.patching.sites import Metric, prepare_inputs, resolve_metric, score_copies

_HEAD = re.compile(r"^L(\d+)H(\d+)$")


def _parse(model, receivers) -> list[tuple[int, int]] | str:
    if receivers == "logits":
        return "logits"
    out = []
    for r in [receivers] if isinstance(receivers, str) else receivers:
        if isinstance(r, str):
            m = _HEAD.match(r)
            if not m:
                raise ValueError(f"receiver {r!r}: write heads as 'L5H2' or (5, 2), or pass receivers='logits'")
            r = (int(m[1]), int(m[2]))
        layer, head = int(r[0]) % model.n_layers, int(r[1])
        if not 0 <= head < model.n_heads:
            raise ValueError(f"receiver head {head} is out of range (the model has {model.n_heads} heads)")
        out.append((layer, head))
    if not out:
        raise ValueError("no receivers given: pass heads like ['L5H2'] or receivers='logits'")
    return out


def path_patching(
    model,
    clean,
    corrupted,
    receivers: str | Sequence = "logits",
    metric: Metric | None = None,
    *,
    answer=None,
    wrong=None,
    receiver_input: str = "q",
    max_rows: int = 64,
    fwd_hooks=(),
    prepend_bos: bool | None = None,
) -> PatchResult:
    """Sweep every sender head before the receivers; see the module docstring for the two runs.

    `receiver_input`: which inputs of receiver heads carry the path, any of "q", "k", "v" (e.g. "qkv").
    """
    recv = _parse(model, receivers)
    if not set(receiver_input) <= set("qkv") or not receiver_input:
        raise ValueError(f"receiver_input={receiver_input!r}: use letters from 'qkv', e.g. 'q' or 'kv'")
    c_ids, c_mask, x_ids, x_mask = prepare_inputs(model, clean, corrupted, prepend_bos)
    metric = resolve_metric(model, metric, c_ids, c_mask, x_ids, x_mask, answer, wrong)
    n_send = model.n_layers if recv == "logits" else min(l for l, _ in recv)
    if n_send == 0:
        raise ValueError("the receivers are in layer 0: no head comes before them")
    z_names = [f"blocks.{l}.attn.hook_z" for l in range(n_send if recv == "logits" else max(l for l, _ in recv))]
    base, clean_value, clean_cache = baseline_and_clean(model, metric, c_ids, c_mask, x_ids, x_mask, z_names, fwd_hooks)
    with torch.no_grad(), model.hooks(fwd_hooks):
        _, corrupt_cache = model.run_with_cache({"input_ids": x_ids, "attention_mask": x_mask}, names=z_names)
    group = model.n_heads // model.n_kv_heads
    recv_sites = (
        []
        if recv == "logits"
        else [(f"blocks.{l}.attn.hook_{x}", h if x == "q" else h // group) for l, h in recv for x in receiver_input]
    )
    b = c_ids.shape[0]
    senders = [(l, h) for l in range(n_send) for h in range(model.n_heads)]
    per_run = max(1, max_rows // b)
    values = []
    for start in range(0, len(senders), per_run):
        chunk = senders[start : start + per_run]
        k = len(chunk)
        recorded: dict[str, torch.Tensor] = {}

        def freeze(z, hook, chunk=chunk):
            z = corrupt_cache[hook.name].repeat(len(chunk), *[1] * (z.ndim - 1)).to(z.dtype)
            copies = z.unflatten(0, (len(chunk), b))
            for i, (l, h) in enumerate(chunk):
                if l == hook.layer:
                    copies[i][:, :, h] = clean_cache[hook.name][:, :, h]
            return z

        def record(t, hook):
            recorded[hook.name] = t.clone()  # noqa: B023

        hooks = [*fwd_hooks, *[(n, freeze) for n in z_names], *[(n, record) for n, _ in recv_sites]]
        if recv == "logits":
            values += score_copies(model, x_ids, x_mask, k, metric, hooks)
            continue
        with torch.no_grad(), model.hooks(hooks):  # only the receivers' inputs are needed from this run
            model.hf_model(
                input_ids=x_ids.repeat(k, 1), attention_mask=x_mask.repeat(k, 1), use_cache=False, logits_to_keep=1
            )

        def replace(t, hook):
            t = t.clone()
            for name, head in recv_sites:
                if name == hook.name:
                    t[:, :, head] = recorded[name][:, :, head]  # noqa: B023
            return t

        hooks = [*fwd_hooks, *[(n, replace) for n in sorted({n for n, _ in recv_sites})]]
        values += score_copies(model, x_ids, x_mask, k, metric, hooks)
    out = torch.tensor(values).view(n_send, model.n_heads)
    name = "logits" if recv == "logits" else ",".join(f"L{l}H{h}" for l, h in recv) + f".{receiver_input}"
    labels = {"layer": [str(l) for l in range(n_send)], "head": [str(h) for h in range(model.n_heads)]}
    return PatchResult(out, ("layer", "head"), f"path:heads->{name}", base, clean_value, labels, "path")
