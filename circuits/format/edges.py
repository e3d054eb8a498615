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

Two counts (`circuit_edges` returns both):
- `n_edges`: the weight-sparse paper's definition, nonzero *single weights* between kept nodes: the
  internal edges above, and residual edges that start or end at a residual channel node (attn_out,
  mlp_out, resid_*, head_compat): a channel's entry in a reader's row, or a writer's entry in a channel.
- `n_edges_virtual`: also the "virtual" paths neuron/head -> reader through the residual stream
  (||R_b W_a||, a product of two matrices), which bypass the kept channel nodes.

Pairs are scored in blocks on the model's device; past `max_pairs` node pairs nothing is listed and the
counts say why (a circuit of 100k units has ~10^10 pairs).
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch import Tensor

from circuits.format.circuit import Edge, Node
from circuits.model.weights import layer_weights


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
    eye = torch.eye(d, dtype=lw.W_o.dtype, device=lw.W_o.device)
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


CHANNEL_KINDS = ("attn_out", "mlp_out", "resid_pre", "resid_mid", "resid_post", "head_compat")


@torch.no_grad()
def circuit_edges(
    model,
    nodes: list[Node],
    min_weight: float = 0.0,
    max_edges: int | None = 20_000,
    max_pairs: int = 50_000_000,
    block: int = 2_000_000,
) -> tuple[list[Edge], dict]:
    """(edges, counts): the `max_edges` heaviest paper-defined edges with weight > `min_weight`, and
    counts {"n_edges", "n_edges_virtual", "edges_listed", "note"?} (see the module docstring)."""
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, n in enumerate(nodes):
        groups[(n.kind, n.layer)].append(i)
    pairs = 0
    for a_members in groups.values():
        for b_members in groups.values():
            pairs += len(a_members) * len(b_members)
    if pairs > max_pairs:
        note = (
            f"edges not listed: {len(nodes)} nodes make {pairs:.2e} node pairs, more than the cap of {max_pairs:.0e}; "
            "a circuit this size is not a readable graph (raise max_pairs to count anyway)"
        )
        return [], {"n_edges": None, "n_edges_virtual": None, "edges_listed": 0, "note": note}
    cache: dict = {}
    rw = {}
    for (kind, layer), members in groups.items():
        idx = torch.tensor([nodes[i].index for i in members])
        rw[(kind, layer)] = _rw(model, kind, layer, idx, cache)
    keep_w, keep_src, keep_dst = [], [], []
    n_real = n_virtual = 0
    for (ak, al), a_members in groups.items():
        _, Wa = rw[(ak, al)]
        if Wa is None:
            continue
        a_write = _stages(model, nodes[a_members[0]])[1]
        a_idx = torch.tensor(a_members)
        for (bk, bl), b_members in groups.items():
            Rb, _ = rw[(bk, bl)]
            internal = _internal(model, ak, bk, al, bl)
            if internal:
                Rb = _rw(model, "resid_pre", bl, torch.tensor([nodes[i].index for i in b_members]), cache)[0]
            elif Rb is None or _stages(model, nodes[b_members[0]])[0] <= a_write:
                continue
            real = internal or ak in CHANNEL_KINDS or bk in CHANNEL_KINDS
            b_idx = torch.tensor(b_members)
            per = max(1, block // max(1, len(a_members) * Rb.shape[1] * Wa.shape[2]))
            for s0 in range(0, len(b_members), per):
                # ||R_b W_a||_F for every pair of the block: [nb, r, d] x [na, d, w] -> [na, nb]
                prod = torch.einsum("brd,adw->abrw", Rb[s0 : s0 + per].float(), Wa.float())
                weight = prod.flatten(2).norm(dim=2)
                hit = weight > min_weight
                count = int(hit.sum())
                n_virtual += count
                if not real or count == 0:
                    continue
                n_real += count
                ia, ib = torch.nonzero(hit, as_tuple=True)
                keep_w.append(weight[ia, ib].cpu())
                keep_src.append(a_idx[ia.cpu()])
                keep_dst.append(b_idx[s0 : s0 + per][ib.cpu()])
                if max_edges is not None and sum(len(w) for w in keep_w) > 4 * max_edges:
                    keep_w, keep_src, keep_dst = _top(
                        [torch.cat(keep_w)], [torch.cat(keep_src)], [torch.cat(keep_dst)], max_edges
                    )
    if keep_w:
        keep_w, keep_src, keep_dst = _top(keep_w, keep_src, keep_dst, max_edges)
        w, a, b = keep_w[0].tolist(), keep_src[0].tolist(), keep_dst[0].tolist()
    else:
        w, a, b = [], [], []
    edges = [Edge(int(x), int(y), float(z)) for x, y, z in zip(a, b, w)]
    return edges, {"n_edges": n_real, "n_edges_virtual": n_virtual, "edges_listed": len(edges)}


def _top(ws, srcs, dsts, k):
    w, s, d = torch.cat(ws), torch.cat(srcs), torch.cat(dsts)
    order = torch.argsort(w, descending=True, stable=True)
    if k is not None:
        order = order[:k]
    return [w[order]], [s[order]], [d[order]]
