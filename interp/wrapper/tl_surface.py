"""The rest of TransformerLens's `HookedTransformer` surface that tutorials use, on a `HookedModel`.

    model.blocks[3].attn.W_Q            # [head, d_model, d_head], as TL's `blocks[l].attn.W_Q`
    model.add_hook("blocks.3.attn.hook_z", fn)   # persistent: every later forward, until reset_hooks()
    model.set_use_attn_result(True)     # attn.hook_result joins "every hook" caches
    model.get_token_position(" Mary", prompt)

Persistent hooks go in at the outermost `model.hooks()` (which `forward`, `run_with_hooks`, `run_with_cache` and
`generate` all enter), so they act once per forward however the call is nested, and come off with it.
"""

from __future__ import annotations

from typing import Literal

import torch

_ATTN = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")
_MLP = ("W_in", "W_gate", "W_out", "b_in", "b_gate", "b_out")


class _Weights:
    """One block's attention or MLP weights under TL's names (views of the HF parameters, detached)."""

    def __init__(self, model, layer: int, names: tuple[str, ...], what: str):
        self._model, self._layer, self._names, self._what = model, layer, names, what

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self._names:
            raise AttributeError(f"blocks[{self._layer}].{self._what} has no {name!r}; it has {', '.join(self._names)}")
        return self._model.layer_weight(name, self._layer)

    def __dir__(self):
        return list(self._names)


class BlockView:
    """`model.blocks[l]`: TL's per-block weight names (`attn.W_Q`, `mlp.W_in`, ...) for layer l."""

    def __init__(self, model, layer: int):
        self.layer = layer
        self.attn = _Weights(model, layer, _ATTN, "attn")
        self.mlp = _Weights(model, layer, _MLP, "mlp")

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

    # ------------------------------------------------------------------ persistent hooks
    def add_hook(self, name, hook, dir: Literal["fwd", "bwd"] = "fwd", is_permanent: bool = False, **_tl_only):
        """Keep `hook` at `name` (a name, glob or predicate) for every later forward, as TL's `add_hook` does,
        until `reset_hooks()` (`is_permanent=True`: until `reset_hooks(including_permanent=True)`)."""
        if dir not in ("fwd", "bwd"):
            raise ValueError(f"dir={dir!r}: use 'fwd' or 'bwd'")
        self.hook_points(name)  # an unknown name is refused now, not at the next forward
        self._persistent.append((name, hook, dir, is_permanent))

    def reset_hooks(self, clear_contexts: bool = True, direction: str = "both", including_permanent: bool = False, **_):
        """Remove the hooks `add_hook` kept (those of `direction`, "fwd", "bwd" or "both"; permanent ones only
        with `including_permanent`)."""
        if direction not in ("fwd", "bwd", "both"):
            raise ValueError(f"direction={direction!r}: use 'fwd', 'bwd' or 'both'")
        self._persistent = [
            h
            for h in self._persistent
            if not ((direction == "both" or h[2] == direction) and (including_permanent or not h[3]))
        ]

    def remove_all_hook_fns(self, direction: str = "both", including_permanent: bool = False, **_):
        """TL's name for `reset_hooks` without the contexts."""
        self.reset_hooks(direction=direction, including_permanent=including_permanent)

    def persistent_hooks(self) -> tuple[list, list]:
        """(forward, backward) (name, fn) pairs kept by `add_hook`."""
        fwd = [(n, f) for n, f, d, _ in self._persistent if d == "fwd"]
        bwd = [(n, f) for n, f, d, _ in self._persistent if d == "bwd"]
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
