"""sae-lens's `HookedSAETransformer` surface over an `interp` model: SAEs and transcoders spliced in by name.

    model = HookedSAETransformer.from_pretrained("smollm2-135m")       # or HookedSAETransformer.from_model(m)
    logits = model.run_with_saes(text, saes=[sae])                      # the SAE's output replaces the hook's
    logits, cache = model.run_with_cache_with_saes(text, saes=[sae])
    cache["blocks.15.hook_resid_post.hook_sae_acts_post"]              # latents [batch, pos, d_sae]
    with model.saes(saes=[sae], use_error_term=True):                   # model output unchanged ...
        model.run_with_hooks(text, fwd_hooks=[(f"{sae.cfg.metadata.hook_name}.hook_sae_acts_post", ablate)])
    model.add_sae(sae); ...; model.reset_saes()                         # attached until reset

What sae-lens's `_SAEWrapper` does, it does here, with the same numbers: the SAE runs at its `hook_name`
(a transcoder reads `hook_name` and writes `hook_name_out`), at **every position** unless
`exclude_special_tokens` (True: the tokenizer's special ids; or a list of ids) bypasses some. This is
sae-lens's rule, not `sae.spliced`'s, which leaves position 0 alone by default as training did (pass
`rows="all"` there for this one). With `use_error_term=True` the error `x - x̂(x)` (computed with the SAE's
hooks off) is added back, so the model's output is unchanged while hooks on the latents still act.

Hook points, each `{hook_name_out}.<name>`: the SAE's own (`hook_sae_input`, `hook_sae_acts_pre`,
`hook_sae_acts_post`, `hook_sae_recons`) and the splice's (`hook_sae_error`, `hook_sae_output`). They
take forward and backward hooks and are cached like any other. Gradients: the latents and the error are
nodes of the autograd graph (the error as a leaf, so its gradient is what flows into it), and the gradient
reaching the hooked activation is the one through the SAE's encoder, as in sae-lens; attribution patching
over latents is `run_with_grads(..., names=[... ".hook_sae_acts_post"])` inside `saes()`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from interp.hooks.points import HookPoint, UnknownHookError, View
from interp.wrapper.hooked_model import HookedModel

SAE_POINTS = ("hook_sae_input", "hook_sae_acts_pre", "hook_sae_acts_post", "hook_sae_recons")
SPLICE_POINTS = ("hook_sae_error", "hook_sae_output")


@dataclass
class _Slot:
    sae: Any
    in_name: str
    out_name: str
    use_error_term: bool
    exclude: bool | list[int]
    points: dict[str, HookPoint] = field(default_factory=dict)
    """Short name (`hook_sae_acts_post`) -> the hook point handed to hook functions."""
    handles: list = field(default_factory=list)
    captured: Tensor | None = None

    def names(self) -> list[str]:
        return [p.name for p in self.points.values()]


def _saes_list(saes: Any) -> list:
    return list(saes) if isinstance(saes, (list, tuple)) else [saes]


class HookedSAETransformer(HookedModel):
    """An `interp.HookedModel` that splices SAEs and transcoders in, with sae-lens's method names."""

    @classmethod
    def from_pretrained(cls, spec: str, **load_kwargs: Any) -> HookedSAETransformer:
        """Load `spec` with `interp.load_model` and wrap it."""
        import interp

        return cls.from_model(interp.load_model(spec, **load_kwargs))

    @classmethod
    def from_model(cls, model: HookedModel) -> HookedSAETransformer:
        """A new wrapper over the same HF model (no copy of the weights); `model` itself is left as it is."""
        if model._hook_depth:
            raise RuntimeError("wrap the model outside its hooks() context")
        new = cls.__new__(cls)
        new.__dict__.update(model.__dict__)
        new._persistent = list(model._persistent)
        new._slots: dict[str, _Slot] = {}
        new._sae_fns: dict[str, dict[str, list]] = {"fwd": {}, "bwd": {}}
        new._step_ids: Tensor | None = None
        new._ids_handle = None
        return new

    # ------------------------------------------------------------------ attaching
    @property
    def acts_to_saes(self) -> dict[str, Any]:
        """{input hook name: SAE} of the attached SAEs."""
        return {name: slot.sae for name, slot in self._slots.items()}

    def add_sae(self, sae: Any, use_error_term: bool | None = None, exclude_special_tokens: bool | list[int] = False):
        """Attach `sae` at its hook until `reset_saes` (replacing one already there), as sae-lens's `add_sae`."""
        meta = sae.cfg.metadata
        in_name = getattr(meta, "hook_name", None)
        if not in_name:
            raise ValueError("the SAE records no cfg.metadata.hook_name: set it to the hook it reads")
        out_name = getattr(meta, "hook_name_out", None) or in_name
        for name in {in_name, out_name}:
            if name not in self._by_name:
                raise UnknownHookError(
                    f"the SAE's hook {name!r} is not a hook point of {self.name}: is this SAE for another model? "
                    "See model.hook_names()"
                )
        width = self._width(out_name)
        if width is not None and sae.cfg.d_in != width and in_name == out_name:
            raise ValueError(f"the SAE has d_in {sae.cfg.d_in} but {in_name} has width {width}: wrong model or SAE")
        if self._hook_depth:
            raise RuntimeError("attach SAEs outside a hooks() context: its hooks were installed before the SAE")
        if in_name in self._slots:
            self._detach(in_name)
        use_error = bool(sae.use_error_term if use_error_term is None else use_error_term)
        slot = _Slot(sae, in_name, out_name, use_error, exclude_special_tokens)
        at = self._by_name[out_name]  # an SAE's points stand where it writes (a cached run may stop after them)
        for short in (*(n for n in sae.hook_dict if n not in SPLICE_POINTS), *SPLICE_POINTS):
            slot.points[short] = replace(at, name=f"{out_name}.{short}", view=View(), on_demand=False)
        for short in (n for n in sae.hook_dict if n not in SPLICE_POINTS):
            module = getattr(sae, short)
            slot.handles.append(module.register_forward_hook(self._point_hook(slot, short)))
        self._slots[in_name] = slot
        if slot.exclude is not False and self._ids_handle is None:
            self._ids_handle = self.hf_model.register_forward_pre_hook(self._see_ids, with_kwargs=True)

    def reset_saes(self, act_names: str | list[str] | None = None) -> None:
        """Detach the SAEs at these input hook names (None: all)."""
        names = [act_names] if isinstance(act_names, str) else list(act_names or self._slots)
        for name in names:
            if name not in self._slots:
                raise KeyError(f"no SAE is attached at {name!r}; attached: {', '.join(self._slots) or '(none)'}")
            self._detach(name)

    def _detach(self, in_name: str) -> None:
        slot = self._slots.pop(in_name)
        for handle in slot.handles:
            handle.remove()
        if self._ids_handle is not None and all(s.exclude is False for s in self._slots.values()):
            self._ids_handle.remove()
            self._ids_handle = None

    @contextmanager
    def saes(
        self,
        saes: Any = (),
        reset_saes_end: bool = True,
        use_error_term: bool | None = None,
        exclude_special_tokens: bool | list[int] = False,
    ) -> Iterator[HookedSAETransformer]:
        """Attach `saes` for the block; on exit the ones they displaced come back (`reset_saes_end=False`: stay)."""
        restore: list[tuple[str, _Slot | None]] = []
        try:
            for sae in _saes_list(saes):
                name = sae.cfg.metadata.hook_name
                prev = self._slots.get(name)
                restore.append((name, prev))
                self.add_sae(sae, use_error_term=use_error_term, exclude_special_tokens=exclude_special_tokens)
            yield self
        finally:
            if reset_saes_end:
                for name, prev in reversed(restore):
                    if name in self._slots:
                        self._detach(name)
                    if prev is not None:
                        self.add_sae(prev.sae, prev.use_error_term, prev.exclude)

    def run_with_saes(self, *args: Any, saes: Any = (), reset_saes_end: bool = True, use_error_term=None,
                      exclude_special_tokens: bool | list[int] = False, **kwargs: Any):  # fmt: skip
        """One `forward` with `saes` attached."""
        with self.saes(saes, reset_saes_end, use_error_term, exclude_special_tokens):
            return self(*args, **kwargs)

    def run_with_cache_with_saes(self, *args: Any, saes: Any = (), reset_saes_end: bool = True, use_error_term=None,
                                 exclude_special_tokens: bool | list[int] = False, **kwargs: Any):  # fmt: skip
        """`run_with_cache` with `saes` attached; the cache holds their points too (see the module doc)."""
        kwargs.pop("return_cache_object", None)  # sae-lens's switch; the cache is always an ActivationCache here
        with self.saes(saes, reset_saes_end, use_error_term, exclude_special_tokens):
            return self.run_with_cache(*args, **kwargs)

    def run_with_hooks_with_saes(self, *args: Any, saes: Any = (), reset_saes_end: bool = True,
                                 exclude_special_tokens: bool | list[int] = False, **kwargs: Any):  # fmt: skip
        """`run_with_hooks` with `saes` attached (`fwd_hooks` / `bwd_hooks` may name the SAEs' points)."""
        kwargs.pop("clear_contexts", None)
        with self.saes(saes, reset_saes_end, None, exclude_special_tokens):
            return self.run_with_hooks(*args, **kwargs)

    # ------------------------------------------------------------------ hook points
    def sae_hook_names(self) -> list[str]:
        """Every attached SAE's hook point names."""
        return [n for slot in self._slots.values() for n in slot.names()]

    def hook_names(self) -> list[str]:
        return [p.name for p in self._ordered_points()]

    def hook_points(self, names: Any = None) -> list[HookPoint]:
        """The model's points and the attached SAEs' (each SAE's right after the point it writes), in run order."""
        base, ours = self._split(names)
        chosen = {p.name for p in ([] if base == [] else super().hook_points(base))} | set(ours)
        return [p for p in self._ordered_points() if p.name in chosen]

    def _ordered_points(self) -> list[HookPoint]:
        extra: dict[str, list[HookPoint]] = {}
        for slot in self._slots.values():
            extra.setdefault(slot.out_name, []).extend(slot.points.values())
        return [q for p in self.points for q in (p, *extra.get(p.name, ()))]

    def _split(self, names: Any) -> tuple[Any, list[str]]:
        """(what selects base points, the SAE point names) for a name, glob, list or predicate."""
        sae_names = self.sae_hook_names()
        if names is None:
            return None, sae_names
        if callable(names):
            return names, [n for n in sae_names if names(n)]
        base, ours = [], []
        for pattern in [names] if isinstance(names, str) else list(names):
            if any(c in pattern for c in "*?["):
                hits = fnmatch.filter(sae_names, pattern)
                if not hits or fnmatch.filter(self._by_name, pattern):
                    base.append(pattern)
                ours += hits
            elif pattern in sae_names:
                ours.append(pattern)
            elif ".hook_sae_" in pattern:
                raise UnknownHookError(
                    f"{pattern!r} is an SAE's point, but no SAE is attached at {pattern.split('.hook_sae_')[0]!r}: "
                    f"attach one (saes=[...] or add_sae); attached: {', '.join(self._slots) or '(none)'}"
                )
            else:
                base.append(pattern)
        return base, list(dict.fromkeys(ours))

    def _install(self, names, fn, direction):
        base, ours = self._split(names)
        removes = [] if base == [] else super()._install(base, fn, direction)
        for name in ours:
            fns = self._sae_fns[direction].setdefault(name, [])
            fns.append(fn)
            removes.append(lambda fns=fns, fn=fn: fns.remove(fn))
        return removes

    def add_hook(self, name, hook, dir: str = "fwd", is_permanent: bool = False, **tl_only: Any):
        base, _ = self._split(name)
        if base:
            self.hook_points(base)  # an unknown name is refused now
        self._persistent.append((name, hook, dir, is_permanent))

    def persistent_hooks(self) -> tuple[list, list]:
        fwd, bwd = super().persistent_hooks()
        splice = []
        for slot in self._slots.values():
            if slot.in_name != slot.out_name:
                splice.append((slot.in_name, self._capture(slot)))
            splice.append((slot.out_name, self._splice(slot)))
        return [*splice, *fwd], bwd

    # ------------------------------------------------------------------ the splice
    def _width(self, name: str) -> int | None:
        return self.d_model if name.endswith(("hook_resid_pre", "hook_resid_mid", "hook_resid_post")) else None

    def _fire(self, slot: _Slot, short: str, t: Tensor) -> Tensor:
        hook = slot.points[short]
        for fn in self._sae_fns["fwd"].get(hook.name, ()):
            new = fn(t, hook)
            t = t if new is None else new
        if t.requires_grad:
            for fn in self._sae_fns["bwd"].get(hook.name, ()):
                t.register_hook(lambda g, fn=fn: fn(g, hook))
        return t

    def _point_hook(self, slot: _Slot, short: str) -> Callable:
        def forward_hook(module: Any, args: Any, output: Tensor) -> Tensor:
            return self._fire(slot, short, output)

        return forward_hook

    def _see_ids(self, module: Any, args: Any, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self._step_ids = ids if isinstance(ids, Tensor) else None

    def _bypass(self, slot: _Slot, t: Tensor) -> Tensor | None:
        """Bool [batch, pos] of positions the SAE leaves alone (exclude_special_tokens), or None."""
        if slot.exclude is False or self._step_ids is None or tuple(self._step_ids.shape) != tuple(t.shape[:2]):
            return None
        if isinstance(slot.exclude, (list, tuple)):
            special = [int(i) for i in slot.exclude]
        else:
            special = sorted(set(getattr(self.tokenizer, "all_special_ids", None) or []))
        return torch.isin(self._step_ids, torch.tensor(special, dtype=self._step_ids.dtype, device=t.device))

    def _capture(self, slot: _Slot) -> Callable:
        def fn(t: Tensor, hook: Any) -> None:  # noqa: ARG001
            slot.captured = t

        return fn

    def _splice(self, slot: _Slot) -> Callable:
        from sae_lens.saes.sae import _disable_hooks

        def fn(t: Tensor, hook: Any) -> Tensor:  # noqa: ARG001
            x, slot.captured = (t if slot.captured is None else slot.captured), None
            sae = slot.sae
            out = sae.decode(sae.encode(x))
            mask = self._bypass(slot, t)
            if mask is not None:
                mask = mask.reshape(*mask.shape, *[1] * (t.dim() - 2))
            if slot.use_error_term:
                with torch.no_grad(), _disable_hooks(sae):
                    clean = sae.decode(sae.encode(x))
                error = (t - clean.to(t.dtype)).detach()
                if mask is not None:
                    error = torch.where(mask, torch.zeros_like(error), error)
                if torch.is_grad_enabled():
                    error.requires_grad_(True)  # a leaf of the graph: backward hooks see its gradient
                out = out.to(t.dtype) + self._fire(slot, "hook_sae_error", error)
            out = out.to(t.dtype)
            if mask is not None:
                out = torch.where(mask, t, out)
            return self._fire(slot, "hook_sae_output", out)

        return fn


def names_of(sae: Any, *points: str) -> list[str]:
    """`{hook_name_out}.{point}` for an SAE's points (all of them when none are given)."""
    meta = sae.cfg.metadata
    base = getattr(meta, "hook_name_out", None) or meta.hook_name
    return [f"{base}.{p}" for p in (points or (*SAE_POINTS, *SPLICE_POINTS))]


__all__: Sequence[str] = ("HookedSAETransformer", "names_of")
