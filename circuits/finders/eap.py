"""Edge attribution patching: EAP (Syed et al. 2023) and EAP-IG (Hanna et al. 2024) over the residual-stream graph.

The score of edge u -> d estimates how much the task metric changes when that one edge is patched from
the corrupted run, to first order:

    EAP     s(u, d) = sum_pos (a_u(corrupt) - a_u(clean)) . dm/dx_d  at the clean run
    EAP-IG  the same with dm/dx_d averaged over k runs whose input embeddings go straight from the
            corrupted to the clean ones (midpoints alpha = (i + 1/2) / k: a k-point integrated gradient)

x_d is the residual-stream input of downstream node d (before its norm), so each downstream node gets
its own gradient even though all of a layer's heads read one residual: the gradient at the q/k/v (or
MLP input) projections is mapped back through that node's own weights and through the norm
(`norm_vjp`). Per batch EAP costs one corrupted forward, one clean forward and one backward; EAP-IG one
corrupted and one clean forward (no grad) and k forward+backward passes. Scores are averaged over rows.

    scores = eap(model, batch, metric="logit-diff")          # EdgeScores
    circuit = scores.to_circuit(top_n=200)                     # the 200 edges of largest |score|
    per_pos = eap(model, batch, positions=True)              # per token position (circuits.finders.eap_positions)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from circuits.format.circuit import Circuit
from circuits.format.edge_circuit import edges_to_circuit, graph_of
from circuits.model.residual_graph import EdgeGraph, attn_norm, head_outputs, mlp_norm, norm_vjp
from circuits.model.weights import layer_weights
from circuits.tasks.metrics import Metric, check_metric, last, metric_rows
from circuits.tasks.pairs import PairBatch


@dataclass
class EdgeScores:
    """Scores [n_up, n_down] of every edge of `graph` (0 where no edge), and how they were computed."""

    graph: EdgeGraph
    scores: Tensor
    method: str
    metric: str
    info: dict = field(default_factory=dict)

    def order(self) -> Tensor:
        """Flat indices (up * n_down + down) of all edges by decreasing |score|."""
        flat = self.scores.abs().flatten().masked_fill(~self.graph.valid.flatten(), -1.0)
        return torch.argsort(flat, descending=True, stable=True)[: self.graph.n_edges]

    def top_mask(self, n: int) -> Tensor:
        """BoolTensor [n_up, n_down] of the n edges of largest |score|."""
        m = torch.zeros(self.scores.numel(), dtype=torch.bool)
        m[self.order()[:n]] = True
        return m.view_as(self.scores)

    def threshold_mask(self, threshold: float) -> Tensor:
        return (self.scores.abs() >= threshold) & self.graph.valid

    def to_circuit(
        self,
        top_n: int | None = None,
        threshold: float | None = None,
        provenance: dict | None = None,
        metrics: dict | None = None,
    ):
        """The chosen edges as a `Circuit` (nodes: the upstream and downstream nodes they touch)."""
        if (top_n is None) == (threshold is None):
            raise ValueError("choose the edges with exactly one of top_n or threshold")
        mask = self.top_mask(top_n) if top_n is not None else self.threshold_mask(threshold)
        selection = {"top_n": top_n} if top_n is not None else {"threshold": threshold}
        return edges_to_circuit(self, mask, selection, provenance or {}, metrics or {})


def scores_from_circuit(circuit: Circuit):
    """The `EdgeScores` a saved edge circuit was selected from."""
    g = graph_of(circuit)
    flat = torch.zeros(len(g.upstream), len(g.downstream))
    vals = torch.tensor(circuit.extra["edge_scores"], dtype=torch.float32)
    if vals.numel() != g.n_edges:
        raise ValueError(f"edge_scores has {vals.numel()} values, the graph {g.n_edges} edges")
    flat[g.valid] = vals
    return EdgeScores(
        g,
        flat,
        circuit.provenance.get("method", "?"),
        circuit.provenance.get("metric", "?"),
        circuit.extra.get("score_info", {}),
    )


# ---------------------------------------------------------------------- hooks shared by scoring and patching
def _upstream_hooks(model, graph: EdgeGraph, store: dict, W_o: dict) -> list:
    """fwd_hooks that record this forward's upstream outputs into store["input"], store[("a", l)], store[("m", l)]."""

    # Granite: the block adds residual_multiplier x each sub-layer's output (hook_mlp_out shows the product)
    a = model.adapter
    scale = getattr(model.config, a.residual_multiplier) if a.residual_multiplier else 1.0

    def embed(t, hook):  # the residual stream as block 0 reads it: embeddings after any scale, norm or positions
        store["input"] = t

    def z(t, hook):
        store[("a", hook.layer)] = head_outputs(t, W_o[hook.layer], graph.n_heads) * scale

    def mlp(t, hook):
        store[("m", hook.layer)] = t

    return [("blocks.0.hook_resid_pre", embed), ("blocks.*.attn.hook_z", z), ("blocks.*.hook_mlp_out", mlp)]


def stack_upstream(store: dict, graph: EdgeGraph, upto: int | None = None) -> Tensor:
    """[b, p, n_up, d] upstream outputs in graph order (the first `upto` only)."""
    parts = [store["input"][:, :, None]]
    have = 1
    for layer in range(graph.n_layers):
        if upto is not None and have >= upto:
            break
        parts.append(store[("a", layer)])
        have += graph.n_heads
        if upto is not None and have >= upto:
            break
        parts.append(store[("m", layer)][:, :, None])
        have += 1
    out = torch.cat(parts, 2)
    return out if upto is None else out[:, :, :upto]


def _weights(model) -> dict:
    return {layer: layer_weights(model, layer) for layer in range(model.n_layers)}


def run_upstream(model, graph: EdgeGraph, ids: Tensor, mask: Tensor, lw: dict) -> tuple[Tensor, Tensor, Tensor]:
    """(upstream outputs [b, p, n_up, d], token embeddings [b, p, d], logits) of a plain forward."""
    store: dict = {}
    emb: dict = {}
    hooks = _upstream_hooks(model, graph, store, {k: v.W_o for k, v in lw.items()})
    hooks.append(("hook_embed", lambda t, hook: emb.__setitem__("e", t)))
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        logits = model({"input_ids": ids, "attention_mask": mask})
    return stack_upstream(store, graph).float(), emb["e"], logits


def _frozen(model):
    """Context: parameters do not require grad (no weight gradients are computed), restored after."""

    class Ctx:
        def __enter__(self):
            self.flags = [(p, p.requires_grad) for p in model.parameters()]
            for p, _ in self.flags:
                p.requires_grad_(False)

        def __exit__(self, *exc):
            for p, f in self.flags:
                p.requires_grad_(f)

    return Ctx()


def _grad_pass(
    model,
    graph: EdgeGraph,
    batch: PairBatch,
    metric: Metric,
    lw: dict,
    embed_fn,
    ref: Tensor | None,
    deltas_fn,
    scores: Tensor,
    weight: float,
    extra_hooks=(),
) -> Tensor:
    """One forward + backward; adds weight * sum_pos deltas . dm/dx_d to `scores`; returns the metric per row.

    `deltas_fn()` gives the [b, p, n_up, d] upstream differences once the forward has run (plain EAP takes
    the clean half of them from this very forward, through `extra_hooks`).
    """
    acts: dict = {}
    grads: dict = {}

    def keep(name):
        def fn(t, hook):
            acts[(name, hook.layer)] = t.detach()

        return fn

    def gkeep(name):
        def fn(g, hook):
            grads[(name, hook.layer)] = g.detach()

        return fn

    last_layer = graph.n_layers - 1
    fwd = [
        ("hook_embed", embed_fn),
        *extra_hooks,
        ("blocks.*.hook_resid_pre", keep("pre")),
        (f"blocks.{last_layer}.hook_resid_post", keep("post")),
    ]
    if not graph.parallel:
        fwd.append(("blocks.*.hook_resid_mid", keep("mid")))
    bwd = [
        ("blocks.*.attn.hook_q", gkeep("q")),
        ("blocks.*.attn.hook_k", gkeep("k")),
        ("blocks.*.attn.hook_v", gkeep("v")),
        ("blocks.*.mlp.hook_pre", gkeep("pre")),
        (f"blocks.{last_layer}.hook_resid_post", gkeep("final")),
    ]
    if model.adapter.mlp_pre_linear or model.adapter.gate_up_fused:
        bwd.append(("blocks.*.mlp.hook_pre_linear", gkeep("pre_linear")))
    with torch.enable_grad(), model.hooks(fwd_hooks=fwd, bwd_hooks=bwd):
        logits = model({"input_ids": batch.clean, "attention_mask": batch.clean_mask})
        m = metric_rows(logits, batch, metric, ref)
        m.sum().backward()
    deltas = deltas_fn()
    H, K, dh = graph.n_heads, graph.n_kv, model.d_head
    d = model.d_model
    for layer in range(graph.n_layers):
        w = lw[layer]
        parts = [torch.einsum("bphe,hed->bphd", grads[("q", layer)].float(), w.W_q.float().view(H, dh, d))]
        gk = torch.einsum("bphe,hed->bphd", grads[("k", layer)].float(), w.W_k.float().view(K, dh, d))
        gv = torch.einsum("bphe,hed->bphd", grads[("v", layer)].float(), w.W_v.float().view(K, dh, d))
        if graph.qkv:
            parts += [gk, gv]
        else:
            parts[0] = parts[0] + gk + gv
        g_attn = norm_vjp(attn_norm(model, layer), acts[("pre", layer)], torch.cat(parts, 2))
        g_in = grads[("pre", layer)].float() @ w.W_in.float()
        if ("pre_linear", layer) in grads:
            g_in = g_in + grads[("pre_linear", layer)].float() @ w.W_up.float()
        x_mlp = acts[("pre" if graph.parallel else "mid", layer)]
        g_mlp = norm_vjp(mlp_norm(model, layer), x_mlp, g_in[:, :, None])
        _accumulate(scores, deltas, graph, graph.attn_down(layer), g_attn, weight)
        _accumulate(scores, deltas, graph, slice(graph.mlp_down(layer), graph.mlp_down(layer) + 1), g_mlp, weight)
    # the last block's output is read by the final norm only: its gradient is the logits node's
    g_fin = grads[("final", last_layer)].float()[:, :, None]
    _accumulate(scores, deltas, graph, slice(graph.logits_down, graph.logits_down + 1), g_fin, weight)
    return m.detach()


def _accumulate(scores: Tensor, deltas: Tensor, graph: EdgeGraph, down: slice, g: Tensor, weight: float) -> None:
    """scores [n_up, n_down] (summed over positions) or [p, n_up, n_down] (position-resolved) += weight * delta . g."""
    upto = graph.up_limit(down.start)
    if scores.ndim == 3:
        scores[:, :upto, down] += weight * torch.einsum("bpud,bpkd->puk", deltas[:, :, :upto], g.float())
        return
    scores[:upto, down] += weight * torch.einsum("bpud,bpkd->uk", deltas[:, :, :upto], g.float())


def edge_scores(
    model,
    batch: PairBatch,
    metric: Metric = "logit-diff",
    method: str = "eap",
    ig_steps: int = 5,
    batch_size: int = 16,
    qkv: bool = True,
    progress: bool = False,
    positions: bool = False,
):
    """EAP (`method="eap"`) or EAP-IG (`method="eap-ig"`, `ig_steps` points) scores of every edge.

    `positions=True`: one score per edge and token position (prompts of one token length), returned as
    `circuits.finders.eap_positions.PositionScores`; their sum over positions is the `EdgeScores` returned
    without it."""
    from interp.infra import logs

    if method not in ("eap", "eap-ig"):
        raise ValueError(f"unknown method {method!r}; use eap or eap-ig")
    if ig_steps < 1:
        raise ValueError(f"ig_steps must be >= 1, got {ig_steps}")
    check_metric(metric, batch)
    if batch.corrupt is None or not batch.aligned:
        raise ValueError(
            "edge attribution patches activations from the corrupted prompts: it needs aligned clean/corrupt "
            "pairs (encode_pairs(..., align=True))"
        )
    graph = EdgeGraph.of(model, qkv)
    lw = _weights(model)
    W_o = {k: v.W_o for k, v in lw.items()}
    if positions:
        from circuits.finders.eap_positions import check_one_length

        scores = torch.zeros(check_one_length(batch), len(graph.upstream), len(graph.downstream))
    else:
        scores = torch.zeros(len(graph.upstream), len(graph.downstream))
    t0 = time.perf_counter()
    n_fwd = n_bwd = 0
    clean_m = []
    with _frozen(model):
        for sub in logs.progress(batch.split(batch_size), desc=method, enabled=progress):
            sub = sub.to(model.device)
            corrupt, e_corrupt, _ = run_upstream(model, graph, sub.corrupt, sub.corrupt_mask, lw)
            n_fwd += 1
            if method == "eap":
                ref = None
                if metric == "kl":  # the reference distribution is the clean run's own (its gradient is 0 there)
                    with torch.no_grad():
                        ref = last(model({"input_ids": sub.clean, "attention_mask": sub.clean_mask}), sub.clean_pos)
                    n_fwd += 1
                store: dict = {}
                up_hooks = _upstream_hooks(model, graph, store, W_o)
                m = _grad_pass(
                    model,
                    graph,
                    sub,
                    metric,
                    lw,
                    lambda t, h: t.detach().requires_grad_(True),
                    ref,
                    lambda: corrupt - stack_upstream({k: v.detach() for k, v in store.items()}, graph).float(),  # noqa: B023
                    scores,
                    1.0,
                    up_hooks,
                )
                n_fwd += 1
                n_bwd += 1
                clean_m.append(m)
            else:
                clean_up, e_clean, clean_logits = run_upstream(model, graph, sub.clean, sub.clean_mask, lw)
                n_fwd += 1
                ref = last(clean_logits, sub.clean_pos) if metric == "kl" else None
                clean_m.append(metric_rows(clean_logits, sub, metric, ref))
                deltas = corrupt - clean_up
                for i in range(ig_steps):
                    alpha = (i + 0.5) / ig_steps

                    def interpolate(t, hook, alpha=alpha):
                        return (e_corrupt + alpha * (e_clean - e_corrupt)).detach().requires_grad_(True)  # noqa: B023

                    _grad_pass(model, graph, sub, metric, lw, interpolate, ref, lambda: deltas, scores, 1.0 / ig_steps)  # noqa: B023
                    n_fwd += 1
                    n_bwd += 1
    scores /= len(batch)
    scores[..., ~graph.valid] = 0.0
    info = {
        "seconds": round(time.perf_counter() - t0, 3),
        "forwards": n_fwd,
        "backwards": n_bwd,
        "n_rows": len(batch),
        "n_edges": graph.n_edges,
        "clean_metric": float(torch.cat(clean_m).mean()),
    }
    if method == "eap-ig":
        info["ig_steps"] = ig_steps
    if method == "eap" and metric == "kl":
        info["warning"] = "KL's gradient is zero at the clean run: plain EAP scores are all ~0; use eap-ig"
    if positions:
        from circuits.finders.eap_positions import PositionScores, prompt_tokens

        return PositionScores(graph, scores, method, metric, info, prompt_tokens(model, batch))
    return EdgeScores(graph, scores, method, metric, info)


def summed_scores(position_scores) -> EdgeScores:
    """The `EdgeScores` of a position-resolved `PositionScores`, summed over positions: equal (to float rounding) to
    what `edge_scores` returns for the same prompts without `positions`."""
    ps = position_scores
    return EdgeScores(ps.graph, ps.scores.sum(0), ps.method, ps.metric, dict(ps.info))


def eap(model, batch: PairBatch, metric: Metric = "logit-diff", **kw) -> EdgeScores:
    """EAP scores (two forwards and one backward per batch); `positions=True` for position-resolved scores."""
    return edge_scores(model, batch, metric, "eap", **kw)


def eap_ig(model, batch: PairBatch, metric: Metric = "logit-diff", steps: int = 5, **kw) -> EdgeScores:
    """EAP-IG scores with `steps` interpolation points; `positions=True` for position-resolved scores."""
    return edge_scores(model, batch, metric, "eap-ig", ig_steps=steps, **kw)
