"""What a patching sweep can patch, how its inputs are checked, and the metric it scores with.

Kinds and their sweeps (TransformerLens's `patching` module names the same ones):
- per position, axes (layer, pos): resid_pre, resid_mid, resid_post, attn_out, mlp_out
- per head, axes (layer, head) or with `per="pos_head"` (layer, pos, head): z, q, result (query heads),
  k, v (key/value heads: n_kv_heads under grouped-query attention), pattern (query heads; "pos" is the
  query position)
- `per="layer"`, axes (layer,): the whole activation of a layer at once (every position and head)
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass

import torch
from torch import Tensor

from interp.wrapper.layer_range import run_from_layer

Metric = Callable[[Tensor], Tensor]
POS_KINDS = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out")
HEAD_KINDS = ("z", "q", "k", "v", "result", "pattern")
_HOOK = {
    "resid_pre": "hook_resid_pre",
    "resid_mid": "hook_resid_mid",
    "resid_post": "hook_resid_post",
    "attn_out": "hook_attn_out",
    "mlp_out": "hook_mlp_out",
    "z": "attn.hook_z",
    "q": "attn.hook_q",
    "k": "attn.hook_k",
    "v": "attn.hook_v",
    "result": "attn.hook_result",
    "pattern": "attn.hook_pattern",
}


@dataclass(frozen=True)
class Sweep:
    """One kind of site over layers: which hook, which axes, and the index of each site."""

    kind: str
    per: str
    layers: list[int]
    positions: list[int]
    n_heads: int

    def hook(self, layer: int) -> str:
        return f"blocks.{layer}.{_HOOK[self.kind]}"

    @property
    def dims(self) -> tuple[str, ...]:
        return {
            "layer": ("layer",),
            "pos": ("layer", "pos"),
            "head": ("layer", "head"),
            "pos_head": ("layer", "pos", "head"),
        }[self.per]

    def sites(self) -> list[tuple]:
        """Per layer, the sites in sweep order: (pos,), (head,) or (pos, head)."""
        if self.per == "layer":
            return [()]
        if self.per == "pos":
            return [(p,) for p in self.positions]
        if self.per == "head":
            return [(h,) for h in range(self.n_heads)]
        return [(p, h) for p in self.positions for h in range(self.n_heads)]

    def index(self, site: tuple) -> tuple:
        """Index into one [batch, ...] activation selecting a site (the batch axis kept)."""
        all_ = slice(None)
        if self.per == "layer":
            return (all_,)
        if self.per == "pos":
            return (all_, site[0])
        if self.kind == "pattern":  # [batch, head, query, key]
            return (all_, site[0]) if self.per == "head" else (all_, site[1], site[0])
        return (all_, all_, site[0]) if self.per == "head" else (all_, site[0], site[1])

    def shape(self) -> tuple[int, ...]:
        sizes = {"layer": len(self.layers), "pos": len(self.positions), "head": self.n_heads}
        return tuple(sizes[d] for d in self.dims)


def make_sweep(model, kind: str, per: str | None, layers, positions, n_pos: int) -> Sweep:
    """Check a sweep's arguments against the model and resolve defaults (all layers, all positions)."""
    if kind not in POS_KINDS + HEAD_KINDS:
        raise ValueError(f"unknown patching kind {kind!r}; choose from {', '.join(POS_KINDS + HEAD_KINDS)}")
    per = per or ("pos" if kind in POS_KINDS else "head")
    allowed = ("pos", "layer") if kind in POS_KINDS else ("head", "pos_head", "layer")
    if per not in allowed:
        raise ValueError(f"per={per!r} does not fit kind {kind!r}; use one of {allowed}")
    if kind == "resid_mid" and model.adapter.is_parallel(model.config):
        raise ValueError("this model has a parallel residual: there is no resid_mid; patch resid_pre or attn_out")
    layers = list(range(model.n_layers)) if layers is None else [l % model.n_layers for l in layers]
    positions = list(range(n_pos)) if positions is None else [p % n_pos for p in positions]
    n_heads = model.n_kv_heads if kind in ("k", "v") else model.n_heads
    return Sweep(kind, per, layers, positions, n_heads)


def prepare_inputs(model, clean, corrupted, prepend_bos=None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Tokens and masks of both inputs, which must line up position by position."""
    c_ids, c_mask = model.to_tokens(clean, prepend_bos=prepend_bos, return_mask=True)
    x_ids, x_mask = model.to_tokens(corrupted, prepend_bos=prepend_bos, return_mask=True)
    if c_ids.shape != x_ids.shape:
        raise ValueError(
            f"clean and corrupted inputs differ in shape ({tuple(c_ids.shape)} vs {tuple(x_ids.shape)} tokens); "
            "patching swaps activations position by position: use prompts of the same token length "
            "(compare model.to_str_tokens of each)"
        )
    if not torch.equal(c_mask, x_mask):
        raise ValueError(
            "clean and corrupted inputs have padding in different places; give each pair equal token lengths"
        )
    return c_ids, c_mask, x_ids, x_mask


def scalar(value, where: str = "metric") -> Tensor:
    """The metric's value as a 0-d tensor, or a clear error when it is not one number."""
    if not isinstance(value, Tensor):
        value = torch.as_tensor(value, dtype=torch.float32)
    if value.numel() != 1:
        raise ValueError(
            f"the {where} returned a tensor of shape {tuple(value.shape)}; it must return one number "
            "(reduce over the batch, e.g. with .mean())"
        )
    return value.reshape(())


def last_positions(mask: Tensor) -> Tensor:
    """[batch]: index of each row's last real token (right padding)."""
    return mask.sum(1) - 1


class LogitDiff:
    """metric(logits) = mean over the batch of logit[answer] - logit[wrong] at each row's last token.

    It reads the logits of a few positions only (`keep`), so sweeps ask the model for just those
    (HF's `logits_to_keep`) and call `on_kept`: a 49k-word unembedding is a fifth of SmolLM2's forward.
    """

    def __init__(self, answer: Tensor, wrong: Tensor, mask: Tensor):
        self.answer, self.wrong = answer.long(), wrong.long()
        self.last = last_positions(mask)
        self.keep = torch.unique(self.last)

    def _diff(self, final: Tensor) -> Tensor:
        a, w = self.answer.to(final.device)[:, None], self.wrong.to(final.device)[:, None]
        return (final.gather(1, a) - final.gather(1, w)).mean()

    def __call__(self, logits: Tensor) -> Tensor:
        return self._diff(logits[torch.arange(logits.shape[0], device=logits.device), self.last.to(logits.device)])

    def on_kept(self, kept: Tensor) -> Tensor:
        """The metric from logits at `keep` positions only: [batch, len(keep), vocab]."""
        idx = torch.searchsorted(self.keep, self.last).to(kept.device)
        return self._diff(kept[torch.arange(kept.shape[0], device=kept.device), idx])


def logit_diff_metric(answer: Tensor, wrong: Tensor, mask: Tensor) -> Metric:
    """The logit-difference metric (see `LogitDiff`)."""
    return LogitDiff(answer, wrong, mask)


def score_copies(model, ids: Tensor, mask: Tensor, k: int, metric: Metric, hooks=(), start=None) -> list[float]:
    """Metric of each of k stacked copies of a batch run once with `hooks` (which see all copies).

    `start=(layer, resid)`: the run begins at block `layer` from `resid` [batch, pos, d_model] (the
    residual stream there, the same for every copy), skipping the blocks before it.
    """
    b = ids.shape[0]
    kw = {"logits_to_keep": metric.keep.to(ids.device)} if isinstance(metric, LogitDiff) else {}
    with ExitStack() as stack:
        stack.enter_context(torch.no_grad())
        if start is not None:
            stack.enter_context(run_from_layer(model, start[0], start[1].repeat(k, 1, 1)))
        stack.enter_context(model.hooks(hooks))
        logits = model.hf_model(
            input_ids=ids.repeat(k, 1), attention_mask=mask.repeat(k, 1), use_cache=False, **kw
        ).logits
    score = metric.on_kept if kw else metric
    return [scalar(score(logits[i * b : (i + 1) * b])).item() for i in range(k)]


def default_metric(model, c_ids, c_mask, x_ids, x_mask, answer=None, wrong=None) -> Metric:
    """Logit difference between the clean and corrupted answers: given, or each run's top next token."""

    def ids_of(tok, ref_ids, ref_mask):
        if tok is None:
            with torch.no_grad():
                logits = model.hf_model(input_ids=ref_ids, attention_mask=ref_mask, use_cache=False).logits
            return logits[torch.arange(len(ref_ids)), last_positions(ref_mask)].argmax(-1)
        if isinstance(tok, str):
            tok = model.to_single_token(tok)
        return torch.as_tensor(tok, device=c_ids.device).expand(len(c_ids)).long()

    a, w = ids_of(answer, c_ids, c_mask), ids_of(wrong, x_ids, x_mask)
    if torch.equal(a, w):
        raise ValueError(
            "the clean and corrupted inputs predict the same next token, so their logit difference is 0; "
            "pass answer=/wrong= tokens or your own metric="
        )
    return logit_diff_metric(a, w, c_mask)


def resolve_metric(model, metric, c_ids, c_mask, x_ids, x_mask, answer=None, wrong=None) -> Metric:
    if metric is not None:
        if answer is not None or wrong is not None:
            raise ValueError(
                "pass either metric= or answer=/wrong= (which build the logit-difference metric), not both"
            )
        return metric
    return default_metric(model, c_ids, c_mask, x_ids, x_mask, answer, wrong)
