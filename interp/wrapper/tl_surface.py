"""The rest of TransformerLens's `HookedTransformer` surface that tutorials use, on a `HookedModel`.

    model.blocks[3].attn.W_Q            # [head, d_model, d_head], as TL's `blocks[l].attn.W_Q`
    model.add_hook("blocks.3.attn.hook_z", fn)   # persistent: every later forward, until reset_hooks()
    model.set_use_attn_result(True)     # attn.hook_result joins "every hook" caches
    model.get_token_position(" Mary", prompt)
    model.tl_named_parameters()         # (TL name, tensor): "embed.W_E", "blocks.0.attn.W_Q", ...

The component objects (`model.embed`, `model.unembed`, `model.ln_final`, `blocks[l].ln1`, hook points by
attribute) are in `interp.wrapper.components`.

Persistent hooks go in at the outermost `model.hooks()` (which `forward`, `run_with_hooks`, `run_with_cache` and
`generate` all enter), so they act once per forward however the call is nested, and come off with it.
"""

from __future__ import annotations

from typing import Literal

import torch

from interp.wrapper.components import EmbedView, HookHandle, NormView, UnembedView

_ATTN = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")
_MLP = ("W_in", "W_gate", "W_out", "b_in", "b_gate", "b_out")


class _Weights:
    """One block's attention or MLP under TL's names: weights (views of the HF parameters, detached), hook
    points by attribute (`attn.hook_z`), and for the MLP a call on a residual (`mlp(x)`, the HF module)."""

    def __init__(self, model, layer: int, names: tuple[str, ...], what: str):
        self._model, self._layer, self._names, self._what = model, layer, names, what

    def __getattr__(self, name: str):
        if name.startswith("hook_"):
            return self._model.hook_dict[f"blocks.{self._layer}.{self._what}.{name}"]
        if name.startswith("_") or name not in self._names:
            raise AttributeError(f"blocks[{self._layer}].{self._what} has no {name!r}; it has {', '.join(self._names)}")
        return self._model.layer_weight(name, self._layer)

    def __call__(self, x):
        if self._what != "mlp":
            raise TypeError(
                f"blocks[{self._layer}].attn cannot be called on a residual alone: the HF attention also needs the "
                "position embeddings and mask of a forward; run the model with hooks (blocks.L.attn.hook_z ...)"
            )
        out = self._model._block(self._layer, self._model.adapter.mlp)(x)
        return out[0] if isinstance(out, tuple) else out  # a mixture of experts also returns its router logits

    def __dir__(self):
        return list(self._names)


class BlockView:
    """`model.blocks[l]`: TL's per-block names (`attn.W_Q`, `mlp.W_in`, `ln1`, `hook_resid_pre`, ...) for layer l."""

    def __init__(self, model, layer: int):
        self.layer, self._model = layer, model
        self.attn = _Weights(model, layer, _ATTN, "attn")
        self.mlp = _Weights(model, layer, _MLP, "mlp")

    @property
    def ln1(self) -> NormView:
        return NormView(self._model.norm_module(f"blocks.{self.layer}.ln1")[0], f"blocks.{self.layer}.ln1")

    @property
    def ln2(self) -> NormView:
        return NormView(self._model.norm_module(f"blocks.{self.layer}.ln2")[0], f"blocks.{self.layer}.ln2")

    def __getattr__(self, name: str):
        if name.startswith("hook_"):
            return self._model.hook_dict[f"blocks.{self.layer}.{name}"]
        raise AttributeError(f"blocks[{self.layer}] has no {name!r}; it has attn, mlp, ln1, ln2 and hook_* points")

    def __repr__(self) -> str:
        return f"BlockView(layer {self.layer})"


class TLSurfaceMixin:
    """`blocks`, persistent hooks, `set_use_attn_result`, `get_token_position` (needs the HookedModel around it)."""

    _persistent: list
    _use_attn_result: bool = False

    @property
    def blocks(self) -> list[BlockView]:
        """One `BlockView` per layer: `model.blocks[l].attn.W_Q`, `model.blocks[l].mlp.W_out`, as in TL."""
        return [BlockView(self, l) for l in range(self.n_layers)]

    @property
    def embed(self) -> EmbedView:
        """TL's `model.embed`: `.W_E`, and `embed(tokens)` (the HF embedding module)."""
        return EmbedView(self)

    @property
    def unembed(self) -> UnembedView:
        """TL's `model.unembed`: `.W_U`, `.b_U`, and `unembed(x)` (the HF output projection)."""
        return UnembedView(self)

    @property
    def ln_final(self) -> NormView:
        """TL's `model.ln_final`: the final norm (`.w`, `.b`); `ln_final(x)` applies it, weight included."""
        return NormView(self.norm_module("ln_final")[0], "ln_final")

    @property
    def hook_dict(self) -> dict[str, HookHandle]:
        """Hook name -> a TL-style hook point object (`.name`, `.layer()`, `.add_hook(fn)`)."""
        return {p.name: HookHandle(self, p) for p in self.points}

    def tl_named_parameters(self):
        """(TL name, tensor) pairs in TL 3's order: "embed.W_E", "blocks.{l}.attn.W_Q" ... "ln_final.w",
        "unembed.W_U", "unembed.b_U". As in TL, grouped-query k/v weights are repeated per query head here
        (`model.W_K` keeps the kv heads); absent biases are zeros, a norm without bias has no ".b"."""
        from interp.wrapper.weights import MissingWeightError, expand_kv

        yield "embed.W_E", self.W_E
        if self.adapter.pos_embed:
            yield "pos_embed.W_pos", self.W_pos
        gated = self.adapter.mlp_pre_linear is not None or self.adapter.gate_up_fused
        mlp = ("W_in", "W_out", "b_in", "b_out") + (("W_gate",) if gated else ())
        for l in range(self.n_layers):
            for name in _ATTN:
                w = self.layer_weight(name, l)
                yield f"blocks.{l}.attn.{name}", expand_kv(w, self.n_heads, 0) if name[2] in "KV" else w
            for name in mlp:
                try:
                    yield f"blocks.{l}.mlp.{name}", self.layer_weight(name, l)
                except MissingWeightError:  # a mixture of experts has no single MLP weight
                    break
            for norm in ("ln1", "ln2"):
                yield from _norm_params(self.blocks[l].__getattribute__(norm), f"blocks.{l}.{norm}")
        yield from _norm_params(self.ln_final, "ln_final")
        yield "unembed.W_U", self.W_U
        yield "unembed.b_U", self.b_U

    # ------------------------------------------------------------------ persistent hooks
    def add_hook(
        self,
        name,
        hook,
        dir: Literal["fwd", "bwd"] = "fwd",
        is_permanent: bool = False,
        level: int | None = None,
        **_tl_only,
    ):
        """Keep `hook` at `name` (a name, glob or predicate) for every later forward, as TL's `add_hook` does,
        until `reset_hooks()` (`is_permanent=True`: until `reset_hooks(including_permanent=True)`).

        `level=1`, as in TL, also takes it off at the end of the next `run_with_hooks` / `run_with_cache`
        (ARENA's path patching relies on it); the default (None) keeps it through them."""
        if dir not in ("fwd", "bwd"):
            raise ValueError(f"dir={dir!r}: use 'fwd' or 'bwd'")
        self.hook_points(name)  # an unknown name is refused now, not at the next forward
        self._persistent.append((name, hook, dir, is_permanent, level))

    def reset_hooks(
        self,
        clear_contexts: bool = True,
        direction: str = "both",
        including_permanent: bool = False,
        level: int | None = None,
        **_,
    ):
        """Remove the hooks `add_hook` kept (those of `direction`, "fwd", "bwd" or "both"; permanent ones only
        with `including_permanent`; with `level`, only those added at that level)."""
        if direction not in ("fwd", "bwd", "both"):
            raise ValueError(f"direction={direction!r}: use 'fwd', 'bwd' or 'both'")

        def goes(h) -> bool:
            at_level = level is None or (len(h) > 4 and h[4] == level)
            return (direction == "both" or h[2] == direction) and (including_permanent or not h[3]) and at_level

        self._persistent = [h for h in self._persistent if not goes(h)]

    def _end_run(self, reset_hooks_end: bool) -> None:
        """What TL does when a `run_with_*` context closes: drop the kept hooks added at that context's level."""
        if reset_hooks_end:
            self.reset_hooks(level=self._hook_depth + 1)

    def remove_all_hook_fns(self, direction: str = "both", including_permanent: bool = False, **_):
        """TL's name for `reset_hooks` without the contexts."""
        self.reset_hooks(direction=direction, including_permanent=including_permanent)

    def persistent_hooks(self) -> tuple[list, list]:
        """(forward, backward) (name, fn) pairs kept by `add_hook`."""
        fwd = [(n, f) for n, f, d, *_ in self._persistent if d == "fwd"]
        bwd = [(n, f) for n, f, d, *_ in self._persistent if d == "bwd"]
        return fwd, bwd

    # ------------------------------------------------------------------ switches
    def set_use_attn_result(self, use_attn_result: bool) -> None:
        """TL's switch: with True, `attn.hook_result` (per-head outputs) is among "every hook" (`names=None`);
        it can always be named explicitly."""
        self._use_attn_result = bool(use_attn_result)

    def set_use_split_qkv_input(self, use_split_qkv_input: bool) -> None:
        """Refused, naming the equivalent: TL's per-head input copies (`hook_q_input` ...) are not hook points."""
        if use_split_qkv_input:
            raise NotImplementedError(
                "per-head q/k/v inputs (TL's hook_q_input / hook_k_input / hook_v_input) are not hook points here. "
                "Each head's q, k and v depend on its own copy of the input only, so patching head h's input from "
                "another run equals patching blocks.L.attn.hook_q / hook_k / hook_v at head h from that run's cache"
            )

    # ------------------------------------------------------------------ tokens
    def get_token_position(self, single_token, input, mode: str = "first", prepend_bos=None, padding_side=None) -> int:
        """Position of `single_token` (a string that is one token, or an id) in `input` (text, [pos] or
        [1, pos] ids), its first or last occurrence, as TL's `get_token_position`."""
        tokens = self.to_tokens(input, prepend_bos=prepend_bos) if isinstance(input, str) else torch.as_tensor(input)
        if tokens.ndim == 2:
            if tokens.shape[0] != 1:
                raise ValueError(f"tokens of shape {tuple(tokens.shape)}: give [pos] or [1, pos]")
            tokens = tokens[0]
        if isinstance(single_token, str):
            single_token = self.to_single_token(single_token)
        single_token = int(single_token)
        where = (tokens == single_token).nonzero().flatten()
        if len(where) == 0:
            raise ValueError(
                f"token {single_token} ({self.to_string(torch.tensor(single_token))!r}) is not in the input"
            )
        if mode not in ("first", "last"):
            raise ValueError(f"mode must be 'first' or 'last', not {mode!r}")
        return int(where[0] if mode == "first" else where[-1])


def _norm_params(view: NormView, prefix: str):
    yield f"{prefix}.w", view.w
    if view.b is not None:
        yield f"{prefix}.b", view.b


# TL 3's bridge names for the residual stream at a block's input and output (`get_act_name("in", l)` gives
# "blocks.l.hook_in", as the Main Demo writes it).
_ALIASES = {"hook_in": "hook_resid_pre", "hook_out": "hook_resid_post"}


def tl_aliases(names):
    """`names` with TL 3's block aliases ("blocks.3.hook_in") replaced by our names ("blocks.3.hook_resid_pre")."""

    def one(name: str) -> str:
        head, _, last = name.rpartition(".")
        return (
            f"{head}.{_ALIASES[last]}"
            if head.startswith("blocks.") and head.count(".") == 1 and last in _ALIASES
            else name
        )

    return one(names) if isinstance(names, str) else [one(n) if isinstance(n, str) else n for n in names]


def explain_head_index(model, point, fn):
    """`fn`, re-raising an IndexError at a grouped-query k/v hook with the reason: those hooks have one head per
    kv head (TL's `hook_k` / `hook_v` too), so code that loops over `cfg.n_heads` there runs past the end."""
    n_kv, n_q = model.n_kv_heads, model.n_heads
    if n_kv == n_q or not point.name.endswith(("attn.hook_k", "attn.hook_v", "attn.hook_rot_k")):
        return fn

    def hook_fn(tensor, hook):
        try:
            return fn(tensor, hook)
        except IndexError as e:
            raise IndexError(
                f"{point.name} has {n_kv} heads, not n_heads={n_q}: this model uses grouped-query attention, where "
                f"each key/value head serves {n_q // n_kv} query heads, so k and v are indexed by kv head "
                f"(query head h reads kv head h // {n_q // n_kv}; interp.patching patches k/v per kv head). "
                f"The hook indexed past the end: {e}"
            ) from e

    return hook_fn
