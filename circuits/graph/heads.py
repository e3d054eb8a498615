"""Head loadings: each edge of an attribution graph split by the attention heads that carry it.

In the frozen replacement model every path from a source to a target passes each attention layer either through
exactly one of its heads or around it, along the residual stream. So at every attention layer l, an edge is the sum
of its parts through each head of l plus a bypass (circuit-tracer's open request #53; the head-loadings PR #114
checks the same identity). The part through head h of layer l is the edge of a new target, "the target's linear
dependence on head h's z at layer l": `sum_p G[p, h] . z_h[p]`, where G is the target's gradient at that z. One
backward pass gives G for every layer; one more per (layer, head), batched, gives that part for every source.

    loads = head_loadings(model, tc, graph, row)   # [n_layers, n_heads, n_sources], for one target row of the graph
    loads[l, h, s]                                 # the part of edge s -> target carried by head h of layer l
    graph.adjacency[row, s] - loads[l, :, s].sum() # the bypass at layer l

`head_loadings(..., at=position)` keeps only what each head writes at one position (the heads that move
information into the final position, for a logit). `top_heads(graph, loads, row)` ranks heads by the |parts| they
carry over the edges from other positions (the cross-position edges a head moves information along).
"""

from __future__ import annotations

import torch
from torch import Tensor

from circuits.graph.graph import Graph
from circuits.graph.replacement import FrozenRun, record
from circuits.model.transcoders import Transcoders


def _target(model, tc: Transcoders, g: Graph, row: int) -> tuple[int, int, Tensor]:
    """(layer, position, reading vector) of graph row `row` (a feature or a logit)."""
    n = g.node(row)
    if n["kind"] == "feature":
        return n["layer"], n["position"], tc.W_enc[n["layer"]][n["feature"]]
    if n["kind"] == "logit":
        W_U = model.W_U.float()
        return model.n_layers, g.n_pos - 1, W_U[:, n["token"]] - W_U.mean(-1)
    raise ValueError(f"row {row} is a {n['kind']} node; head loadings exist for feature and logit rows")


def head_loadings(model, tc: Transcoders, g: Graph, row: int, batch_size: int = 32, at: int | None = None) -> Tensor:
    """[n_layers, n_heads, n_graph_sources]: the part of each edge into graph row `row` carried by each head, in the
    graph's column order (selected features, errors, tokens; logit columns are zero and dropped). With `at`, only
    the head's output at that position counts (e.g. the final position, where name movers write); negative `at`
    counts from the end, as Python indexing does."""
    zero = int(g.meta.get("settings", {}).get("zero_positions", 1))
    if at is not None:
        if not -g.n_pos <= at < g.n_pos:
            raise ValueError(
                f"at={at} is outside the prompt's {g.n_pos} positions: pass 0..{g.n_pos - 1} (or -1 for the last)"
            )
        at = at % g.n_pos
    rec = record(model, tc, g.tokens, zero)
    layer, pos, vec = _target(model, tc, g, row)
    run = FrozenRun(model, tc, rec, batch_size, heads=True)
    outs, grads = run.reads(torch.tensor([layer]), torch.tensor([pos]), vec[None])
    _, _, g_heads = run.backward(outs, grads)
    n_layers, n_heads = model.n_layers, model.n_heads
    # a feature at layer L reads blocks.L.ln2.hook_normalized, after layer L's attention: heads 0..L carry its edges
    pairs = [(lay, h) for lay in range(min(layer + 1, n_layers)) for h in range(n_heads)]
    n_sources = len(rec.features) + (n_layers + 1) * g.n_pos
    parts = torch.zeros(n_layers, n_heads, n_sources)
    for c in range(0, len(pairs), batch_size):
        chunk = pairs[c : c + batch_size]
        outs, grads = [], []
        for lay in sorted({p[0] for p in chunk}):
            gz = torch.zeros_like(run.z_heads[lay])
            for b, (pl, h) in enumerate(chunk):
                if pl == lay:
                    where = slice(None) if at is None else slice(at, at + 1)
                    gz[b, where, h] = g_heads[lay][0, where, h]
            outs.append(run.z_heads[lay])
            grads.append(gz)
        g_embed, g_mlp, _ = run.backward(outs, grads, retain=c + batch_size < len(pairs))
        got = run.contract(g_embed, g_mlp)
        for b, (pl, h) in enumerate(chunk):
            parts[pl, h] = got[b]
    cols = torch.cat([g.selected, torch.arange(len(rec.features), n_sources)])
    return parts[:, :, cols]


def top_heads(g: Graph, loads: Tensor, row: int, k: int = 10) -> list[dict]:
    """The k heads carrying the most |part| of the edges into `row` from sources at other positions."""
    target_pos = g.node(row)["position"]
    n_cols = loads.shape[-1]
    pos = torch.tensor([g.node(i)["position"] for i in range(n_cols)])
    cross = pos != target_pos
    total = loads[:, :, cross].abs().sum(-1)  # [n_layers, n_heads]
    flat = total.flatten().argsort(descending=True)[:k]
    n_heads = loads.shape[1]
    return [{"head": f"L{int(i) // n_heads}H{int(i) % n_heads}", "carried": float(total.flatten()[i])} for i in flat]
