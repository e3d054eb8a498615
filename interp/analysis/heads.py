"""Attention-head detectors with TransformerLens's `detect_head` semantics, and induction scores.

    detect_head(model, text, "previous_token_head")             # [layer, head] in [0, 1] ("mul")
    detect_head(model, text, my_pattern, error_measure="abs")   # a custom [pos, pos] lower-triangular pattern
    induction_scores(model, seq_len=50, batch=4)                # mean attention to the token after the earlier copy

A detection pattern is a [pos, pos] lower-triangular 0/1 matrix of where such a head should attend.
"mul" scores the share of a head's attention that falls on the pattern; "abs" is 1 minus the summed
absolute difference divided by the length, rounded to 3 decimals (TL's exact formula). Heads not asked
for score -1. Unlike TL, all heads of a layer are scored at once.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

HEAD_NAMES = ("previous_token_head", "duplicate_token_head", "induction_head")
ErrorMeasure = Literal["mul", "abs"]


def detection_pattern(name: str, tokens: Tensor) -> Tensor:
    """The [pos, pos] pattern of a named head type for one sequence of token ids [pos]."""
    tokens = tokens.reshape(-1).cpu()
    n = tokens.shape[0]
    if name == "previous_token_head":
        return torch.diag(torch.ones(n - 1), -1)
    same = (tokens[:, None] == tokens[None, :]).float().tril(-1)  # an earlier copy of the query's token
    if name == "duplicate_token_head":
        return same
    if name == "induction_head":  # the token after an earlier copy (never the first position)
        shifted = torch.zeros_like(same)
        shifted[:, 1:] = same[:, :-1]
        return shifted.tril()
    raise ValueError(f"unknown head type {name!r}; choose from {', '.join(HEAD_NAMES)} or pass a [pos, pos] tensor")


def _layer_heads(heads, n_layers: int, n_heads: int) -> dict[int, list[int]]:
    if heads is None:
        return {layer: list(range(n_heads)) for layer in range(n_layers)}
    if isinstance(heads, dict):
        return {int(k): list(v) for k, v in heads.items()}
    out: dict[int, list[int]] = {}
    for layer, head in heads:
        out.setdefault(int(layer), []).append(int(head))
    return out


def score_patterns(
    patterns: Tensor,
    pattern: Tensor,
    exclude_bos: bool = False,
    exclude_current_token: bool = False,
    error_measure: ErrorMeasure = "mul",
) -> Tensor:
    """Scores [...] of attention patterns [..., query, key] against one detection pattern [query, key]."""
    patterns, pattern = patterns.float(), pattern.float().to(patterns.device)
    keep = torch.ones_like(pattern)
    if exclude_bos:
        keep[:, 0] = 0
    if exclude_current_token:
        keep.fill_diagonal_(0)
    if error_measure == "mul":
        masked = patterns * keep
        return (masked * pattern).sum((-2, -1)) / masked.sum((-2, -1))
    if error_measure != "abs":
        raise ValueError(f"error_measure must be 'mul' or 'abs', not {error_measure!r}")
    diff = ((patterns - pattern).abs() * keep).sum((-2, -1)) / pattern.shape[0]
    return 1 - torch.round(diff * 1000) / 1000


def detect_head(
    model,
    seq: str | list[str],
    detection_pattern: Tensor | str,
    heads: list[tuple[int, int]] | dict[int, list[int]] | None = None,
    cache=None,
    *,
    exclude_bos: bool = False,
    exclude_current_token: bool = False,
    error_measure: ErrorMeasure = "mul",
) -> Tensor:
    """[layer, head] scores of how closely each head's attention on `seq` follows a detection pattern.

    `detection_pattern`: one of `HEAD_NAMES` or a [pos, pos] lower-triangular tensor. A list of texts
    (named patterns only) averages the per-text scores. `cache`: a cache of this one text (with or
    without its batch axis) to reuse. `heads`: (layer, head) pairs or {layer: [heads]}; others score -1.
    """
    named = isinstance(detection_pattern, str)
    if named and detection_pattern not in HEAD_NAMES:
        raise ValueError(f"detection_pattern must be a tensor or one of {', '.join(HEAD_NAMES)}")
    if isinstance(seq, list):
        if not named:
            raise ValueError("a custom pattern fits one sequence; pass one text with it")
        if cache is not None:
            raise ValueError("one cache cannot serve several texts; leave cache out with a list of texts")
        kw = dict(exclude_bos=exclude_bos, exclude_current_token=exclude_current_token, error_measure=error_measure)
        return torch.stack([detect_head(model, s, detection_pattern, heads, **kw) for s in seq]).mean(0)
    tokens = model.to_tokens(seq)
    if not 1 < tokens.shape[-1] < (model.n_ctx or 1 << 62):
        raise ValueError("the sequence must have at least 2 tokens and fit in the model's context")
    pattern = globals()["detection_pattern"](detection_pattern, tokens) if named else detection_pattern
    n = tokens.shape[-1]
    if pattern.shape != (n, n) or not torch.equal(pattern, pattern.tril()):
        raise ValueError(f"the detection pattern must be lower triangular, [{n}, {n}]; got {tuple(pattern.shape)}")
    if cache is None:
        _, cache = model.run_with_cache(
            tokens, names=lambda name: name.endswith("attn.hook_pattern"), return_logits=False
        )
    scores = -torch.ones(model.n_layers, model.n_heads)
    for layer, hs in _layer_heads(heads, model.n_layers, model.n_heads).items():
        layer_patterns = cache["pattern", layer]
        layer_patterns = layer_patterns[0] if layer_patterns.ndim == 4 else layer_patterns
        kw = dict(exclude_bos=exclude_bos, exclude_current_token=exclude_current_token, error_measure=error_measure)
        scores[layer, hs] = score_patterns(layer_patterns[hs], pattern, **kw).cpu()
    return scores


def repeated_random_tokens(model, seq_len: int, batch: int = 1, seed: int = 0, bos: bool | None = None) -> Tensor:
    """[batch, (1 +) 2 * seq_len]: random tokens repeated once, after a BOS token with `bos=True`
    (`bos=None`: when the tokenizer puts one in front of a text by itself)."""
    gen = torch.Generator().manual_seed(seed)
    low = 0 if model.d_vocab <= 1000 else 100  # skip the special tokens at the start of real vocabularies
    half = torch.randint(low, model.d_vocab, (batch, seq_len), generator=gen)
    tokens = torch.cat([half, half], dim=1)
    if bos is None:
        tok = model.tokenizer
        bos = bool(tok is not None and tok.bos_token_id is not None and model.to_tokens("a").shape[-1] > 1)
    if bos:
        bos_id = model.tokenizer.bos_token_id
        tokens = torch.cat([torch.full((batch, 1), bos_id), tokens], dim=1)
    return tokens.to(model.device)


def induction_scores(model, seq_len: int = 50, batch: int = 4, seed: int = 0, tokens: Tensor | None = None) -> Tensor:
    """[layer, head]: TL Main Demo's induction score, the mean over the batch and the stripe of attention
    from position t to t - seq_len + 1 (the token after the earlier copy of t's token when the input is
    [BOS, r, r]), on `tokens` or on fresh repeated random tokens (`repeated_random_tokens`, BOS first
    when the tokenizer has one, as TL's `generate_repeated_tokens` does)."""
    if tokens is None:
        tokens = repeated_random_tokens(model, seq_len, batch, seed, bos=_has_bos(model))
    else:
        seq_len = tokens.shape[-1] // 2
    _, cache = model.run_with_cache(tokens, names=lambda n: n.endswith("attn.hook_pattern"), return_logits=False)
    stripes = [
        cache["pattern", layer].diagonal(offset=1 - seq_len, dim1=-2, dim2=-1) for layer in range(model.n_layers)
    ]
    return torch.stack([s.float().mean((0, -1)) for s in stripes]).cpu()


def _has_bos(model) -> bool:
    tok = model.tokenizer
    return tok is not None and tok.bos_token_id is not None
