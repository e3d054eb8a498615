"""Turning (hook point, function) pairs into torch hooks on the real modules, and taking them off again.

Every installer returns removal callables; `HookedModel.hooks()` calls them in `finally`, so no hook
outlives its context, even when the forward raises.

`hook_resid_mid` is the input of the norm in front of the MLP, which is the residual stream after
attention. Reading it there is exact. An edit must reach two places, the norm's input and the residual
that skips the MLP; the pre-hook replaces the first and the MLP contribution carries the difference to
the second (equal up to float rounding).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from interp.hooks import norms
from interp.hooks.attention import ATTR
from interp.hooks.points import HookPoint

HookFn = Callable[[torch.Tensor, HookPoint], torch.Tensor | None]
Remove = Callable[[], None]


def _first(output):
    return output[0] if isinstance(output, tuple) else output


def _replace_first(output, new):
    return (new, *output[1:]) if isinstance(output, tuple) else new


def _input_of(args, kwargs):
    if args:
        return args[0], True
    return kwargs["hidden_states"], False


def _call(point: HookPoint, fn: HookFn, t: torch.Tensor, gradient: bool = False) -> torch.Tensor | None:
    """Call a hook function on the viewed tensor (or gradient); the full-size replacement, or None."""
    view = point.view.for_gradient() if gradient else point.view
    new = fn(view.get(t), point)
    return None if new is None else view.put(t, new)


def install_forward(root: nn.Module, point: HookPoint, fn: HookFn) -> list[Remove]:
    """Install one forward hook function at one hook point."""
    if point.view.flat:
        fn, remove_axes = _with_token_axes(root, point, fn)
        return [remove_axes, *_install_forward(root, point, fn)]
    return _install_forward(root, point, fn)


def _install_forward(root: nn.Module, point: HookPoint, fn: HookFn) -> list[Remove]:
    module = root.get_submodule(point.module)
    if point.site == "attn":
        table = module.__dict__.setdefault(ATTR, {})
        entry = (fn, point)
        table.setdefault(point.attn_part, []).append(entry)

        def remove() -> None:
            table[point.attn_part].remove(entry)
            if not table[point.attn_part]:
                del table[point.attn_part]

        return [remove]
    if point.site == "norm":
        return [module.register_forward_hook(_norm_hook(module, point, fn), with_kwargs=True).remove]
    if point.site == "result":
        return [module.register_forward_hook(_result_hook(module, point, fn)).remove]
    if point.site == "router":
        return _install_router(module, point, fn)
    if point.site == "output":

        def forward_hook(mod, args, output):
            new = _call(point, fn, _first(output))
            if new is None and point.view.copy:
                new = _first(output).clone()
            return None if new is None else _replace_first(output, new)

        return [module.register_forward_hook(forward_hook).remove]

    delta: dict[str, torch.Tensor] = {}

    def pre_hook(mod, args, kwargs):
        delta.pop("d", None)  # never carry an edit over from a forward that did not finish
        t, positional = _input_of(args, kwargs)
        new = _call(point, fn, t)
        if new is None:
            return None
        if point.delta_module is not None:
            delta["d"] = new - t
        if positional:
            return (new, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": new}

    removes = [module.register_forward_pre_hook(pre_hook, with_kwargs=True).remove]
    if point.delta_module is not None:

        def carry_delta(mod, args, output):
            d = delta.pop("d", None)
            if d is not None and point.delta_scale is not None:
                d = d / point.delta_scale
            return None if d is None else _replace_first(output, _first(output) + d)

        removes.append(root.get_submodule(point.delta_module).register_forward_hook(carry_delta).remove)
    return removes


def _norm_hook(module: nn.Module, point: HookPoint, fn: HookFn):
    """Forward hook showing a norm's scale or normalised input; an edit recomputes the norm's output."""
    spec = norms.norm_spec(module)

    def hook(mod, args, kwargs, output):
        x, _ = _input_of(args, kwargs)
        if point.attn_part == "scale":
            new = fn(norms.scale_of(spec, x), point)
            if new is None:
                return None
            normalized = norms.normalized_of(spec, x, new)
        else:
            normalized = fn(norms.normalized_of(spec, x), point)
            if normalized is None:
                return None
        return _replace_first(output, norms.affine(mod, spec, normalized, _first(output).dtype))

    return hook


def out_proj_heads(module: nn.Module, n_heads: int) -> torch.Tensor:
    """[head, d_head, d_model]: the output projection's weight per head (Linear or GPT-2's Conv1D)."""
    w = module.weight
    if type(module).__name__ == "Conv1D":  # [in, out]
        return w.unflatten(0, (n_heads, -1))
    return w.t().unflatten(0, (n_heads, -1))


def _result_hook(module: nn.Module, point: HookPoint, fn: HookFn):
    """Forward hook on the output projection: per-head outputs z_h @ W_O[h] (bias left out, as in TL)."""

    def hook(mod, args, output):
        z = args[0]
        w = out_proj_heads(mod, point.view.heads)
        result = torch.einsum("...hd,hdm->...hm", z.unflatten(-1, (point.view.heads, -1)), w)
        new = fn(result, point)
        if new is None:
            return None
        out = new.sum(-2)
        return out + mod.bias if getattr(mod, "bias", None) is not None else out

    return hook


def _install_router(module: nn.Module, point: HookPoint, fn: HookFn) -> list[Remove]:
    """One of a router's three outputs (logits, top-k weights, top-k indices), handed to `fn`."""

    def on_router(mod, args, output):
        t = output[point.view.part]
        new = fn(t, point)
        if new is None:
            return None
        return (*output[: point.view.part], new.to(t.dtype), *output[point.view.part + 1 :])

    return [module.register_forward_hook(on_router).remove]


def _with_token_axes(root: nn.Module, point: HookPoint, fn: HookFn) -> tuple[HookFn, Remove]:
    """`fn` wrapped to see [batch, pos, ...] where the module sees [batch * pos, ...]: the block, whose input
    still has both axes, records them on the way in."""
    lead: dict[str, torch.Size] = {}

    def remember(mod, args, kwargs):
        lead["shape"] = _input_of(args, kwargs)[0].shape[:-1]

    def wrapped(t: torch.Tensor, hook: HookPoint) -> torch.Tensor | None:
        new = fn(t.view(*lead["shape"], *t.shape[1:]), hook)
        return None if new is None else new.reshape(t.shape)

    block = root.get_submodule(point.stop_module)
    return wrapped, block.register_forward_pre_hook(remember, with_kwargs=True).remove


def install_backward(root: nn.Module, point: HookPoint, fn: HookFn) -> list[Remove]:
    """Install a gradient hook: `fn(grad, hook)` sees d(loss)/d(activation) in the point's view.

    Returning a tensor replaces the gradient that flows further back.
    """

    def on_tensor(t: torch.Tensor) -> None:
        if t.requires_grad:
            t.register_hook(lambda g: _call(point, fn, g, gradient=True))

    if point.site in ("attn", "norm", "result", "router"):  # derived tensors: hand them back so they join the graph

        def observe(seen: torch.Tensor, _point: HookPoint) -> torch.Tensor:
            if seen.requires_grad:
                seen.register_hook(lambda g: fn(g, point))
            return seen  # handed back so that the forward uses the very tensor whose gradient we hook

        return install_forward(root, point, observe)
    removes = []
    if point.view.flat:
        fn, remove_axes = _with_token_axes(root, point, fn)
        removes.append(remove_axes)
    module = root.get_submodule(point.module)
    if point.site == "output":
        return [*removes, module.register_forward_hook(lambda m, a, out: on_tensor(_first(out))).remove]
    pre = module.register_forward_pre_hook(lambda m, a, kw: on_tensor(_input_of(a, kw)[0]), with_kwargs=True)
    return [*removes, pre.remove]
