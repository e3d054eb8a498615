"""The residual-stream graph of a transformer: the nodes and edges edge-attribution methods score.

Upstream nodes write to the residual stream: `input` (token + position embeddings), every attention
head `a{l}.h{h}` (its output z_h W_O[h], bias left out) and every MLP `m{l}` (`hook_mlp_out`).
Downstream nodes read from it: each head's query input `a{l}.h{h}<q>`, each key/value head's inputs
`a{l}.kv{g}<k>`, `a{l}.kv{g}<v>` (grouped-query models share them between query heads; with
`qkv=False` and as many key/value heads as heads, one input per head `a{l}.h{h}`), every MLP's input
`m{l}` and the `logits` (the final norm's input). An edge u -> d exists when u writes before d reads:
a head feeds the MLP of its own layer in a sequential block but not in a parallel one (GPT-NeoX).

The input of a downstream node is the sum of the upstream outputs before it (plus biases), so patching
edge u -> d means giving d the input x_d - a_u + a'_u, with a' the corrupted (or mean, or zero) output;
`circuits.evaluation.edge_patching` runs exactly that, and `circuits.finders.eap` its first-order estimate.

Sizes: GPT-2 small (12 layers, 12 heads, q/k/v inputs) has 32,491 edges, the count of Hanna et al.'s
EAP-IG graph; SmolLM2-135M (30 layers, 9 heads, 3 key/value heads) has `EdgeGraph.of(model).n_edges`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

ATTN_NORMS = ("input_layernorm", "ln_1")
"""Module names (inside a block) of the norm in front of attention, tried in order."""


@dataclass(frozen=True)
class EdgeGraph:
    """Node names, their places along the residual stream, and which (upstream, downstream) pairs are edges."""

    n_layers: int
    n_heads: int
    n_kv: int
    parallel: bool
    qkv: bool = True

    def __post_init__(self) -> None:
        if not self.qkv and self.n_kv != self.n_heads:
            raise ValueError(
                f"qkv=False needs one key/value head per head; this model has {self.n_kv} for {self.n_heads} "
                "heads (grouped-query): use qkv=True"
            )

    @classmethod
    def of(cls, model, qkv: bool = True) -> EdgeGraph:
        a = model.adapter
        if a.sandwich_norms:
            raise ValueError(
                f"edge attribution needs attention and MLP outputs added straight to the residual stream; "
                f"{model.config.model_type} adds them through a norm (sandwich norms), which is not supported"
            )
        if a.mlp_pre is None:
            raise ValueError(
                f"edge attribution reads each MLP's input through its input projection (mlp.hook_pre); "
                f"{model.config.model_type} has a mixture of experts, with no single MLP input projection, "
                "which is not supported"
            )
        return cls(model.n_layers, model.n_heads, model.n_kv_heads, a.is_parallel(model.config), qkv)

    # ------------------------------------------------------------------ upstream
    @property
    def up_per_layer(self) -> int:
        return self.n_heads + 1

    def head_up(self, layer: int, head: int) -> int:
        return 1 + layer * self.up_per_layer + head

    def mlp_up(self, layer: int) -> int:
        return 1 + layer * self.up_per_layer + self.n_heads

    @cached_property
    def upstream(self) -> list[str]:
        names = ["input"]
        for layer in range(self.n_layers):
            names += [f"a{layer}.h{h}" for h in range(self.n_heads)] + [f"m{layer}"]
        return names

    # ------------------------------------------------------------------ downstream
    @property
    def n_attn_in(self) -> int:
        """Downstream attention inputs per layer."""
        return self.n_heads + 2 * self.n_kv if self.qkv else self.n_heads

    @property
    def down_per_layer(self) -> int:
        return self.n_attn_in + 1

    def attn_down(self, layer: int) -> slice:
        start = layer * self.down_per_layer
        return slice(start, start + self.n_attn_in)

    def mlp_down(self, layer: int) -> int:
        return layer * self.down_per_layer + self.n_attn_in

    @property
    def logits_down(self) -> int:
        return self.n_layers * self.down_per_layer

    @cached_property
    def downstream(self) -> list[str]:
        names = []
        for layer in range(self.n_layers):
            if self.qkv:
                names += [f"a{layer}.h{h}<q>" for h in range(self.n_heads)]
                names += [f"a{layer}.kv{g}<{x}>" for x in "kv" for g in range(self.n_kv)]
            else:
                names += [f"a{layer}.h{h}" for h in range(self.n_heads)]
            names.append(f"m{layer}")
        return names + ["logits"]

    # ------------------------------------------------------------------ edges
    def up_limit(self, down: int) -> int:
        """Number of leading upstream nodes that can feed downstream node `down` (all of them do)."""
        if down == self.logits_down:
            return len(self.upstream)
        layer, r = divmod(down, self.down_per_layer)
        if r < self.n_attn_in or self.parallel:
            return 1 + layer * self.up_per_layer
        return 1 + layer * self.up_per_layer + self.n_heads

    @cached_property
    def valid(self) -> Tensor:
        """BoolTensor [n_up, n_down]: which pairs are edges."""
        v = torch.zeros(len(self.upstream), len(self.downstream), dtype=torch.bool)
        for d in range(len(self.downstream)):
            v[: self.up_limit(d), d] = True
        return v

    @property
    def n_edges(self) -> int:
        return int(self.valid.sum())

    def edge_name(self, up: int, down: int) -> str:
        return f"{self.upstream[up]}->{self.downstream[down]}"


def attn_norm(model, layer: int):
    """The norm module in front of layer `layer`'s attention."""
    blk = model.hf_model.get_submodule(f"{model.adapter.layers}.{layer}")
    if getattr(model.adapter, "attn_norm", None):
        return blk.get_submodule(model.adapter.attn_norm)
    for name in ATTN_NORMS:
        if hasattr(blk, name):
            return getattr(blk, name)
    raise ValueError(
        f"cannot find the attention norm of {model.config.model_type} blocks (looked for {', '.join(ATTN_NORMS)})"
    )


def mlp_norm(model, layer: int):
    return model.hf_model.get_submodule(f"{model.adapter.layers}.{layer}.{model.adapter.mlp_norm}")


def final_norm(model):
    return model.hf_model.get_submodule(model.adapter.final_norm)


def norm_vjp(norm, x: Tensor, g: Tensor) -> Tensor:
    """Gradients at the norm's input [b, p, K, d] for K output gradients g [b, p, K, d], one input x [b, p, d].

    Exact for any per-token norm (LayerNorm, RMSNorm): the norm is re-run (its `forward`, so no hook fires) on K copies
    of x.
    """
    with torch.enable_grad():
        X = x.detach()[:, :, None, :].expand(g.shape).clone().requires_grad_(True)
        (gx,) = torch.autograd.grad(norm.forward(X), X, g.to(X.dtype))
    return gx


def head_outputs(z: Tensor, W_o: Tensor, n_heads: int) -> Tensor:
    """Per-head residual writes [b, p, H, d] from hook_z [b, p, H, dh] and W_O [d, H * dh] (bias left out)."""
    d = W_o.shape[0]
    return torch.einsum("bphe,dhe->bphd", z, W_o.view(d, n_heads, -1).to(z.dtype))
