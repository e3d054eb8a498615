"""Interventions through hooks, each measured as perplexity on a corpus.

- Massive activations (Sun et al.'s `--exp3`): at the output of the first layer where they appear, overwrite
  only the entries that are massive in the sequence at hand with 0 (`zero`), with their mean over a
  calibration set, separately for the start token and the other tokens (`mean`), or zero as many random
  non-massive channels at the same positions (`random`, the control). `pos0_mean` replaces the whole
  position-0 hidden state by its calibration mean (the Spike paper's "implicit parameter" check).
- StreamingLLM: window attention with and without the first k tokens kept, imposed as a mask on every
  layer's `attn.hook_attn_scores` in one forward (original positions kept).

Hooks live only inside `model.hooks(...)`, so none survive a call, even one that raises.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from interp.infra import logs
from interp.probes.massive import MassiveCriterion, massive_mask
from interp.probes.sinks import streaming_hook

Mode = Literal["zero", "mean", "random", "pos0_mean"]
MODES: tuple[str, ...] = ("zero", "mean", "random", "pos0_mean")


def check_tokens(tokens: Tensor) -> Tensor:
    """A non-empty [n_seq, pos] LongTensor of at least two positions, or a clear error."""
    if not isinstance(tokens, Tensor) or tokens.ndim != 2:
        raise ValueError("tokens must be a LongTensor [n_seq, pos]; build one with interp.data.resolve_corpus")
    if tokens.shape[0] == 0 or tokens.shape[1] < 2:
        raise ValueError(f"empty corpus: got tokens of shape {tuple(tokens.shape)}; need >= 1 sequence of >= 2 tokens "
                         "(check the --data source and --max-tokens)")
    return tokens


@torch.no_grad()
def perplexity(model, tokens: Tensor, mask: Tensor | None = None, fwd_hooks=(), batch_size: int = 8,
               min_position: int = 0, progress: bool = False, desc: str = "perplexity") -> dict:
    """Next-token perplexity over non-padded targets (and target positions >= `min_position`).

    Returns {"ppl", "loss", "n_tokens"}. `fwd_hooks` are installed for the whole evaluation only.
    """
    check_tokens(tokens)
    mask = torch.ones_like(tokens) if mask is None else mask
    total, count = 0.0, 0
    with model.hooks(fwd_hooks):
        for i in logs.progress(range(0, tokens.shape[0], batch_size), desc=desc, enabled=progress, leave=False):
            ids = tokens[i : i + batch_size].to(model.device)
            m = mask[i : i + batch_size].to(model.device)
            logits = model.hf_model(input_ids=ids, attention_mask=m, use_cache=False).logits.float()
            ce = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
            keep = m[:, 1:].to(torch.bool).clone()
            if min_position:
                keep[:, : max(0, min_position - 1)] = False  # target t+1 < min_position
            keep = keep.flatten()
            total += float(ce[keep].double().sum())
            count += int(keep.sum())
    if count == 0:
        raise ValueError("no target tokens to score (all padded, or min_position beyond the sequence length)")
    loss = total / count
    return {"ppl": math.exp(loss), "loss": loss, "n_tokens": count}


@torch.no_grad()
def calibration_means(model, tokens: Tensor, layer: int, criterion: MassiveCriterion, batch_size: int = 8) -> dict:
    """Means for the `mean` and `pos0_mean` interventions at `layer`, from a calibration corpus.

    Returns {"start": [d_model] (position-0 hidden state mean), "other": {channel: mean of that channel
    over its massive entries at positions >= 1}, "start_massive": {channel: mean at position 0 over
    sequences where it is massive}}.
    """
    check_tokens(tokens)
    name = f"blocks.{layer}.hook_resid_post"
    start_sum, n_seq = None, 0
    sums: dict[tuple[bool, int], list[float]] = {}
    for i in range(0, tokens.shape[0], batch_size):
        ids = tokens[i : i + batch_size].to(model.device)
        _, cache = model.run_with_cache(ids, names=name, return_logits=False)
        h = cache[name].float()
        massive, _, _ = massive_mask(h, None, criterion)
        start_sum = h[:, 0].sum(0) if start_sum is None else start_sum + h[:, 0].sum(0)
        n_seq += h.shape[0]
        for b, p, c in massive.nonzero().tolist():
            acc = sums.setdefault((p == 0, c), [0.0, 0])
            acc[0] += float(h[b, p, c])
            acc[1] += 1
    return {
        "start": start_sum / n_seq,
        "start_massive": {c: s / n for (is0, c), (s, n) in sums.items() if is0},
        "other": {c: s / n for (is0, c), (s, n) in sums.items() if not is0},
    }


def massive_ablation_hook(mode: Mode, criterion: MassiveCriterion, means: dict | None = None,
                          massive_channels: Sequence[int] = (), seed: int = 0):
    """A `hook_resid_post` function that applies one intervention to the massive entries of each batch.

    `means` comes from `calibration_means` (needed for `mean` and `pos0_mean`); `massive_channels` are the
    channels known to be massive (excluded from the random control's draw).
    """
    if mode not in MODES:
        raise ValueError(f"unknown ablation mode {mode!r}; choose one of {', '.join(MODES)}")
    if mode in ("mean", "pos0_mean") and means is None:
        raise ValueError(f"mode {mode!r} needs calibration means (interp.probes.ablation.calibration_means)")
    gen = torch.Generator().manual_seed(seed)

    def fn(h: Tensor, hook) -> Tensor:
        h = h.clone()
        if mode == "pos0_mean":
            h[:, 0] = means["start"].to(h)
            return h
        massive, _, _ = massive_mask(h, None, criterion)
        if mode == "zero":
            h[massive] = 0
        elif mode == "mean":
            for b, p, c in massive.nonzero().tolist():
                table = means["start_massive"] if p == 0 else means["other"]
                fallback = means["other"] if p == 0 else means["start_massive"]
                value = table.get(c, fallback.get(c, means["start"][c].item()))
                h[b, p, c] = value
        else:  # random: as many non-massive channels, zeroed at the same positions
            avoid = set(massive_channels) | set(massive.nonzero()[:, 2].tolist())
            for b, p in massive.any(-1).nonzero().tolist():
                k = int(massive[b, p].sum())
                pool = torch.tensor([c for c in range(h.shape[-1]) if c not in avoid])
                pick = pool[torch.randperm(len(pool), generator=gen)[:k]]
                h[b, p, pick.to(h.device)] = 0
        return h

    return fn


def massive_ablations(model, tokens: Tensor, layer: int, criterion: MassiveCriterion, calib_tokens: Tensor,
                      massive_channels: Sequence[int] = (), modes: Sequence[str] = MODES, batch_size: int = 8,
                      progress: bool = False) -> dict:
    """Perplexity of the original model and of each intervention at `layer`: {mode: {"ppl", "loss", ...}}."""
    if not 0 <= layer < model.n_layers:
        raise ValueError(f"layer {layer} out of range 0..{model.n_layers - 1}")
    means = calibration_means(model, calib_tokens, layer, criterion, batch_size)
    out = {"layer": layer, "original": perplexity(model, tokens, batch_size=batch_size, progress=progress, desc="ppl original")}
    for mode in modes:
        fn = massive_ablation_hook(mode, criterion, means, massive_channels)
        out[mode] = perplexity(model, tokens, fwd_hooks=[(f"blocks.{layer}.hook_resid_post", fn)],
                               batch_size=batch_size, progress=progress, desc=f"ppl {mode}")
    return out


def streaming_test(model, tokens: Tensor, window: int, sinks: Sequence[int] = (0, 4), batch_size: int = 4,
                   progress: bool = False) -> dict:
    """StreamingLLM: perplexity on target positions >= `window` under full attention and under window
    attention keeping `k` initial tokens, for each k in `sinks` (window includes the current token)."""
    if tokens.shape[1] <= window:
        raise ValueError(f"sequences of {tokens.shape[1]} tokens are not longer than the window {window}; "
                         "use longer sequences (--stream-ctx) or a smaller window")
    out = {"window": window, "ctx": int(tokens.shape[1]),
           "full": perplexity(model, tokens, batch_size=batch_size, min_position=window, progress=progress, desc="ppl full")}
    for k in sinks:
        hook = ("blocks.*.attn.hook_attn_scores", streaming_hook(window, k))
        out[f"window+{k}sink"] = perplexity(model, tokens, fwd_hooks=[hook], batch_size=batch_size,
                                            min_position=window, progress=progress, desc=f"ppl window+{k}")
    return out
