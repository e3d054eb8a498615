"""TransformerLens's component objects on a `HookedModel`, as thin views over the HF modules (nothing copied).

    model.embed.W_E @ model.OV @ model.unembed.W_U      # TL Main Demo's full OV circuit (a FactoredMatrix)
    model.unembed(model.ln_final(resid))                 # logits from a cached residual (ARENA's path patching)
    model.blocks[0].mlp(model.blocks[0].ln2(x))          # one block's MLP on a residual
    model.blocks[3].attn.hook_z.add_hook(fn)             # a hook point by attribute, as in TL
    model.hook_dict["blocks.3.attn.hook_z"].name

Calling a view runs the HF module itself, so the numbers are the model's own: `ln_final(x)` applies the norm's
weight (TL's `ln_final` is weightless only after `fold_ln`), and `unembed(x)` is `x @ W_U + b_U` without
the logit soft-capping or scaling some families apply after the output projection.
"""

from __future__ import annotations

from torch import Tensor, nn

from interp.hooks import norms


class EmbedView:
    """`model.embed`: `W_E` [d_vocab, d_model], and `embed(tokens)` -> [..., d_model] (what `hook_embed` sees)."""

    def __init__(self, model):
        self._model = model
        self.module: nn.Module = model.hf_model.get_submodule(model.adapter.embed)

    @property
    def W_E(self) -> Tensor:
        return self._model.W_E

    def __call__(self, tokens: Tensor) -> Tensor:
        return self.module(tokens.to(self._model.device))


class UnembedView:
    """`model.unembed`: `W_U` [d_model, d_vocab], `b_U` [d_vocab], and `unembed(x)` = x @ W_U + b_U."""

    def __init__(self, model):
        self._model = model
        self.module: nn.Module = model.hf_model.get_output_embeddings()

    @property
    def weight(self) -> Tensor:
        """The HF output projection's weight, [d_vocab, d_model]."""
        return self.module.weight

    @property
    def W_U(self) -> Tensor:
        return self._model.W_U

    @property
    def b_U(self) -> Tensor:
        return self._model.b_U

    def __call__(self, resid: Tensor) -> Tensor:
        return self.module(resid)


class NormView:
    """`model.ln_final`, `model.blocks[l].ln1` / `ln2`: the HF norm module, with TL's `w` and `b` (None when
    it has no bias); calling it normalizes and applies the weight."""

    def __init__(self, module: nn.Module, name: str):
        self.module, self.name = module, name

    @property
    def w(self) -> Tensor:
        return norms.gain(self.module, norms.norm_spec(self.module)).detach()

    @property
    def b(self) -> Tensor | None:
        b = norms.bias(self.module)
        return None if b is None else b.detach()

    def __call__(self, x: Tensor) -> Tensor:
        return self.module(x)

    def __repr__(self) -> str:
        return f"NormView({self.name}: {type(self.module).__name__})"


class HookHandle:
    """One hook point as TL's `HookPoint` object: `.name`, `.layer()`, `.add_hook(fn)`, `.remove_hooks()`.

    `add_hook` is `model.add_hook(name, fn, ...)`: the hook stays for every later forward until
    `model.reset_hooks()` (`remove_hooks()` here takes off only this point's kept hooks)."""

    def __init__(self, model, point):
        self._model, self._point = model, point
        self.name: str = point.name

    def layer(self) -> int:
        if self._point.layer is None:
            raise ValueError(f"{self.name} is not inside a block")
        return int(self._point.layer)

    def add_hook(self, hook, dir: str = "fwd", is_permanent: bool = False, level=None, prepend: bool = False):
        if prepend:
            raise NotImplementedError("prepend=True: kept hooks run in the order they were added here")
        self._model.add_hook(self.name, hook, dir=dir, is_permanent=is_permanent)

    def remove_hooks(self, dir: str = "fwd", including_permanent: bool = False, level=None) -> None:
        directions = ("fwd", "bwd") if dir == "both" else (dir,)
        self._model._persistent = [
            h
            for h in self._model._persistent
            if not (h[0] == self.name and h[2] in directions and (including_permanent or not h[3]))
        ]

    def __repr__(self) -> str:
        return f"HookHandle({self.name})"
