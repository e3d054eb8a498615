"""Edges of a circuit: weights connecting its nodes through the residual stream or inside a sub-layer.

Every node reads from the residual stream with some rows (R, [r, d_model]) and/or writes to it with
some columns (W, [d_model, w]): a head reads with its value rows and writes with its output-projection
columns; a neuron reads with its input row and writes with its output column; a q/k/v channel reads
with its row (a value channel also writes through the output projection); an attn_out/mlp_out channel
writes the unit vector of its channel; a residual channel reads and writes its unit vector. An edge
a -> b exists when a writes before b reads, with weight ||R_b W_a||_F (for channels of a weight-sparse
model this is exactly the single weight entry between them, so "nonzero weights connecting kept nodes"
are counted). Inside a sub-layer, heads and value channels feed the attn_out channels of their layer
through W_o, and neurons the mlp_out channels through W_out.
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch import Tensor

from circuits.format import Edge, Node
from circuits.weights import layer_weights


def _stages(model, node: Node) -> tuple[float | None, float | None]:
    """(read position, write position) of a node along the residual stream (None: does not)."""
    layer, k = node.layer, node.kind
    base = 4 * layer
    parallel = model.adapter.is_parallel(model.config)
    if k in ("q", "k"):
        return base + 1, None
    if k in ("head", "v"):
        return base + 1, base + 2
    if k in ("attn_out", "head_compat"):
        return None, base + 2
    if k == "neuron":
        return (base + 1, base + 3.5) if parallel else (base + 3, base + 3.5)
    if k == "mlp_out":
        return None, base + 3.5
    pos = {"resid_pre": 0.5, "resid_mid": 2.5, "resid_post": 4.5}[k]
    return base + pos, base + pos


def _rw(model, kind: str, layer: int, idx: Tensor, cache: dict) -> tuple[Tensor | None, Tensor | None]:
    """Read rows [n, r, d] and write columns [n, d, w] of the units `idx` of one site."""
    if layer not in cache:
        cache[layer] = layer_weights(model, layer)
    lw = cache[layer]
    d, H, Hkv, dh = model.d_model, model.n_heads, model.n_kv_heads, model.d_head
    eye = torch.eye(d, dtype=lw.W_o.dtype)
    if kind == "head":
        g = idx // (H // Hkv)
        R = lw.W_v.view(Hkv, dh, d)[g]
        W = lw.W_o.view(d, H, dh).permute(1, 0, 2)[idx]
        return R, W
    if kind in ("q", "k", "v"):
        R = getattr(lw, f"W_{kind}")[idx][:, None, :]
        W = None
        if kind == "v" and H == Hkv:
            W = lw.W_o[:, idx].T[:, :, None]
        return R, W
    if kind == "neuron":
        return lw.W_in[idx][:, None, :], lw.W_out[:, idx].T[:, :, None]
    if kind in ("attn_out", "mlp_out"):
        return None, eye[:, idx].T[:, :, None]
    if kind == "head_compat":
        W = eye.view(d, H, d // H).permute(1, 0, 2)[idx]
        return None, W
    return eye[idx][:, None, :], eye[:, idx].T[:, :, None]


def _internal(model, a_kind: str, b_kind: str, a_layer: int, b_layer: int) -> bool:
    """Whether a feeds b inside one sub-layer (not through the residual stream)."""
    if a_layer != b_layer:
        return False
    return (a_kind in ("head", "v") and b_kind == "attn_out") or (a_kind == "neuron" and b_kind == "mlp_out")


@torch.no_grad()
def circuit_edges(model, nodes: list[Node], min_weight: float = 0.0, max_edges: int | None = 20_000) -> tuple[list[Edge], int]:
    """(edges, total count): every edge with weight > `min_weight`, the `max_edges` heaviest kept."""
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, n in enumerate(nodes):
        groups[(n.kind, n.layer)].append(i)
    cache: dict = {}
    rw = {}
    for (kind, layer), members in groups.items():
        idx = torch.tensor([nodes[i].index for i in members])
        rw[(kind, layer)] = _rw(model, kind, layer, idx, cache)
    src, dst, wts = [], [], []
    for (ak, al), a_members in groups.items():
        _, Wa = rw[(ak, al)]
        if Wa is None:
            continue
        a_write = _stages(model, nodes[a_members[0]])[1]
        for (bk, bl), b_members in groups.items():
            Rb, _ = rw[(bk, bl)]
            if _internal(model, ak, bk, al, bl):
                Rb = _rw(model, "resid_pre", bl, torch.tensor([nodes[i].index for i in b_members]), cache)[0]
            elif Rb is None or _stages(model, nodes[b_members[0]])[0] <= a_write:
                continue
            # ||R_b W_a||_F for every pair: [nb, r, d] x [na, d, w] -> [na, nb]
            prod = torch.einsum("brd,adw->abrw", Rb.float(), Wa.float())
            weight = prod.flatten(2).norm(dim=2)
            for ia, ib in torch.nonzero(weight > min_weight).tolist():
                src.append(a_members[ia])
                dst.append(b_members[ib])
                wts.append(float(weight[ia, ib]))
    total = len(wts)
    order = sorted(range(total), key=lambda i: -wts[i])
    if max_edges is not None:
        order = order[:max_edges]
    return [Edge(src[i], dst[i], wts[i]) for i in order], total
