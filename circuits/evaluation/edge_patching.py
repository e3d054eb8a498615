"""Running a model with only some edges of its residual-stream graph: the exact counterpart of EAP.

Every downstream node d gets the input

    x'_d = x_d - sum over ablated edges u -> d of (a_u - a'_u)

where a_u is u's output in this very (patched) forward and a'_u its ablated value: the corrupted run's
output (`ablation="corrupt"`, aligned pairs), its mean over the clean prompts' tokens (`"mean"`) or zero
(`"zero"`). So effects propagate: a head whose inputs were patched writes a changed output, which is
what the later nodes then see through their kept edges. A head's q/k/v inputs (and an MLP's input) are
rebuilt by running its own norm on x'_d and adding W (norm(x'_d) - norm(x_d)) to the projection's
output, so biases and everything else of the real module stay as they are; the logits' input is the
last block's output, patched in place (only the final norm reads it). With every edge ablated and
`ablation="corrupt"` the run reproduces the corrupted run; with none it is the clean run.

    m = patched_metric(model, batch, keep_mask, metric="logit-diff", ablation="corrupt")   # [n] per row
"""

from __future__ import annotations

import torch
from torch import Tensor

from circuits.finders.eap import _upstream_hooks, _weights, run_upstream
from circuits.model.residual_graph import EdgeGraph, attn_norm, mlp_norm
from circuits.tasks.metrics import Metric, last, metric_rows
from circuits.tasks.pairs import PairBatch

EDGE_ABLATIONS = ("corrupt", "mean", "zero")


@torch.no_grad()
def upstream_means(model, batch: PairBatch, graph: EdgeGraph, batch_size: int = 16) -> Tensor:
    """[n_up, d] mean output of every upstream node over the clean prompts' real tokens."""
    lw = _weights(model)
    total, count = 0, 0
    for sub in batch.split(batch_size):
        sub = sub.to(model.device)
        up, _, _ = run_upstream(model, graph, sub.clean, sub.clean_mask, lw)
        keep = sub.clean_mask.bool()
        total = total + up[keep].sum(0)
        count += int(keep.sum())
    return total / max(count, 1)


_SPARSE_ROWS = True
"""Patch through the upstream rows that carry an ablated (or kept) edge only; False: the dense sum over all rows
(the same numbers up to float rounding, several times slower on big graphs; the tests compare the two)."""


class _Upstream:
    """This forward's upstream outputs, node first ([n_up, b, p, d]: a set of rows is one contiguous matrix),
    copied once each into one buffer as their layers run, and the running sum over u of (a_u - ablated a_u).
    `abl`: [n_up, b, p, d] (corrupt), [n_up, d] (mean) or None (zero)."""

    def __init__(self, store: dict, graph: EdgeGraph, abl):
        self.store, self.graph = store, graph
        self.abl = abl[:, None, None] if abl is not None and abl.ndim == 2 else abl
        self.buf, self.total, self.filled = None, None, 0

    def _pieces(self):
        """(first upstream index, store key, number of nodes) in graph order."""
        yield 0, "input", 1
        start = 1
        for layer in range(self.graph.n_layers):
            yield start, ("a", layer), self.graph.n_heads
            yield start + self.graph.n_heads, ("m", layer), 1
            start += self.graph.n_heads + 1

    def fill(self, upto: int) -> None:
        """Copy the upstream outputs [filled, upto) (all computed by now) into the buffer."""
        for start, key, n in self._pieces():
            if start >= upto:
                break
            if start + n <= self.filled:
                continue
            t = self.store[key]
            t = t[:, :, None] if n == 1 and t.ndim == 3 else t
            if self.buf is None:
                b, p, _, d = t.shape
                self.buf = torch.zeros(len(self.graph.upstream), b, p, d, dtype=torch.float32, device=t.device)
                self.total = torch.zeros(b, p, d, dtype=torch.float32, device=t.device)
            lo, hi = max(start, self.filled), min(start + n, upto)
            self.buf[lo:hi] = t[:, :, lo - start : hi - start].permute(2, 0, 1, 3).float()
            self.total += self.diff(slice(lo, hi)).sum(0)
            self.filled = hi

    def diff(self, rows) -> Tensor:
        """[len(rows), b, p, d] a_u minus its ablated value, for rows (a slice or a LongTensor of indices)."""
        a = self.buf[rows]
        return a if self.abl is None else a - self.abl[rows]


def _mix(diff: Tensor, w: Tensor) -> Tensor:
    """[b, p, k, d] sum over u of w[u, k] diff[u]: one matrix product on the node-first layout."""
    u, b, p, d = diff.shape
    return (w.to(torch.float32).T @ diff.reshape(u, -1)).view(-1, b, p, d).permute(1, 2, 0, 3)


def _patch_hooks(model, graph: EdgeGraph, ablate: Tensor, abl, lw: dict) -> list:
    """fwd_hooks that give every downstream node its patched input. `ablate`: FloatTensor [n_up, n_down] of 1 for
    ablated edges (or [p, n_up, n_down]: per token position); `abl`: [n_up, b, p, d] (corrupt: node first),
    [n_up, d] (mean) or None (zero) ablated upstream values."""
    store: dict = {}
    W_o = {k: v.W_o for k, v in lw.items()}
    hooks = _upstream_hooks(model, graph, store, W_o)
    H, K, dh, d = graph.n_heads, graph.n_kv, model.d_head, model.d_model
    resid: dict = {}
    inputs: dict = {}  # (layer, "attn") -> norm(x') - norm(x) for all attention inputs [b, p, n_attn_in, d]

    up = _Upstream(store, graph, abl)

    def delta(down: slice) -> Tensor | None:
        upto = graph.up_limit(down.start)
        w = ablate[..., :upto, down]
        if not bool(w.any()):
            return None
        up.fill(upto)
        if w.ndim == 3:  # position-resolved: edge u@p -> d@p ablated at position p only
            return torch.einsum("ubpd,puk->bpkd", up.diff(slice(0, upto)), w.to(torch.float32))
        if not _SPARSE_ROWS:
            return torch.einsum("ubpd,uk->bpkd", up.diff(slice(0, upto)), w.to(torch.float32))
        # Only the upstream rows with an ablated edge into `down` contribute; when most are ablated, sum the
        # kept ones and subtract from the sum over all rows (every u < upto feeds every node of `down`).
        ablated = w.any(1).nonzero().squeeze(1)
        kept_w = 1.0 - w
        kept = kept_w.any(1).nonzero().squeeze(1)
        if len(kept) < len(ablated) and up.filled == upto:
            total = up.total[:, :, None].expand(-1, -1, w.shape[1], -1)
            if len(kept) == 0:
                return total
            return total - _mix(up.diff(kept), kept_w[kept])
        return _mix(up.diff(ablated), w[ablated])

    def save(name):
        def fn(t, hook):
            resid[(name, hook.layer)] = t

        return fn

    def attn_in(layer: int):
        if (layer, "attn") not in inputs:
            dl = delta(graph.attn_down(layer))
            if dl is None:
                inputs[(layer, "attn")] = None
            else:
                x = resid[("pre", layer)]
                norm = attn_norm(model, layer)
                xs = x.float()[:, :, None] - dl
                inputs[(layer, "attn")] = norm.forward(xs.to(x.dtype)).float() - norm.forward(x).float()[:, :, None]
        return inputs[(layer, "attn")]

    def qkv_hook(part: str):
        def fn(t, hook):
            layer = hook.layer
            dn = attn_in(layer)
            if dn is None:
                return None
            w = lw[layer]
            if part == "q":
                sl, W, n = slice(0, H), w.W_q, H
            elif graph.qkv:
                start = H if part == "k" else H + K
                sl, W, n = slice(start, start + K), (w.W_k if part == "k" else w.W_v), K
            else:  # one input per head (as many key/value heads as heads)
                sl, W, n = slice(0, H), (w.W_k if part == "k" else w.W_v), K
            add = torch.einsum("bphd,hed->bphe", dn[:, :, sl], W.float().view(n, dh, d))
            return t + add.to(t.dtype)

        return fn

    def mlp_hook(which: str):
        def fn(t, hook):
            layer = hook.layer
            key = (layer, "mlp")
            if key not in inputs:
                dm = delta(slice(graph.mlp_down(layer), graph.mlp_down(layer) + 1))
                if dm is None:
                    inputs[key] = None
                else:
                    x = resid[("pre" if graph.parallel else "mid", layer)]
                    norm = mlp_norm(model, layer)
                    inputs[key] = norm.forward((x.float() - dm[:, :, 0]).to(x.dtype)).float() - norm.forward(x).float()
            dn = inputs[key]
            if dn is None:
                return None
            W = lw[layer].W_in if which == "pre" else lw[layer].W_up
            return t + (dn @ W.float().T).to(t.dtype)

        return fn

    def final_hook(t, hook):  # the last block's output feeds the final norm only: patch it there
        dl = delta(slice(graph.logits_down, graph.logits_down + 1))
        return None if dl is None else (t.float() - dl[:, :, 0]).to(t.dtype)

    hooks += [("blocks.*.hook_resid_pre", save("pre"))]
    if not graph.parallel:
        hooks.append(("blocks.*.hook_resid_mid", save("mid")))
    hooks += [
        ("blocks.*.attn.hook_q", qkv_hook("q")),
        ("blocks.*.attn.hook_k", qkv_hook("k")),
        ("blocks.*.attn.hook_v", qkv_hook("v")),
        ("blocks.*.mlp.hook_pre", mlp_hook("pre")),
    ]
    if model.adapter.mlp_pre_linear or model.adapter.gate_up_fused:
        hooks.append(("blocks.*.mlp.hook_pre_linear", mlp_hook("pre_linear")))
    hooks.append((f"blocks.{graph.n_layers - 1}.hook_resid_post", final_hook))
    return hooks


@torch.no_grad()
def patched_metric(
    model,
    batch: PairBatch,
    keep: Tensor,
    metric: Metric = "logit-diff",
    ablation: str = "corrupt",
    means: Tensor | None = None,
    batch_size: int = 16,
    graph: EdgeGraph | None = None,
    cache: dict | None = None,
) -> dict:
    """Metric and accuracy per row with only the edges in `keep` (BoolTensor [n_up, n_down], or [p, n_up, n_down]
    for edges per token position, prompts of p tokens) intact: {"metric": [n], "accuracy": [n]}. `cache` (a dict
    kept by the caller) keeps the corrupted runs' upstream outputs and the clean reference logits between calls on
    the same batch (a curve's points)."""
    from circuits.tasks.metrics import accuracy_rows

    if ablation not in EDGE_ABLATIONS:
        raise ValueError(f"unknown ablation {ablation!r}; use {', '.join(EDGE_ABLATIONS)}")
    if ablation == "corrupt" and (batch.corrupt is None or not batch.aligned):
        raise ValueError("ablation corrupt needs aligned clean/corrupt pairs; use mean or zero")
    graph = graph or EdgeGraph.of(model)
    lw = _weights(model)
    if ablation == "mean" and means is None:
        means = upstream_means(model, batch, graph, batch_size)
    ablate = (graph.valid & ~keep.bool()).float()
    if ablate.ndim == 3 and ablate.shape[0] != batch.clean.shape[1]:
        raise ValueError(
            f"a position-resolved edge mask has {ablate.shape[0]} positions, the prompts {batch.clean.shape[1]} tokens"
        )
    cache = {} if cache is None else cache
    out, accs = [], []
    for i, sub in enumerate(batch.split(batch_size)):
        sub = sub.to(model.device)
        ref = None
        if metric == "kl":
            if ("ref", i) not in cache:
                cache[("ref", i)] = last(
                    model({"input_ids": sub.clean, "attention_mask": sub.clean_mask}), sub.clean_pos
                )
            ref = cache[("ref", i)]
        abl = None
        if ablation == "corrupt":
            if ("corrupt", i) not in cache:
                up = run_upstream(model, graph, sub.corrupt, sub.corrupt_mask, lw)[0]
                cache[("corrupt", i)] = up.permute(2, 0, 1, 3).contiguous()  # node first, as _patch_hooks reads it
            abl = cache[("corrupt", i)]
        elif ablation == "mean":
            abl = means.to(model.device)
        with model.hooks(fwd_hooks=_patch_hooks(model, graph, ablate.to(model.device), abl, lw)):
            logits = model({"input_ids": sub.clean, "attention_mask": sub.clean_mask})
        out.append(metric_rows(logits, sub, metric, ref).cpu())
        accs.append(accuracy_rows(logits, sub).cpu())
    return {"metric": torch.cat(out), "accuracy": torch.cat(accs)}


def all_edges(graph: EdgeGraph) -> Tensor:
    return graph.valid.clone()


def no_edges(graph: EdgeGraph) -> Tensor:
    return torch.zeros_like(graph.valid)
