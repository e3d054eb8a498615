"""Activation patching: run the corrupted input with one activation taken from the clean run, per site.

    from interp.patching import activation_patching
    res = activation_patching(model, "The Eiffel Tower is in", "The Colosseum is in", kind="resid_pre")
    res.values.shape        # [layer, pos]; res.normalized(): 1 where the clean answer comes back
    res.heatmap().show()

Sites of one layer run together: K copies of the corrupted batch go through one forward, copy k
patched at site k (`max_rows` bounds K x batch). This is the same arithmetic as one forward per site
(TransformerLens's `patching.get_act_patch_*`), with far fewer, larger forwards.

A patch in block l changes nothing before it, so each run starts at block l from the corrupted run's
cached residual there (`interp.wrapper.layer_range`): a full layers x positions sweep runs about half
the blocks a from-the-embeddings sweep runs. Hooks the caller passes (`fwd_hooks`) act on that
corrupted run too, so their effect before layer l is in the residual each run starts from.

Without such hooks (and for every kind but `pattern`), a patch also changes nothing before its first
changed position: each copy runs only its positions from there on, packed with the layer's other copies
into one sequence over the corrupted run's key/value cache (`interp.patching.suffix`); a site whose clean
activation equals the corrupted one (the positions before the prompts' first difference) changes nothing
at all and scores the corrupted run's metric without a forward.
"""

from __future__ import annotations

import torch
from torch import Tensor

from interp.patching.result import PatchResult
from interp.patching.sites import Metric, Sweep, make_sweep, prepare_inputs, resolve_metric, scalar, score_copies
from interp.patching.suffix import SuffixRuns, can_pack, first_change, suffix_chunks


def _labels(model, ids: Tensor, sweep: Sweep) -> dict[str, list[str]]:
    labels = {"layer": [str(l) for l in sweep.layers], "head": [str(h) for h in range(sweep.n_heads)]}
    if model.tokenizer is not None:
        words = model.to_str_tokens(ids[0])
        labels["pos"] = [f"{p}:{words[p]}" for p in sweep.positions]
    return labels


def baseline_and_clean(model, metric: Metric, c_ids, c_mask, x_ids, x_mask, names, fwd_hooks=(), starts=None):
    """(metric on corrupted, metric on clean, clean cache at `names`) with the caller's hooks active.

    `starts` (hook names): also return the corrupted run's cache at those names (the residuals sweeps start from).
    """
    with torch.no_grad(), model.hooks(fwd_hooks):
        clean_logits, cache = model.run_with_cache({"input_ids": c_ids, "attention_mask": c_mask}, names=names)
        x_inputs = {"input_ids": x_ids, "attention_mask": x_mask}
        corrupted, x_cache = model.run_with_cache(x_inputs, names=starts or [])
    out = scalar(metric(corrupted)).item(), scalar(metric(clean_logits)).item(), cache
    return out if starts is None else (*out, x_cache)


def activation_patching(
    model,
    clean,
    corrupted,
    kind: str = "resid_pre",
    metric: Metric | None = None,
    *,
    answer=None,
    wrong=None,
    per: str | None = None,
    layers: list[int] | None = None,
    positions: list[int] | None = None,
    fwd_hooks=(),
    max_rows: int = 64,
    prepend_bos: bool | None = None,
    start_from_cache: bool = True,
) -> PatchResult:
    """Sweep one kind of activation over layers x positions (or heads), patching clean into corrupted.

    `metric(logits) -> scalar` scores a run (logits [batch, pos, vocab] of the original batch size);
    by default the logit difference between `answer` and `wrong` at each row's last token, which
    default to the clean and the corrupted run's top predictions. `fwd_hooks` stay active in every
    run (e.g. to freeze a norm's scale); they see the stacked copies, [copies * batch, ...]. See
    `interp.patching.sites` for kinds and `per`. `start_from_cache=False` runs every copy from the
    embeddings (the slow reference; same numbers up to float rounding).
    """
    c_ids, c_mask, x_ids, x_mask = prepare_inputs(model, clean, corrupted, prepend_bos)
    metric = resolve_metric(model, metric, c_ids, c_mask, x_ids, x_mask, answer, wrong)
    sweep = make_sweep(model, kind, per, layers, positions, c_ids.shape[1])
    names = [sweep.hook(l) for l in sweep.layers]
    starts = [f"blocks.{l}.hook_resid_pre" for l in sweep.layers] if start_from_cache else None
    packed = start_from_cache and can_pack(model, sweep, fwd_hooks, c_ids.shape[1])
    if packed:
        starts = sorted(set(starts) | set(names))  # the corrupted activations tell which patches change nothing
    out = baseline_and_clean(model, metric, c_ids, c_mask, x_ids, x_mask, names, fwd_hooks, starts)
    base, clean_value, cache = out[:3]
    b, per_run = c_ids.shape[0], max(1, max_rows // c_ids.shape[0])
    if packed:
        resid = {l: out[3]["resid_pre", l] for l in sweep.layers}
        runs = SuffixRuns(model, x_ids, x_mask, metric, resid)
        packed = runs.complete
    values = []
    if packed:
        srcs = {layer: cache[sweep.hook(layer)] for layer in sweep.layers}
        live = [
            (layer, site, f)
            for layer in sorted(set(sweep.layers))
            for site in sweep.sites()
            if (f := first_change(sweep, site, srcs[layer], out[3][sweep.hook(layer)])) is not None
        ]
        scores = {}
        for chunk in suffix_chunks(live, c_ids.shape[1], b, max_rows):
            scores.update(zip([(layer, site) for layer, site, _ in chunk], runs.scores(sweep, chunk, srcs)))
        values = [scores.get((layer, site), base) for layer in sweep.layers for site in sweep.sites()]
    for layer in [] if packed else sweep.layers:
        src, sites = cache[sweep.hook(layer)], sweep.sites()
        for start in range(0, len(sites), per_run):
            chunk = sites[start : start + per_run]

            def patch(t, hook, chunk=chunk, src=src):
                t = t.clone()
                copies = t.unflatten(0, (len(chunk), b))
                for i, site in enumerate(chunk):
                    idx = sweep.index(site)
                    copies[i][idx] = src[idx]
                return t

            hooks = [*fwd_hooks, (sweep.hook(layer), patch)]
            start = (layer, out[3]["resid_pre", layer]) if start_from_cache else None
            values += score_copies(model, x_ids, x_mask, len(chunk), metric, hooks, start)
    out = torch.tensor(values).view(sweep.shape())
    return PatchResult(out, sweep.dims, kind, base, clean_value, _labels(model, c_ids, sweep), "activation")
