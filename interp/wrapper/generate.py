"""Generation through HF's own KV-cached `generate`, with our hooks active and an optional cache.

    text = model.generate("The capital of France is", max_new_tokens=5)          # greedy; text in, text out
    tokens = model.generate("The capital of France is", 5, return_type="tokens")  # ids [batch, prompt + new]
    with_steer = model.generate(prompt, 20, fwd_hooks=[("blocks.10.hook_resid_post", add_vector)])
    tokens, cache = model.generate(ids, 10, names="blocks.*.hook_resid_post")

Nothing is re-implemented: `hf_model.generate` runs the model, so greedy output with no hooks equals
it exactly. Hooks see each step's tensors: the whole prompt on the first step, then one new position
per step (with the KV cache on). The cache joins the steps along the position axis, so it covers the
prompt and every generated token but the last (which was never fed back): `cache.tokens` are those
positions. Attention patterns and scores grow a key axis per step; each step's keys are placed at the
positions they hold, zeros elsewhere (what a causal pattern holds there anyway; for scores, a full
forward holds the mask value there instead). Batches of texts
are left-padded for generation (HF's convention), and so is the cache.

TransformerLens's keywords are accepted: `input=` (the prompt), `return_type` ("input": text for text
input, ids for ids; "str"; "tokens"), `stop_at_eos`, `eos_token_id`, `use_past_kv_cache`, `verbose` (no
progress bar is drawn here), `temperature`, `top_k`, `top_p`, `freq_penalty` (as TL: when sampling only,
logits / temperature - penalty × count of the token so far). One difference is kept: sampling is off unless
`do_sample=True` (TL samples by default), so a call gives the same output every time.
"""

from __future__ import annotations

import copy
from typing import Literal

import torch
from torch import Tensor

from interp.cache import ActivationCache


def _left_pad(ids: Tensor, mask: Tensor, pad: int) -> tuple[Tensor, Tensor]:
    """Move each row's right padding to the left (generation appends on the right)."""
    if bool(mask.all()):
        return ids, mask
    out, out_mask = torch.full_like(ids, pad), torch.zeros_like(mask)
    for i, (row, m) in enumerate(zip(ids, mask)):
        n = int(m.sum())
        out[i, ids.shape[1] - n :] = row[:n]
        out_mask[i, ids.shape[1] - n :] = 1
    return out, out_mask


def _join(name: str, parts: list[Tensor]) -> Tensor:
    """Concatenate one hook's per-step tensors along its position axis."""
    if name.endswith(("hook_pattern", "hook_attn_scores")):  # [batch, head, query, key]
        # A step's keys end at its last query position (a sliding-window cache keeps only the last
        # few): align them there, zeros elsewhere.
        total = sum(p.shape[2] for p in parts)
        placed, end = [], 0
        for p in parts:
            end += p.shape[2]
            placed.append(torch.nn.functional.pad(p, (end - p.shape[-1], total - end)))
        return torch.cat(placed, dim=2)
    return torch.cat(parts, dim=1)


class FrequencyPenalty:
    """TransformerLens's `freq_penalty`: each logit, after the temperature, minus penalty × the number of times
    its token occurs so far. HF runs this before its temperature warper, hence the factor `temperature`."""

    def __init__(self, penalty: float, temperature: float = 1.0):
        self.penalty, self.temperature = penalty, temperature

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        counts = torch.zeros_like(scores)
        ids = input_ids.clamp(max=scores.shape[-1] - 1)
        counts.scatter_add_(1, ids, torch.ones_like(ids, dtype=scores.dtype))
        return scores - self.penalty * self.temperature * counts


def generate(
    model,
    inputs,
    max_new_tokens: int = 20,
    *,
    names=None,
    fwd_hooks=(),
    do_sample: bool = False,
    prepend_bos: bool | None = None,
    return_type: Literal["input", "str", "tokens"] = "input",
    stop_at_eos: bool = True,
    use_past_kv_cache: bool = True,
    verbose: bool = False,
    **generate_kwargs,
):
    """The prompt and its continuation from `hf_model.generate`, with `fwd_hooks` active throughout:
    text for text input, token ids [batch, prompt + new] for ids (see `return_type`).

    `names` (names, globs or a predicate, as in `run_with_cache`): also return a cache of those hooks
    over every position that was run. Other keyword arguments go to HF's `generate` (e.g.
    `temperature`, `top_k`, `eos_token_id`); sampling is off unless `do_sample=True`.
    `stop_at_eos=False` keeps generating past an end-of-text token; `use_past_kv_cache=False` reruns the
    whole sequence at every step.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    if return_type not in ("input", "str", "tokens"):
        raise ValueError(f"return_type must be 'input', 'str' or 'tokens', not {return_type!r}")
    freq_penalty = float(generate_kwargs.pop("freq_penalty", 0.0) or 0.0)
    if freq_penalty < 0:
        raise ValueError(f"freq_penalty must be at least 0, got {freq_penalty}")
    if freq_penalty and do_sample:  # TL applies it only when sampling, after the temperature
        from transformers import LogitsProcessorList

        t = float(generate_kwargs.get("temperature", 1.0) or 1.0)
        extra = list(generate_kwargs.pop("logits_processor", None) or [])
        generate_kwargs["logits_processor"] = LogitsProcessorList([*extra, FrequencyPenalty(freq_penalty, t)])
    generate_kwargs.pop("padding_side", None)  # generation always left-pads
    as_text = return_type == "str" or (return_type == "input" and isinstance(inputs, (str, list, tuple)))
    if not stop_at_eos:
        config = copy.deepcopy(model.hf_model.generation_config)
        config.eos_token_id = None
        generate_kwargs["generation_config"] = config
    ids, mask = model.to_tokens(inputs, prepend_bos=prepend_bos, return_mask=True)
    pad = model.tokenizer.pad_token_id if model.tokenizer is not None else None
    pad = pad if pad is not None else (model.config.eos_token_id or 0)
    if isinstance(pad, list):
        pad = pad[0]
    ids, mask = _left_pad(ids, mask, pad)
    steps: dict[str, list[Tensor]] = {}
    points = [] if names is None else model.hook_points(names)

    def record(t: Tensor, hook) -> None:
        steps.setdefault(hook.name, []).append(t.detach())

    hooks = [*fwd_hooks, *[(p.name, record) for p in points]]
    with torch.no_grad(), model.hooks(hooks):
        out = model.hf_model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_new_tokens,
            do_sample=do_sample,
            pad_token_id=pad,
            use_cache=use_past_kv_cache,
            **generate_kwargs,
        )
    result = _decoded(model, out, isinstance(inputs, str)) if as_text else out
    if names is None:
        return result
    data = {p.name: _join(p.name, steps[p.name]) for p in points if p.name in steps}
    n = out.shape[1] - 1  # every step fed one more position; the last token was never fed
    full_mask = torch.cat([mask, torch.ones_like(out[:, mask.shape[1] :])], dim=1)
    return result, ActivationCache(data, out[:, :n], full_mask[:, :n], model)


def _decoded(model, out: Tensor, single: bool) -> str | list[str]:
    """TransformerLens's text output: each row decoded without special tokens (so without padding)."""
    if model.tokenizer is None:
        raise ValueError("text output needs a tokenizer; pass return_type='tokens'")
    texts = [model.tokenizer.decode(row, skip_special_tokens=True) for row in out]
    return texts[0] if single else texts
