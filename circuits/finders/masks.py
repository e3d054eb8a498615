"""Differentiable unit masks over a `HookedModel`, through its public hook points; shared by both finders.

A *site* is one kind of unit in one layer (kinds in `KINDS`): heads on `blocks.{l}.attn.hook_z`
[batch, pos, head, d_head] (true per-head outputs, before the output projection), neurons on
`blocks.{l}.mlp.hook_post`, q/k/v channels on `attn.hook_q|k|v`, residual channels written by a
sub-layer on `hook_attn_out|hook_mlp_out`, residual channels on `hook_resid_*`, and `head_compat`: the
official SafeSeek code's "head", a contiguous d_model/n_heads slice of the attention block's output
after the output projection.

A mask value m in [0, 1] per unit replaces activation x by `m * x + (1 - m) * mu`, with mu = 0 (zero
ablation, SafeSeek) or the unit's mean activation (mean ablation, weight-sparse pruning).

Gates from a real logit l per unit (`gate()`):
    "ste"            forward 1[sigmoid(l/T) >= 0.5] = 1[l >= 0]; backward d sigmoid(l/T)/dl (straight-through).
                     This is SafeSeek's estimator and Gao et al.'s Heaviside with sigmoid-derivative surrogate.
    "hard_concrete"  Louizos et al.'s stretched, clamped concrete sample while training; its mean at eval.
    "sigmoid"        the soft mask sigmoid(l/T) (the "without STE" ablation of SafeSeek's Table 3).

    >>> masks = UnitMasks(model, kinds=("head", "neuron"))
    >>> with model.hooks(fwd_hooks=masks.hooks()):
    ...     loss = task.loss(model(batch.ids), batch)    # gradients reach masks.logits
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

Gate = Literal["ste", "hard_concrete", "sigmoid"]

KINDS = {
    "head": "blocks.{l}.attn.hook_z",
    "head_compat": "blocks.{l}.hook_attn_out",
    "neuron": "blocks.{l}.mlp.hook_post",
    "q": "blocks.{l}.attn.hook_q",
    "k": "blocks.{l}.attn.hook_k",
    "v": "blocks.{l}.attn.hook_v",
    "attn_out": "blocks.{l}.hook_attn_out",
    "mlp_out": "blocks.{l}.hook_mlp_out",
    "resid_pre": "blocks.{l}.hook_resid_pre",
    "resid_mid": "blocks.{l}.hook_resid_mid",
    "resid_post": "blocks.{l}.hook_resid_post",
}
"""Node kind -> hook point (with {l} the layer)."""

HC_BETA, HC_GAMMA, HC_ZETA = 2 / 3, -0.1, 1.1  # hard-concrete constants (Louizos et al. 2018)


def d_mlp(model) -> int:
    c = model.config
    return getattr(c, "intermediate_size", None) or getattr(c, "n_inner", None) or 4 * model.d_model


def site_size(model, kind: str) -> int:
    """Number of units of one kind in one layer."""
    if kind in ("head", "head_compat"):
        return model.n_heads
    if kind == "neuron":
        return d_mlp(model)
    if kind == "q":
        return model.n_heads * model.d_head
    if kind in ("k", "v"):
        return model.n_kv_heads * model.d_head
    if kind in KINDS:
        return model.d_model
    raise ValueError(f"unknown unit kind {kind!r}; known: {', '.join(KINDS)}")


@dataclass(frozen=True)
class Site:
    kind: str
    layer: int
    hook: str
    size: int

    @property
    def key(self) -> str:
        return f"{self.kind}_{self.layer}"


def sites_of(model, kinds, layers=None) -> list[Site]:
    """The sites of the given kinds (all layers unless `layers`), checked against the model's hook points."""
    layers = range(model.n_layers) if layers is None else layers
    names = set(model.hook_names())
    out = []
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"unknown unit kind {kind!r}; known: {', '.join(KINDS)}")
        for layer in layers:
            hook = KINDS[kind].format(l=layer)
            if hook not in names:
                raise ValueError(
                    f"this model has no hook point {hook!r} for kind {kind!r} (a parallel residual has no resid_mid)"
                )
            out.append(Site(kind, layer, hook, site_size(model, kind)))
    return out


def expand(mask: Tensor, kind: str, t: Tensor) -> Tensor:
    """Broadcast a per-unit mask [n] to the trailing shape of the hooked tensor."""
    if kind == "head":  # t: [..., head, d_head]
        return mask[:, None].expand(t.shape[-2:])
    if kind in ("q", "k", "v"):  # t: [..., head, d_head], units are flattened channels
        return mask.view(t.shape[-2:])
    if kind == "head_compat":  # t: [..., d_model], contiguous slices of d_model / n_heads
        return mask.repeat_interleave(t.shape[-1] // mask.numel())
    return mask


def apply(t: Tensor, mask: Tensor, kind: str, mean: Tensor | None = None) -> Tensor:
    """Masked activation: m * x (+ (1 - m) * mean when mean-ablating)."""
    m = expand(mask.to(t.dtype), kind, t)
    return t * m if mean is None else t * m + mean.to(t.dtype) * (1 - m)


def gate(logits: Tensor, mode: Gate = "ste", temperature: float = 1.0, training: bool = True) -> Tensor:
    """Mask values in [0, 1] from unit logits (see the module docstring)."""
    if mode == "ste":
        soft = torch.sigmoid(logits / temperature)
        return (soft >= 0.5).to(soft.dtype) - soft.detach() + soft
    if mode == "sigmoid":
        return torch.sigmoid(logits / temperature)
    if mode == "hard_concrete":
        if training:
            u = torch.rand_like(logits).clamp(1e-6, 1 - 1e-6)
            s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + logits) / HC_BETA)
        else:
            s = torch.sigmoid(logits)
        return (s * (HC_ZETA - HC_GAMMA) + HC_GAMMA).clamp(0, 1)
    raise ValueError(f"unknown gate {mode!r}; use ste, hard_concrete or sigmoid")


def hard(logits: Tensor) -> Tensor:
    """The binary mask a logit vector stands for: unit kept iff sigmoid(l) >= 0.5, i.e. l >= 0."""
    return (logits >= 0).float()


class UnitMasks(nn.Module):
    """One logit per unit at every site; `hooks()` gives the fwd_hooks that apply the masks."""

    def __init__(
        self,
        model,
        kinds=("head", "neuron"),
        layers=None,
        init: float = 1.0,
        init_std: float = 0.0,
        gate: Gate = "ste",
        temperature: float = 1.0,
        means: dict[str, Tensor] | None = None,
        clamp: tuple[float, float] | None = None,
        seed: int = 0,
    ):
        super().__init__()
        self.sites = sites_of(model, kinds, layers)
        gen = torch.Generator().manual_seed(seed)
        self.logits = nn.ParameterDict(
            {
                s.key: nn.Parameter((init + init_std * torch.randn(s.size, generator=gen)).to(model.device))
                for s in self.sites
            }
        )
        self.gate_mode: Gate = gate
        self.temperature = temperature
        self.means = means
        self.clamp = clamp

    @property
    def n_units(self) -> int:
        return sum(s.size for s in self.sites)

    def values(self, invert: bool = False) -> dict[str, Tensor]:
        """Current mask values per site (differentiable); `invert` gives 1 - m (keep only the off units)."""
        out = {}
        for s in self.sites:
            m = gate(self.logits[s.key], self.gate_mode, self.temperature, self.training)
            out[s.key] = 1 - m if invert else m
        return out

    def hooks(self, invert: bool = False) -> list:
        """fwd_hooks for `model.hooks(...)` applying the current masks."""
        return mask_hooks(self.sites, self.values(invert), self.means)

    def binary(self) -> dict[str, Tensor]:
        """Kept (1) / removed (0) per unit, from the logits' signs."""
        return {s.key: hard(self.logits[s.key].detach()) for s in self.sites}

    def kept_count(self) -> Tensor:
        """Differentiable number of kept units (sum of gate values)."""
        return sum(v.sum() for v in self.values().values())

    def sigmoid_mean(self) -> dict[str, Tensor]:
        """Mean sigmoid(l) per site (the sparsity terms of SafeSeek's objectives read these)."""
        return {s.key: torch.sigmoid(self.logits[s.key]).mean() for s in self.sites}

    def clamp_(self) -> None:
        if self.clamp is not None:
            with torch.no_grad():
                for p in self.logits.values():
                    p.clamp_(*self.clamp)

    def removed_nodes(self):
        """Units whose mask is 0, as circuit `Node`s."""
        from circuits.format.circuit import Node

        return [
            Node(s.layer, s.kind, int(i)) for s in self.sites for i in torch.nonzero(self.binary()[s.key] == 0)[:, 0]
        ]

    def kept_nodes(self):
        from circuits.format.circuit import Node

        return [
            Node(s.layer, s.kind, int(i)) for s in self.sites for i in torch.nonzero(self.binary()[s.key] == 1)[:, 0]
        ]


def mask_hooks(sites: list[Site], values: dict[str, Tensor], means: dict[str, Tensor] | None = None) -> list:
    """fwd_hooks applying fixed or differentiable per-unit masks at the given sites."""
    hooks = []
    for s in sites:
        m = values[s.key]
        mu = None if means is None else means[s.key]

        def fn(t, hook, m=m, kind=s.kind, mu=mu):
            return apply(t, m.to(t.device), kind, None if mu is None else mu.to(t.device))

        hooks.append((s.hook, fn))
    return hooks


def nodes_to_masks(model, nodes, kinds=None, keep: bool = False) -> tuple[list[Site], dict[str, Tensor]]:
    """Sites and binary masks with the given nodes removed (or, with `keep=True`, only them kept)."""
    kinds = kinds or sorted({n.kind for n in nodes})
    sites = sites_of(model, kinds)
    values = {s.key: torch.full((s.size,), 0.0 if keep else 1.0) for s in sites}
    for n in nodes:
        key = f"{n.kind}_{n.layer}"
        if key not in values or n.index >= values[key].numel():
            raise ValueError(
                f"node {n.key} does not exist in this model (site size {values.get(key, torch.empty(0)).numel()})"
            )
        values[key][n.index] = 1.0 if keep else 0.0
    return sites, values


@torch.no_grad()
def site_means(model, sites: list[Site], batches) -> dict[str, Tensor]:
    """Mean activation of each site's hook over the non-padded tokens of `batches` ((ids, mask) pairs)."""
    sums: dict[str, Tensor] = {}
    count = 0
    names = sorted({s.hook for s in sites})
    # chunks of 32 rows: caching every unit of a 30-layer model for 512 prompts at once needs ~4.5 GB (SmolLM2)
    chunks = [(ids[i : i + 32], mask[i : i + 32]) for ids, mask in batches for i in range(0, ids.shape[0], 32)]
    for ids, mask in chunks:
        _, cache = model.run_with_cache({"input_ids": ids, "attention_mask": mask}, names=names, return_logits=False)
        keep = mask.bool().to(model.device)
        count += int(keep.sum())
        for s in sites:
            x = cache[s.hook][keep]  # [tokens, ...]
            sums[s.key] = sums.get(s.key, 0) + x.sum(0)
    if count == 0:
        raise ValueError("no tokens to average over")
    return {k: v / count for k, v in sums.items()}


def sigmoid_prime(x: Tensor) -> Tensor:
    s = torch.sigmoid(x)
    return s * (1 - s)


__all__ = [
    "KINDS",
    "Site",
    "UnitMasks",
    "apply",
    "gate",
    "hard",
    "mask_hooks",
    "nodes_to_masks",
    "site_means",
    "sites_of",
    "site_size",
    "sigmoid_prime",
]
