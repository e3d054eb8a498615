"""`HookedModel`: a real HF causal LM with TransformerLens-named hook points, and nothing re-implemented.

    model = interp.load_model("smollm2-135m")
    logits, cache = model.run_with_cache("The capital of France is", names="blocks.*.hook_resid_post")
    with model.hooks(fwd_hooks=[("blocks.3.attn.hook_z", zero_head_2)]):
        patched = model("The capital of France is")

Hooks exist only inside `hooks()` (or the `run_with_*` calls built on it) and are removed in `finally`.
A cached run that does not ask for logits stops right after the last hook it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from functools import cached_property
from typing import Literal

import torch
from torch import Tensor

from interp.adapters import adapter_for
from interp.cache import ActivationCache
from interp.data import tokenize_texts
from interp.hooks.attention import use_hooked_attention
from interp.hooks.install import HookFn, install_backward, install_forward
from interp.hooks.points import HookPoint, NameFilter, absent_points, build_points, select_points
from interp.wrapper.config import TLConfigView, tl_config_view
from interp.wrapper.layer_range import StopForward, run_from_layer, stop_before_layer
from interp.wrapper.tl_surface import TLSurfaceMixin, explain_head_index, tl_aliases
from interp.wrapper.tokens import TokensMixin, next_token_loss, per_token_loss
from interp.wrapper.weights import WeightsMixin

Inputs = str | Sequence[str] | Tensor | dict
HookList = Sequence[tuple[str | Callable[[str], bool], HookFn]]
ReturnType = Literal["logits", "loss", "both"] | None


class HookedModel(WeightsMixin, TokensMixin, TLSurfaceMixin):
    """A HuggingFace causal LM with hook points over its own modules.

    Attributes: `hf_model` (the wrapped `transformers` model itself), `tokenizer`, `adapter`,
    `provenance` (spec, weight sha256, dtype), the sizes `n_layers`, `d_model`, `n_heads`,
    `n_kv_heads`, `d_head`, `d_vocab`, `n_ctx`, and `prepend_bos` (None: the tokenizer's convention).
    Weights with TransformerLens names come from `interp.wrapper.weights`, token helpers (`to_str_tokens`,
    `test_prompt`, `loss`) from `interp.wrapper.tokens`, generation from `interp.wrapper.generate`.
    """

    prepend_bos: bool | None = None
    """Default BOS rule for text inputs (see `interp.data.tokenize_texts`); per-call arguments override it."""

    def __init__(self, hf_model, tokenizer=None, provenance: dict | None = None):
        self.hf_model = hf_model.eval()
        self.tokenizer = tokenizer
        self.config = hf_model.config
        self.adapter = adapter_for(self.config)
        use_hooked_attention(hf_model)
        self.points: list[HookPoint] = build_points(self.adapter, self.config)
        self._by_name = {p.name: p for p in self.points}
        self._absent = absent_points(self.adapter, self.config)
        self._persistent: list = []  # add_hook's hooks (interp.wrapper.tl_surface)
        self._hook_depth = 0
        self.provenance = dict(provenance or {})
        c = self.config
        self.n_layers = c.num_hidden_layers
        self.d_model = c.hidden_size
        self.n_heads = c.num_attention_heads
        self.n_kv_heads = self.adapter.n_kv_heads(c)
        self.d_head = getattr(c, "head_dim", None) or self.d_model // self.n_heads
        self.d_vocab = c.vocab_size
        self.n_ctx = getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", None)

    # ------------------------------------------------------------------ basics
    @property
    def cfg(self) -> TLConfigView:
        """The sizes under TransformerLens's config names (`cfg.n_layers`, `cfg.d_mlp`, ...), read-only."""
        return tl_config_view(self)

    @property
    def name(self) -> str:
        return self.provenance.get("spec", type(self.hf_model).__name__)

    @property
    def device(self) -> torch.device:
        return next(self.hf_model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.hf_model.parameters()).dtype

    def to(self, device: str | torch.device) -> HookedModel:
        self.hf_model.to(device)
        return self

    def parameters(self):
        return self.hf_model.parameters()

    def __repr__(self) -> str:
        return (
            f"HookedModel({self.name}: {self.config.model_type}, {self.n_layers} layers, d_model {self.d_model}, "
            f"{self.n_heads} heads, {len(self.points)} hook points)"
        )

    def hook_names(self) -> list[str]:
        """Every hook point name, in forward order."""
        return [p.name for p in self.points]

    def hook_points(self, names: NameFilter = None) -> list[HookPoint]:
        """Hook points chosen by names, glob patterns or a predicate (None: all), in forward order."""
        if names is None and self._use_attn_result:  # TL's set_use_attn_result(True): hook_result is in "all"
            return list(self.points)
        if isinstance(names, str) or (names is not None and not callable(names)):
            names = tl_aliases(names)
        return select_points(self.points, names, self._absent)

    # ------------------------------------------------------------------ inputs
    def to_tokens(
        self,
        inputs: Inputs,
        prepend_bos: bool | None = None,
        padding_side: Literal["right"] | None = None,
        move_to_device: bool = True,
        truncate: bool = False,
        *,
        return_mask: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Token ids [batch, pos] on the model's device, as TransformerLens returns them; text is right-padded.

        `return_mask=True` returns `(ids, attention_mask)`, the mask 0 at padding (what every run here
        uses; a tensor or a dict input keeps its own mask, or gets all ones).
        Text longer than the context raises a ValueError unless `truncate=True` (keeps the start).
        `prepend_bos` (text only): None keeps the tokenizer's convention, True/False force BOS on/off
        (`interp.data.tokenize_texts`); None falls back to `model.prepend_bos`, itself None by default.
        `padding_side`: only "right" (TL's default) is supported; generation left-pads by itself.
        """
        if padding_side not in (None, "right"):
            raise ValueError(f"padding_side={padding_side!r}: text is right-padded here (generate left-pads itself)")
        if isinstance(inputs, dict):
            ids = inputs["input_ids"]
            mask = inputs.get("attention_mask")
        elif isinstance(inputs, Tensor):
            ids, mask = inputs, None
        else:
            if self.tokenizer is None:
                raise ValueError("this model has no tokenizer; pass token ids as a LongTensor [batch, pos]")
            texts = [inputs] if isinstance(inputs, str) else list(inputs)
            bos = self.prepend_bos if prepend_bos is None else prepend_bos
            ids, mask = tokenize_texts(self.tokenizer, texts, max_len=self.n_ctx, truncate=truncate, prepend_bos=bos)
        if ids.ndim == 1:
            ids = ids[None]
            mask = None if mask is None else mask[None]
        if ids.numel() == 0:
            raise ValueError("empty input: no tokens to run")
        if self.n_ctx and ids.shape[1] > self.n_ctx:
            raise ValueError(f"{ids.shape[1]} tokens is longer than the model's context of {self.n_ctx}; cut the input")
        if mask is None:
            mask = torch.ones_like(ids)
        if move_to_device:
            ids, mask = ids.to(self.device), mask.to(self.device)
        return (ids, mask) if return_mask else ids

    def _ids_and_mask(self, inputs: Inputs, truncate=False, prepend_bos: bool | None = None, attention_mask=None):
        ids, mask = self.to_tokens(inputs, prepend_bos=prepend_bos, truncate=truncate, return_mask=True)
        if attention_mask is not None:
            mask = attention_mask.to(mask.device).view_as(mask)
        return ids, mask

    def to_string(self, tokens: Tensor) -> str | list[str]:
        """Decode a token id, a [pos] or a [batch, pos] tensor of token ids (TL's `to_string`)."""
        tokens = torch.as_tensor(tokens)
        if tokens.ndim == 0:
            return self.tokenizer.decode([int(tokens)])
        if tokens.ndim == 1:
            return self.tokenizer.decode(tokens)
        return self.tokenizer.batch_decode(tokens)

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        inputs: Inputs,
        return_type: ReturnType = "logits",
        loss_per_token: bool = False,
        prepend_bos: bool | None = None,
        padding_side: Literal["right"] | None = None,
        start_at_layer: int | None = None,
        tokens: Tensor | None = None,
        attention_mask: Tensor | None = None,
        stop_at_layer: int | None = None,
        truncate: bool = False,
    ):
        """Logits [batch, pos, d_vocab] of the wrapped HF model, with whatever hooks are installed.

        As TransformerLens's `forward`: `return_type` "logits", "loss" (mean next-token loss over real
        targets; [batch, pos - 1] with `loss_per_token=True`), "both" ((logits, loss)) or None.
        `stop_at_layer=l` runs blocks 0..l-1 only and returns the residual stream entering block l
        (negative l counts from the end). `start_at_layer=l` takes `inputs` as that residual
        [batch, pos, d_model] and runs from block l on; `tokens` (needed for a loss) and
        `attention_mask` then describe it.
        """
        if return_type not in ("logits", "loss", "both", None):
            raise ValueError(f"return_type must be 'logits', 'loss', 'both' or None, not {return_type!r}")
        if padding_side not in (None, "right"):
            raise ValueError(f"padding_side={padding_side!r}: text is right-padded here")
        with ExitStack() as stack:
            stack.enter_context(self.hooks())  # add_hook's persistent hooks, when this is the outermost call
            if start_at_layer is not None:
                if not isinstance(inputs, Tensor) or inputs.ndim != 3:
                    raise ValueError("with start_at_layer, the input is the residual stream [batch, pos, d_model]")
                resid = inputs.to(self.device)
                mask = torch.ones(resid.shape[:2], dtype=torch.long, device=self.device)
                mask = mask if attention_mask is None else attention_mask.to(self.device)
                ids = None if tokens is None else tokens.to(self.device)
                stack.enter_context(run_from_layer(self, start_at_layer, resid))
                kw = {"inputs_embeds": torch.zeros_like(resid, dtype=self.dtype)}
            else:
                ids, mask = self._ids_and_mask(inputs, truncate, prepend_bos, attention_mask)
                kw = {"input_ids": ids}
            if stop_at_layer is not None:
                seen: dict[str, Tensor] = {}
                stack.enter_context(stop_before_layer(self, stop_at_layer, seen))
                try:
                    self.hf_model(**kw, attention_mask=mask, use_cache=False)
                except StopForward:
                    return seen["resid"]
                raise RuntimeError(f"the forward did not reach layer {stop_at_layer}")
            if return_type is None:
                self.hf_model(**kw, attention_mask=mask, use_cache=False)
                return None
            logits = self.hf_model(**kw, attention_mask=mask, use_cache=False).logits
        if return_type == "logits":
            return logits
        if ids is None:
            raise ValueError("a loss needs the token ids: pass tokens= with start_at_layer")
        loss = per_token_loss(logits, ids, mask) if loss_per_token else next_token_loss(logits, ids, mask)
        return loss if return_type == "loss" else (logits, loss)

    __call__ = forward

    @contextmanager
    def hooks(self, fwd_hooks: HookList = (), bwd_hooks: HookList = ()) -> Iterator[HookedModel]:
        """Install hooks for the duration of the block; they are removed in `finally`, even on error.

        Each entry is (name, pattern or predicate, fn); fn(tensor, hook) returns a replacement or None.
        """
        removes: list[Callable[[], None]] = []
        if not self._hook_depth:  # add_hook's hooks (and a subclass's standing ones), once per outermost call
            kept_fwd, kept_bwd = self.persistent_hooks()
            fwd_hooks, bwd_hooks = [*kept_fwd, *fwd_hooks], [*kept_bwd, *bwd_hooks]
        self._hook_depth += 1
        try:
            for direction, pairs in (("fwd", fwd_hooks), ("bwd", bwd_hooks)):
                for names, fn in pairs:
                    removes += self._install(names, fn, direction)
            yield self
        finally:
            self._hook_depth -= 1
            for remove in reversed(removes):
                remove()

    def _install(self, names, fn: HookFn, direction: Literal["fwd", "bwd"]) -> list[Callable[[], None]]:
        """Install `fn` at every hook point `names` selects; the removal callables."""
        installer = install_forward if direction == "fwd" else install_backward
        return [
            remove
            for point in self.hook_points(names)
            for remove in installer(self.hf_model, point, explain_head_index(self, point, fn))
        ]

    def run_with_hooks(
        self,
        inputs: Inputs,
        fwd_hooks: HookList = (),
        bwd_hooks: HookList = (),
        truncate: bool = False,
        prepend_bos: bool | None = None,
        reset_hooks_end: bool = True,
        **forward_kwargs,
    ):
        """One `forward` with the given hooks (`forward_kwargs` as in `forward`: `return_type`, ...).

        The given hooks never outlive the call; `reset_hooks_end` (TL's) takes off, at the end, the hooks kept
        by `add_hook(..., level=1)` (see `add_hook`).
        """
        try:
            with self.hooks(fwd_hooks, bwd_hooks):
                return self.forward(inputs, truncate=truncate, prepend_bos=prepend_bos, **forward_kwargs)
        finally:
            self._end_run(reset_hooks_end)

    def run_with_cache(
        self,
        inputs: Inputs,
        names: NameFilter = None,
        return_logits: bool = True,
        device: str | torch.device | None = None,
        truncate: bool = False,
        prepend_bos: bool | None = None,
        names_filter: NameFilter = None,
        remove_batch_dim: bool = False,
        return_type: ReturnType = "logits",
        stop_at_layer: int | None = None,
        reset_hooks_end: bool = True,
    ) -> tuple[Tensor | None, ActivationCache]:
        """(logits, cache) of one forward. `names`: names, globs or a predicate; None caches everything
        except the on-demand points (`attn.hook_result`: name it). `names_filter` is TransformerLens's
        name for the same argument.

        With `return_logits=False` the forward stops after the last hook needed and logits are None.
        Tensors are detached; `device` moves them (e.g. "cpu") as they are captured.
        `remove_batch_dim=True` (a batch of one) drops the batch axis of every cached tensor, as in
        TransformerLens. `return_type` "loss" or "both" returns the loss (or (logits, loss)) in place of
        the logits; None returns no logits (but runs the whole forward, unlike `return_logits=False`).
        `stop_at_layer=l` stops at the input of block l, as `forward(stop_at_layer=l)`, and returns the
        residual stream there in place of the logits (hooks of later layers do not fire).
        `reset_hooks_end` as in `run_with_hooks`.
        """
        points = self.hook_points(_names(names, names_filter))
        ids, mask = self._ids_and_mask(inputs, truncate, prepend_bos)
        if remove_batch_dim and ids.shape[0] != 1:
            raise ValueError(f"remove_batch_dim needs a batch of one; this input has {ids.shape[0]} rows")
        store: dict[str, Tensor] = {}

        def save(t: Tensor, hook: HookPoint) -> None:
            store[hook.name] = t.detach() if device is None else t.detach().to(device)

        logits = None
        seen: dict[str, Tensor] = {}
        try:
            with ExitStack() as stack, torch.no_grad():
                stack.enter_context(self.hooks([(p.name, save) for p in points]))
                if stop_at_layer is not None:
                    stack.enter_context(stop_before_layer(self, stop_at_layer, seen))
                elif not return_logits and points:
                    stack.enter_context(self._stop_after(points[-1]))
                try:
                    logits = self.hf_model(input_ids=ids, attention_mask=mask, use_cache=False).logits
                except StopForward:
                    logits = seen.get("resid")
        finally:
            self._end_run(reset_hooks_end)
        ordered = {p.name: store[p.name] for p in points if p.name in store}
        cache = ActivationCache(ordered, ids, mask, self)
        if remove_batch_dim:
            cache = cache.remove_batch_dim()
        if not return_logits or return_type is None:
            return None, cache
        if return_type == "logits" or stop_at_layer is not None:
            return logits, cache
        loss = next_token_loss(logits, ids, mask)
        return (loss if return_type == "loss" else (logits, loss)), cache

    def run_with_grads(
        self,
        inputs: Inputs,
        names: NameFilter = None,
        loss_fn: Callable[[Tensor, Tensor, Tensor], Tensor] | None = None,
        truncate: bool = False,
        prepend_bos: bool | None = None,
        names_filter: NameFilter = None,
    ) -> tuple[Tensor, ActivationCache, ActivationCache]:
        """(loss, activations, gradients of the loss w.r.t. those activations) at the chosen hook points.

        `loss_fn(logits, input_ids, attention_mask)` defaults to the mean next-token cross-entropy.
        """
        points = self.hook_points(_names(names, names_filter))
        ids, mask = self._ids_and_mask(inputs, truncate, prepend_bos)
        acts: dict[str, Tensor] = {}
        grads: dict[str, Tensor] = {}

        def save_act(t: Tensor, hook: HookPoint) -> None:
            acts[hook.name] = t.detach()

        def save_grad(g: Tensor, hook: HookPoint) -> None:
            grads[hook.name] = g.detach()

        pairs = [(p.name, save_act) for p in points]
        with self.hooks(pairs, [(p.name, save_grad) for p in points]):
            logits = self.hf_model(input_ids=ids, attention_mask=mask, use_cache=False).logits
            loss = (loss_fn or next_token_loss)(logits, ids, mask)
            loss.backward()
        order = [p.name for p in points]
        return (
            loss.detach(),
            ActivationCache({n: acts[n] for n in order if n in acts}, ids, mask, self),
            ActivationCache({n: grads[n] for n in order if n in grads}, ids, mask, self),
        )

    @contextmanager
    def _stop_after(self, point: HookPoint) -> Iterator[None]:
        def stop(module, args, output):
            raise StopForward

        handle = self.hf_model.get_submodule(point.stop_module).register_forward_hook(stop)
        try:
            yield
        finally:
            handle.remove()

    def generate(
        self, inputs: Inputs | None = None, max_new_tokens: int = 20, *, input: Inputs | None = None, **kwargs
    ):
        """HF's KV-cached `generate` with hooks active; see `interp.wrapper.generate.generate` (names=, fwd_hooks=).

        `input=` is TransformerLens's name for the prompt."""
        from interp.wrapper.generate import generate

        if (inputs is None) == (input is None):
            raise TypeError("pass the prompt once: generate(prompt, ...) or generate(input=prompt, ...)")
        return generate(self, inputs if input is None else input, max_new_tokens, **kwargs)

    # ------------------------------------------------------------------ views
    def to_transformer_bridge(self):
        """A TransformerLens 3 `TransformerBridge` over the same weights, on its own module tree
        (`model.hf_model` is never altered); see `interp.views.bridge`."""
        from interp.views.bridge import to_transformer_bridge

        return to_transformer_bridge(self)

    def to_transformer_lens(self):
        """A TransformerLens `HookedTransformer` with the same weights (no folding), where TL supports it.

        Prefer `to_transformer_bridge()`; this one is kept for `HookedTransformer` code.
        """
        from interp.views.transformer_lens import to_transformer_lens

        return to_transformer_lens(self)

    @cached_property
    def nnsight(self):
        """An nnsight model over the very same HF modules (no copy): `with model.nnsight.trace(ids): ...`."""
        from nnsight.modeling.transformers import TransformersModel

        return TransformersModel(self.hf_model, task="text-generation", tokenizer=self.tokenizer)


def _names(names: NameFilter, names_filter: NameFilter) -> NameFilter:
    """`names` or its TransformerLens alias `names_filter` (not both)."""
    if names is not None and names_filter is not None:
        raise TypeError("pass names= or names_filter= (the same argument), not both")
    return names if names is not None else names_filter
