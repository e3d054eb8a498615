"""Per-layer weight matrices of a `HookedModel`, in one orientation ([out, in]), found through its adapter.

Used for circuit edges (nonzero weights connecting kept nodes; virtual weights between heads and
neurons) and for Safety Circuit Tuning (gradient masks on the rows and columns of circuit units).
The fused q|k|v of GPT-NeoX (per head) and of GPT-2 (q | k | v blocks, Conv1D stored [in, out]) are
split here; Llama and Gemma 3 have separate projections (with grouped key/value heads).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn


def _is_conv1d(module: nn.Module) -> bool:
    return type(module).__name__ == "Conv1D"  # GPT-2 stores weight as [in, out]


def oriented(module: nn.Module) -> Tensor:
    """The module's weight as [out, in]."""
    return module.weight.T if _is_conv1d(module) else module.weight


@dataclass
class LayerWeights:
    """[out, in] weights of one block: W_q [H*dh, d], W_k/W_v [Hkv*dh, d], W_o [d, H*dh], W_in/W_out."""

    W_q: Tensor
    W_k: Tensor
    W_v: Tensor
    W_o: Tensor
    W_in: Tensor
    W_out: Tensor
    W_up: Tensor | None = None


def layer_weights(model, layer: int) -> LayerWeights:
    """Weights of block `layer` (views into the model's parameters, detached)."""
    a = model.adapter
    blk = model.hf_model.get_submodule(f"{a.layers}.{layer}")
    H, dh, d = model.n_heads, model.d_head, model.d_model
    if a.qkv_layout == "separate":
        q, k, v = (oriented(blk.get_submodule(p)).detach() for p in a.qkv)
    else:
        fused = oriented(blk.get_submodule(a.qkv[0])).detach()
        if a.qkv_layout == "neox":  # rows per head: [q_h | k_h | v_h]
            per = fused.view(H, 3, dh, d)
            q, k, v = (per[:, i].reshape(H * dh, d) for i in range(3))
        else:  # gpt2 / split: [q | k | v] blocks, k and v n_kv_heads * d_head rows each (Phi-3, Falcon multi-query)
            kv = model.n_kv_heads * dh
            q, k, v = fused.split([H * dh, kv, kv], dim=0)
    pre = oriented(blk.get_submodule(a.mlp_pre)).detach()
    up = oriented(blk.get_submodule(a.mlp_pre_linear)).detach() if a.mlp_pre_linear else None
    if a.gate_up_fused:  # one projection packs gate | up (Phi-3, GLM): mlp.hook_pre is its first half
        pre, up = pre.chunk(2, dim=0)
    return LayerWeights(
        q,
        k,
        v,
        oriented(blk.get_submodule(a.out_proj)).detach(),
        pre,
        oriented(blk.get_submodule(a.mlp_down)).detach(),
        up,
    )


def unit_param_masks(model, nodes) -> dict[nn.Parameter, Tensor]:
    """For each parameter touched by the units, a 0/1 mask (in the parameter's own layout) of their entries.

    A head owns its q/k/v rows and its output-projection columns; a neuron its input row(s) (and bias)
    and its output column; a q/k/v channel its row; a residual-write channel (attn_out, mlp_out) its
    output-projection row. Grouped key/value heads are shared, so a head's k/v rows are its group's.
    """
    a = model.adapter
    H, Hkv, dh = model.n_heads, model.n_kv_heads, model.d_head
    masks: dict[nn.Parameter, Tensor] = {}

    def mark(module: nn.Module, rows=None, cols=None) -> None:
        """Mark rows/cols of the [out, in] weight (and bias entries for rows)."""
        w = module.weight
        m = masks.setdefault(w, torch.zeros_like(w))
        view = m.T if _is_conv1d(module) else m
        if rows is not None:
            view[rows] = 1
            if getattr(module, "bias", None) is not None:
                masks.setdefault(module.bias, torch.zeros_like(module.bias))[rows] = 1
        if cols is not None:
            view[:, cols] = 1

    def qkv_rows(part: int, channels: list[int]) -> None:
        if a.qkv_layout == "separate":
            mark(blk.get_submodule(a.qkv[part]), rows=channels)
        elif a.qkv_layout == "neox":
            mark(blk.get_submodule(a.qkv[0]), rows=[(c // dh) * 3 * dh + part * dh + c % dh for c in channels])
        else:  # q | k | v blocks, q H * dh wide, k and v Hkv * dh (grouped queries)
            start = (0, H * dh, (H + Hkv) * dh)[part]
            mark(blk.get_submodule(a.qkv[0]), rows=[start + c for c in channels])

    for n in nodes:
        blk = model.hf_model.get_submodule(f"{a.layers}.{n.layer}")
        if n.kind == "head":
            h, g = n.index, n.index // (H // Hkv)
            qkv_rows(0, list(range(h * dh, (h + 1) * dh)))
            for part in (1, 2):
                qkv_rows(part, list(range(g * dh, (g + 1) * dh)))
            mark(blk.get_submodule(a.out_proj), cols=list(range(h * dh, (h + 1) * dh)))
        elif n.kind in ("q", "k", "v"):
            qkv_rows("qkv".index(n.kind), [n.index])
        elif n.kind == "neuron":
            pre = blk.get_submodule(a.mlp_pre)
            # a fused gate | up projection holds the neuron's gate row and, d_mlp rows further, its up row
            mark(pre, rows=[n.index, pre.weight.shape[0] // 2 + n.index] if a.gate_up_fused else [n.index])
            if a.mlp_pre_linear:
                mark(blk.get_submodule(a.mlp_pre_linear), rows=[n.index])
            mark(blk.get_submodule(a.mlp_down), cols=[n.index])
        elif n.kind in ("attn_out", "head_compat"):
            d = model.d_model
            rows = [n.index] if n.kind == "attn_out" else list(range(n.index * d // H, (n.index + 1) * d // H))
            mark(blk.get_submodule(a.out_proj), rows=rows)
        elif n.kind == "mlp_out":
            mark(blk.get_submodule(a.mlp_down), rows=[n.index])
        else:
            raise ValueError(f"units of kind {n.kind!r} own no parameters")
    return masks
