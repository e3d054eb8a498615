"""Hook points: the TransformerLens-named places of one model, each tied to a site on a real HF module.

A `HookPoint` says *where* (module path and site) and *how the tensor looks to a hook function* (a
`View`: heads split out, or one part of a fused q|k|v projection). `build_points` derives the whole
list from an `Adapter` and the model config; the list is in forward order, which is what lets a cached
forward stop right after the last hook it needs.

Sites:
- "output": a forward hook on the module; the hook sees (a view of) its output.
- "input": a forward pre-hook; the hook sees (a view of) its first input.
- "attn": inside the attention function (`interp.hooks.attention`): `rot_q`, `rot_k`, `scores`, `pattern`.
- "norm": derived from a norm module's input (`interp.hooks.norms`): `hook_scale`, `hook_normalized`.
- "result": per-head outputs of the attention output projection (`attn.hook_result`), computed from its
  input only while a hook is installed there.
- "router": one of the three outputs of a mixture-of-experts router (logits, top-k weights, top-k
  indices), shown as [batch, pos, ...] although the router sees the tokens flattened.

Points marked `on_demand` (today `attn.hook_result`, [batch, pos, head, d_model], n_heads times the size
of `hook_attn_out`) are left out when a caller selects "everything" (`names=None`); name them to get them.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

import torch

from interp.adapters.base import Adapter

Site = Literal["output", "input", "attn", "norm", "result", "router"]


@dataclass(frozen=True)
class View:
    """How a hook function sees a module tensor: one part of a fused projection, heads split out, scaled.

    A part is picked either per head (`fused="neox"`: [q_h | k_h | v_h] for each head) or as one of the
    consecutive blocks of widths `split` (q | k | v, gate | up). `scale` multiplies what the hook sees
    (Granite's residual multiplier: the hook sees what the residual stream receives).
    """

    heads: int | None = None
    """Split the last dimension into (heads, d_head)."""
    fused: Literal["neox"] | None = None
    """Per-head interleaved q|k|v; `part` picks q (0), k (1) or v (2)."""
    part: int = 0
    split: tuple[int, ...] | None = None
    """Widths of consecutive blocks along the last dimension; `part` picks one."""
    scale: float | None = None
    copy: bool = False
    """Hand the module's consumer a copy of the output (it is modified in place afterwards)."""
    flat: bool = False
    """The module sees batch and position flattened into one axis (OPT's MLP, MoE routers): the hook function
    sees them unflattened, [batch, pos, ...], as everywhere else."""

    def _part(self, t: torch.Tensor) -> torch.Tensor:
        """The viewed part of `t`, heads split out: a view into `t` (no copy)."""
        if self.fused == "neox":  # per head: [q_h | k_h | v_h]
            return t.view(*t.shape[:-1], self.heads, 3, -1)[..., self.part, :]
        if self.split is not None:
            t = t.split(self.split, dim=-1)[self.part]
        return t.unflatten(-1, (self.heads, -1)) if self.heads is not None else t

    def get(self, t: torch.Tensor) -> torch.Tensor:
        """The tensor the hook function sees."""
        return self._part(t) if self.scale is None else self._part(t) * self.scale

    def put(self, t: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """The module tensor with the hook's replacement of the viewed part written in (out of place)."""
        if self.scale is not None:
            new = new / self.scale
        if self.fused is None and self.split is None:
            return new.flatten(-2) if self.heads is not None else new
        out = t.clone()
        self._part(out).copy_(new)
        return out

    def for_gradient(self) -> View:
        """The view of d(loss)/d(module tensor) as the gradient of what the hook sees: a scaled tensor's
        gradient is divided by the scale, not multiplied."""
        return self if self.scale is None else replace(self, scale=1.0 / self.scale)


class LayerIndex(int):
    """A block index that is also callable, so both our `hook.layer` and TransformerLens's `hook.layer()` work."""

    def __call__(self) -> int:
        return int(self)

    def __repr__(self) -> str:
        return int.__repr__(self)


@dataclass(frozen=True)
class HookPoint:
    """One named hook point; passed to hook functions as `hook` (so `hook.name`, `hook.layer` work).

    `hook.layer` is an int (None outside the blocks) that may also be called, TL style: `hook.layer()`.
    """

    name: str
    layer: int | None
    site: Site
    module: str
    """Module path relative to the causal-LM model."""
    view: View = field(default_factory=View)
    attn_part: str | None = None
    """For site "attn": "rot_q", "rot_k", "scores" or "pattern"; for site "norm": "scale" or "normalized"."""
    delta_module: str | None = None
    """For resid_mid: the module whose output must carry an edit of the residual (see `install`)."""
    delta_scale: float | None = None
    """What the block multiplies `delta_module`'s output by before adding it (Granite's residual multiplier)."""
    stop_module: str = ""
    """The module after whose forward a cached run may stop once this point has fired."""
    on_demand: bool = False
    """Large points left out of "everything" (`names=None`); selected only by name, glob or predicate."""

    def __post_init__(self):
        if self.layer is not None and not isinstance(self.layer, LayerIndex):
            object.__setattr__(self, "layer", LayerIndex(self.layer))

    def __repr__(self) -> str:
        return f"HookPoint({self.name})"


def _norm_points(prefix: str, layer: int | None, module: str, stop: str, flat: bool = False) -> list[HookPoint]:
    return [
        HookPoint(f"{prefix}.hook_{part}", layer, "norm", module, View(flat=flat), part, stop_module=stop)
        for part in ("scale", "normalized")
    ]


def build_points(adapter: Adapter, config) -> list[HookPoint]:
    """All hook points of a model, in forward order."""
    n_layers = config.num_hidden_layers
    n_heads = config.num_attention_heads
    n_kv = adapter.n_kv_heads(config)
    d_head = getattr(config, "head_dim", None) or config.hidden_size // n_heads
    d_mlp = getattr(config, "intermediate_size", None)
    scale = getattr(config, adapter.residual_multiplier) if adapter.residual_multiplier else None
    flat = adapter.mlp_tokens_flat
    points = [HookPoint("hook_embed", None, "output", adapter.embed, stop_module=adapter.embed)]
    if adapter.pos_embed:
        points.append(HookPoint("hook_pos_embed", None, "output", adapter.pos_embed, stop_module=adapter.pos_embed))
    parallel = adapter.is_parallel(config)
    for layer in range(n_layers):
        blk = f"{adapter.layers}.{layer}"
        b, a = f"blocks.{layer}", f"blocks.{layer}.attn"

        def pt(name, site, module, **kw):
            return HookPoint(name, layer, site, f"{blk}.{module}" if module else blk, stop_module=blk, **kw)  # noqa: B023

        points.append(pt(f"{b}.hook_resid_pre", "input", ""))
        if adapter.attn_norm:
            points += _norm_points(f"{b}.ln1", layer, f"{blk}.{adapter.attn_norm}", blk)
        if adapter.qkv_layout == "separate":
            q, k, v = adapter.qkv
            points += [
                pt(f"{a}.hook_q", "output", q, view=View(heads=n_heads)),
                pt(f"{a}.hook_k", "output", k, view=View(heads=n_kv)),
                pt(f"{a}.hook_v", "output", v, view=View(heads=n_kv)),
            ]
        else:
            heads = (n_heads, n_kv, n_kv)
            split = None if adapter.qkv_layout == "neox" else tuple(h * d_head for h in heads)
            fused = "neox" if adapter.qkv_layout == "neox" else None
            points += [
                pt(f"{a}.hook_{x}", "output", adapter.qkv[0], view=View(heads[i], fused, i, split))
                for i, x in enumerate("qkv")
            ]
        if adapter.attn_function:
            points += [
                pt(f"{a}.hook_rot_q", "attn", adapter.attn, attn_part="rot_q"),
                pt(f"{a}.hook_rot_k", "attn", adapter.attn, attn_part="rot_k"),
                pt(f"{a}.hook_attn_scores", "attn", adapter.attn, attn_part="scores"),
                pt(f"{a}.hook_pattern", "attn", adapter.attn, attn_part="pattern"),
            ]
        points += [
            pt(f"{a}.hook_z", "input", adapter.out_proj, view=View(heads=n_heads)),
            pt(f"{a}.hook_result", "result", adapter.out_proj, view=View(heads=n_heads), on_demand=True),
        ]
        if adapter.sandwich_norms:
            points += _norm_points(f"{b}.ln1_post", layer, f"{blk}.{adapter.attn_contrib}", blk)
        points.append(pt(f"{b}.hook_attn_out", "output", adapter.attn_contrib, view=View(scale=scale)))
        if not parallel:
            mid = adapter.mlp_norm or adapter.mlp
            delta = f"{blk}.{adapter.mlp_contrib}"
            points.append(
                pt(f"{b}.hook_resid_mid", "input", mid, view=View(flat=flat), delta_module=delta, delta_scale=scale)
            )
        if adapter.mlp_norm:
            points += _norm_points(f"{b}.ln2", layer, f"{blk}.{adapter.mlp_norm}", blk, flat)
        if adapter.moe_router:
            points += [
                pt(f"{b}.mlp.hook_{x}", "router", adapter.moe_router, view=View(part=i, flat=True))
                for i, x in enumerate(("router_logits", "expert_weights", "expert_indices"))
            ]
        if adapter.mlp_pre:
            halves = (d_mlp, d_mlp) if adapter.gate_up_fused else None
            points.append(
                pt(f"{b}.mlp.hook_pre", "output", adapter.mlp_pre, view=View(split=halves, part=0, flat=flat))
            )
            if adapter.mlp_pre_linear or adapter.gate_up_fused:
                up = adapter.mlp_pre_linear or adapter.mlp_pre
                points.append(pt(f"{b}.mlp.hook_pre_linear", "output", up, view=View(split=halves, part=1, flat=flat)))
        if adapter.mlp_down:
            points.append(pt(f"{b}.mlp.hook_post", "input", adapter.mlp_down, view=View(flat=flat)))
        if adapter.sandwich_norms:
            points += _norm_points(f"{b}.ln2_post", layer, f"{blk}.{adapter.mlp_contrib}", blk)
        points += [
            pt(
                f"{b}.hook_mlp_out",
                "output",
                adapter.mlp_contrib,
                view=View(scale=scale, flat=flat, copy=adapter.mlp_out_mutated),
            ),
            pt(f"{b}.hook_resid_post", "output", ""),
        ]
    points += _norm_points("ln_final", None, adapter.final_norm, adapter.final_norm)
    return points


def absent_points(adapter: Adapter, config) -> dict[str, str]:
    """TransformerLens hook names that have no meaning in this family -> what to use instead."""
    absent = {}
    if adapter.moe_router:
        instead = "blocks.{l}.mlp.hook_router_logits / hook_expert_weights / hook_expert_indices, or hook_mlp_out"
        for name in ("mlp.hook_pre", "mlp.hook_pre_linear", "mlp.hook_post"):
            absent[f"blocks.*.{name}"] = f"a mixture of experts has no single MLP pre-activation; use {instead}"
    if not adapter.attn_function:
        for name in ("hook_rot_q", "hook_rot_k", "hook_attn_scores", "hook_pattern"):
            absent[f"blocks.*.attn.{name}"] = (
                f"{config.model_type}'s attention does not call transformers' attention functions, so its scores "
                "and pattern are not hook points; use blocks.{l}.attn.hook_q / hook_k / hook_v / hook_z"
            )
    if adapter.is_parallel(config):
        absent["blocks.*.hook_resid_mid"] = (
            "attention and MLP read the same residual in this model (parallel blocks): there is no residual "
            "between them; use blocks.{l}.hook_resid_pre + hook_attn_out"
        )
    return absent


class UnknownHookError(ValueError):
    """A hook name or pattern that names no hook point of this model."""


NameFilter = str | Iterable[str] | Callable[[str], bool] | None


def select_points(points: list[HookPoint], names: NameFilter, absent: dict[str, str] | None = None) -> list[HookPoint]:
    """Points chosen by exact names, glob patterns, or a predicate; None means all. In forward order.

    An exact name that does not exist, or a pattern that matches nothing, raises `UnknownHookError` that
    lists the nearest valid names, or says what to use instead when `absent` (from `absent_points`) knows it.
    """
    if names is None:
        return [p for p in points if not p.on_demand]
    if callable(names):
        return [p for p in points if names(p.name)]
    wanted = [names] if isinstance(names, str) else list(names)
    by_name = {p.name: p for p in points}
    chosen: set[str] = set()
    for pattern in wanted:
        if any(c in pattern for c in "*?["):
            hits = fnmatch.filter(by_name, pattern)
        else:
            hits = [pattern] if pattern in by_name else []
        if not hits:
            for missing, why in (absent or {}).items():
                if fnmatch.fnmatch(pattern, missing) or pattern == missing:
                    raise UnknownHookError(f"{pattern!r} is not a hook point of this model: {why}")
            near = difflib.get_close_matches(pattern, list(by_name), n=5, cutoff=0.4)
            raise UnknownHookError(
                f"unknown hook name {pattern!r}; nearest valid names: {', '.join(near) or '(none)'}. "
                "See model.hook_names() for the full list."
            )
        chosen.update(hits)
    return [p for p in points if p.name in chosen]
