"""The local replacement model of one prompt: transcoders stand in for the MLPs, attention patterns and norm
scales are frozen, and error nodes make its forward pass exact (circuit-tracer; Ameisen et al. 2025, "Circuit
tracing", methods).

`record` runs the real model once and reads what the graph's nodes are: every layer's normalised MLP input and
MLP output, the transcoders' active features there, the error (MLP output minus what the transcoders write) and the
token embeddings. Features and errors at the first `zero_positions` positions are dropped, as circuit-tracer does
for the BOS position (its MLP output is then a constant of the replacement model).

`FrozenRun` is the replacement model as a function that is linear in the residual stream: a batch of copies of
the prompt runs forward once with

- every norm's `hook_scale` detached and every attention pattern detached (so only the value/output path and the
  norms' fixed division carry gradients),
- each MLP output replaced by the same value written as `out.detach() - skip(x).detach() + skip(x) + z_l`, where
  `z_l` is a zero leaf whose gradient is the gradient at that MLP output (the transcoders' affine skip, when they
  have one, is the only path through an MLP), and the embedding output likewise plus `z_embed`.

`rows(targets)` then injects one target's reading vector per batch copy (a feature's encoder row at its layer's
normalised input, or a logit's demeaned unembedding column after the final norm), takes one backward pass and
contracts the gradients with every source's writing vector: an active feature's activation times its decoder rows
(into every layer it writes, for cross-layer transcoders), an error vector, a token embedding. Each entry is the
direct effect of a source on a target in the frozen model, linear and exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor

from circuits.model.transcoders import Transcoders, check_covers
from interp.hooks import norms


@dataclass
class Recording:
    """What one clean forward pass says about the prompt's nodes (all float32, batch axis dropped)."""

    tokens: Tensor  # [n_pos]
    inputs: Tensor  # [n_layers, n_pos, d_model] normalised MLP inputs
    mlp_out: Tensor  # [n_layers, n_pos, d_model]
    embed: Tensor  # [n_pos, d_model] the embedding output (token nodes' vectors)
    logits: Tensor  # [d_vocab] at the last position
    features: Tensor  # [n_active, 3] (layer, position, feature), sorted
    activations: Tensor  # [n_active]
    errors: Tensor  # [n_layers, n_pos, d_model]
    zero_positions: int


def check_model(model, tc: Transcoders) -> None:
    """The model must have the hook points the replacement model needs and the transcoders' widths."""
    names = set(model.hook_names())
    need = [f"blocks.{layer}.ln2.hook_normalized" for layer in range(model.n_layers)]
    need += [f"blocks.{layer}.hook_resid_mid" for layer in range(model.n_layers)]
    missing = [n for n in need if n not in names]
    if missing:
        raise ValueError(
            f"attribution graphs need a norm in front of each MLP read at hook_resid_mid (sequential blocks); "
            f"this {model.config.model_type} model has no {missing[0]}"
        )
    if getattr(model.adapter, "moe_router", None):
        raise ValueError(
            f"{model.config.model_type} is a mixture of experts: transcoders replace one dense MLP per layer"
        )
    check_covers(tc, model.n_layers, model.d_model)
    if tc.n_layers != model.n_layers or tc.d_model != model.d_model:
        raise ValueError(
            f"the transcoders ({tc.source}) have {tc.n_layers} layers of width {tc.d_model}; the model has "
            f"{model.n_layers} of width {model.d_model}: train transcoders on this model"
        )


@torch.no_grad()
def record(model, tc: Transcoders, tokens: Tensor, zero_positions: int = 1) -> Recording:
    """One clean forward of `tokens` [n_pos] with the transcoders read off every layer (see the module doc)."""
    check_model(model, tc)
    seen: dict[str, Tensor] = {}

    def keep(x, hook):
        seen[hook.name] = x.detach()[0].float()

    names = ["hook_embed"]
    for layer in range(model.n_layers):
        names += [f"blocks.{layer}.ln2.hook_normalized", f"blocks.{layer}.hook_mlp_out"]
    with model.hooks(fwd_hooks=[(n, keep) for n in names]):
        logits = model(tokens[None])[0, -1].float()
    inputs = torch.stack([seen[f"blocks.{layer}.ln2.hook_normalized"] for layer in range(model.n_layers)])
    mlp_out = torch.stack([seen[f"blocks.{layer}.hook_mlp_out"] for layer in range(model.n_layers)])
    acts = [tc.encode(layer, inputs[layer]) for layer in range(model.n_layers)]
    for a in acts:
        a[:zero_positions] = 0
    errors = mlp_out - tc.reconstruct(acts, inputs)
    errors[:, :zero_positions] = 0
    stacked = torch.stack(acts)  # [n_layers, n_pos, d_tc]
    features = stacked.nonzero()  # lexicographic (layer, position, feature), as circuit-tracer orders them
    return Recording(
        tokens=tokens.cpu(),
        inputs=inputs,
        mlp_out=mlp_out,
        embed=seen["hook_embed"],
        logits=logits,
        features=features,
        activations=stacked[features[:, 0], features[:, 1], features[:, 2]],
        errors=errors,
        zero_positions=zero_positions,
    )


DECODER_CACHE_BYTES = 2_000_000_000
"""Padded decoder rows (times activations) kept across batches up to this size; beyond it they are rebuilt per
batch (a cross-layer set writes each feature into every later layer: 30x a per-layer set's rows on SmolLM2)."""


def _zeros(x, *args, **kwargs):
    return torch.zeros_like(x)


def _detached(module, args):
    return tuple(a.detach() if isinstance(a, Tensor) else a for a in args)


@contextmanager
def frozen(model, tc: Transcoders, rec: Recording, state, n_pos: int | None = None) -> Iterator[None]:
    """Hooks that make `model` the frozen replacement model of `rec` on its first `n_pos` positions (module doc):
    norm scales and patterns detached, queries and keys without a graph, each MLP skipped and its output replaced
    by the recorded one with the skip recomputed, plus `state.z[layer]`; `state.normalized[layer]` receives each
    normalised MLP input; `state.z_embed` (if not None) is added to the embedding, and `state.zh` (if not None)
    to each attention `hook_z`, whose value goes to `state.z_heads`."""
    n = rec.inputs.shape[1] if n_pos is None else n_pos
    specs = [model.norm_module(f"blocks.{layer}.ln2")[1] for layer in range(model.n_layers)]
    clean_skip = {}

    def detach(x, hook):
        return x.detach()

    def read_mid(x, hook):
        spec = specs[hook.layer]
        state.normalized[hook.layer] = norms.normalized_of(spec, x, norms.scale_of(spec, x).detach())

    def embed(x, hook):
        return x.detach() + state.z_embed.to(x.dtype)

    def mlp_out(x, hook):  # the recorded output, with the skip recomputed so that gradients pass through it
        layer = hook.layer
        base = rec.mlp_out[layer, :n]
        if tc.W_skip is not None:
            if layer not in clean_skip:
                clean_skip[layer] = tc.skip(layer, rec.inputs[layer, :n])
            base = base - clean_skip[layer] + tc.skip(layer, state.normalized[layer])
        return (base + state.z[layer]).to(x.dtype)

    hooks = [
        (lambda name: name.endswith(".hook_scale"), detach),
        (lambda name: name.endswith("attn.hook_pattern"), detach),
        ("blocks.*.hook_resid_mid", read_mid),
        ("blocks.*.hook_mlp_out", mlp_out),
    ]
    if getattr(state, "z_embed", None) is not None:
        hooks.append(("hook_embed", embed))
    if getattr(state, "zh", None) is not None:

        def heads(x, hook):
            state.z_heads[hook.layer] = x + state.zh[hook.layer].to(x.dtype)
            return state.z_heads[hook.layer]

        hooks.append(("blocks.*.attn.hook_z", heads))
    with ExitStack() as stack:
        stack.enter_context(model.hooks(fwd_hooks=hooks))
        for layer in range(model.n_layers):  # the MLPs' output is replaced: skip computing it
            block = f"{model.adapter.layers}.{layer}"
            mlp = model.hf_model.get_submodule(f"{block}.{model.adapter.mlp}")
            mlp.forward = _zeros
            stack.callback(delattr, mlp, "forward")
            if model.adapter.qkv_layout == "separate":  # patterns are frozen: queries and keys need no graph
                for name in model.adapter.qkv[:2]:
                    handle = model.hf_model.get_submodule(f"{block}.{name}").register_forward_pre_hook(_detached)
                    stack.callback(handle.remove)
        yield


def final_read(model, resid: Tensor) -> Tensor:
    """The final norm with its scale frozen (a linear map of `resid`), then its affine part: what logits read."""
    module, spec = model.norm_module("ln_final")
    normalized = norms.normalized_of(spec, resid, norms.scale_of(spec, resid).detach())
    return norms.affine(module, spec, normalized, resid.dtype).float()


class FrozenRun:
    """The frozen replacement model, run forward once on `batch` copies of the prompt; `rows` many times."""

    def __init__(self, model, tc: Transcoders, rec: Recording, batch: int, heads: bool = False):
        self.model, self.tc, self.rec, self.batch = model, tc, rec, batch
        n_pos, d = rec.inputs.shape[1], rec.inputs.shape[2]
        self.z = [torch.zeros(batch, n_pos, d, requires_grad=True) for _ in range(model.n_layers)]
        self.z_embed = torch.zeros(batch, n_pos, d, requires_grad=True)
        self.normalized: list[Tensor | None] = [None] * model.n_layers
        # with heads=True, each layer's attention `hook_z` [batch, pos, head, d_head] gets a zero leaf too (its
        # gradient is the gradient at z) and keeps the tensor the forward used (`circuits.graph.heads`)
        shape = (batch, n_pos, model.n_heads, model.d_head)
        self.zh = [torch.zeros(shape, requires_grad=True) for _ in range(model.n_layers)] if heads else None
        self.z_heads: list[Tensor | None] = [None] * model.n_layers
        self.sources = Sources(rec, tc)
        ids = rec.tokens[None].expand(batch, -1).to(model.device)
        with frozen(model, tc, rec, self):
            resid = model(ids, stop_at_layer=model.n_layers)
        self.final = final_read(model, resid)

    def rows(self, layers: Tensor, positions: Tensor, vectors: Tensor, retain: bool = True) -> Tensor:
        """[len(layers), n_sources]: direct effects on targets read by `vectors` [m, d_model] at
        (layer, position); layer `n_layers` means the final residual after the last norm (logits)."""
        m = len(layers)
        if m > self.batch:
            raise ValueError(f"{m} targets in one pass; the run holds {self.batch} copies")
        outs, grads = self.reads(layers, positions, vectors)
        g_embed, g_mlp, _ = self.backward(outs, grads, retain)
        return self._contract(g_embed, g_mlp)[:m]

    def reads(self, layers: Tensor, positions: Tensor, vectors: Tensor) -> tuple[list[Tensor], list[Tensor]]:
        """The (output tensors, their injected gradients) that read each target in its own batch copy."""
        outs, grads = [], []
        for layer in layers.unique().tolist():
            sel = (layers == layer).nonzero().squeeze(1)
            out = self.final if layer == self.model.n_layers else self.normalized[layer]
            g = torch.zeros_like(out)
            g[sel, positions[sel]] = vectors[sel].to(g.dtype)
            outs.append(out)
            grads.append(g)
        return outs, grads

    def backward(self, outs: list[Tensor], grads: list[Tensor], retain: bool = True):
        """(gradient at the embedding, at each MLP output, at each attention z or None) for one injection."""
        leaves = [self.z_embed, *self.z, *(self.zh or [])]
        got = torch.autograd.grad(outs, leaves, grads, retain_graph=retain, allow_unused=True)
        n = self.model.n_layers
        return got[0], list(got[1 : n + 1]), (list(got[n + 1 :]) if self.zh is not None else None)

    def contract(self, g_embed: Tensor | None, g_mlp: list[Tensor | None]) -> Tensor:
        """[batch, n_sources]: each source's writing vector dotted with the gradients where it writes."""
        return self._contract(g_embed, g_mlp)

    def _contract(self, g_embed: Tensor | None, g_mlp: list[Tensor | None]) -> Tensor:
        out = torch.zeros(self.batch, self.sources.n_sources)
        for layer in range(self.model.n_layers):
            if g_mlp[layer] is not None:
                self.sources.add_layer(out, layer, g_mlp[layer])
        if g_embed is not None:
            self.sources.add_embed(out, g_embed)
        return out


class Sources:
    """Every source node's writing vectors, contracted with gradients: active features (activation times decoder
    rows, into each layer they write), error vectors, token embeddings. Columns in graph order: features, errors
    (layer-major), tokens."""

    def __init__(self, rec: Recording, tc: Transcoders):
        self.rec, self.tc = rec, tc
        self.n_layers, self.n_pos = rec.inputs.shape[0], rec.inputs.shape[1]
        self.n_features = len(rec.features)
        self.n_sources = self.n_features + (self.n_layers + 1) * self.n_pos
        self.writers = [[s for s in range(self.n_layers) if t in tc.writes(s)] for t in range(self.n_layers)]
        self._cache: dict[tuple[int, int], tuple[Tensor, Tensor, Tensor] | None] = {}
        self._bytes = 0

    def decoders(self, source: int, target: int) -> tuple[Tensor, Tensor, Tensor] | None:
        """Layer `source`'s active features' decoder rows into `target`, times their activations, padded by
        position: (D [n_pos, r, d_model], the features' graph indices [n_pos, r] (-1: padding), valid mask)."""
        key = (source, target)
        if key in self._cache:
            return self._cache[key]
        rec, n_pos = self.rec, self.n_pos
        idx = (rec.features[:, 0] == source).nonzero().squeeze(1)
        if not len(idx):
            return None
        pos, feat, act = rec.features[idx, 1], rec.features[idx, 2], rec.activations[idx]
        dec = self.tc.decoder_rows(source, feat, target) * act[:, None]
        counts = torch.bincount(pos, minlength=n_pos)
        slot = torch.arange(len(idx)) - torch.repeat_interleave(counts.cumsum(0) - counts, counts)
        r = int(counts.max())
        D = torch.zeros(n_pos, r, dec.shape[1])
        D[pos, slot] = dec
        where = torch.full((n_pos, r), -1, dtype=torch.long)
        where[pos, slot] = idx
        out = (D, where, where >= 0)
        size = D.numel() * D.element_size()
        if self._bytes + size <= DECODER_CACHE_BYTES:  # kept for every batch while they fit the budget
            self._cache[key] = out
            self._bytes += size
        return out

    def add_layer(self, out: Tensor, target: int, g: Tensor) -> None:
        """Add to `out` [m, n_sources] the effects through layer `target`'s MLP output, whose gradient is
        `g` [m, p, d_model] on the first p positions (later positions: zero, as in a causal model)."""
        p = g.shape[1]
        for source in self.writers[target]:
            got = self.decoders(source, target)
            if got is None:
                continue
            D, where, valid = got
            D, where, valid = D[:p], where[:p], valid[:p]
            scores = torch.einsum("bnd,nrd->bnr", g, D)  # [m, p, r]
            out[:, where[valid]] += scores[:, valid]
        start = self.n_features + target * self.n_pos
        out[:, start : start + p] = (g * self.rec.errors[target, :p]).sum(-1)

    def add_embed(self, out: Tensor, g: Tensor) -> None:
        """Add the token nodes' effects: `g` [m, p, d_model] is the gradient at the embedding output."""
        p = g.shape[1]
        start = self.n_features + self.n_layers * self.n_pos
        out[:, start : start + p] = (g * self.rec.embed[:p]).sum(-1)


class LayerwiseRun:
    """The same rows as `FrozenRun` in the memory of one block: the clean residual entering each block is kept
    (n_layers x n_pos x d_model), and each batch of targets walks the blocks from the top down, recomputing one
    frozen block forward at a time (batch 1) and pulling each target's gradient back through it in turn (one saved
    attention pattern serves every target; autograd's `is_grads_batched` was 10x slower on SmolLM2 at 4,096
    tokens). A batch only runs the positions up to
    its last target's and the blocks up to its highest target's, since nothing later reaches them (causal
    attention). This is what makes long prompts fit: `FrozenRun` keeps every layer's pattern for every copy."""

    def __init__(self, model, tc: Transcoders, rec: Recording, batch: int):
        self.model, self.tc, self.rec, self.batch = model, tc, rec, batch
        self.sources = Sources(rec, tc)
        seen: dict[int, Tensor] = {}

        def keep(x, hook):
            seen[hook.layer] = x.detach()[0].float()

        with torch.no_grad(), model.hooks(fwd_hooks=[("blocks.*.hook_resid_pre", keep)]):
            self.resid_final = model(rec.tokens[None].to(model.device), stop_at_layer=model.n_layers)[0].float()
        self.resid_pre = [seen[layer] for layer in range(model.n_layers)]
        self.normalized: list[Tensor | None] = [None] * model.n_layers
        self.z: list[Tensor | None] = [None] * model.n_layers
        self.z_embed = None

    def rows(self, layers: Tensor, positions: Tensor, vectors: Tensor, retain: bool = True) -> Tensor:
        """[len(layers), n_sources], as `FrozenRun.rows` (`retain` is unused: nothing is kept between calls)."""
        m, n_layers = len(layers), self.model.n_layers
        if m > self.batch:
            raise ValueError(f"{m} targets in one pass; the run holds {self.batch} copies")
        p = int(positions.max()) + 1
        out = torch.zeros(m, self.sources.n_sources)
        vectors = vectors.float()
        g = None  # the batch's gradient at the residual leaving the current block, [m, p, d_model]
        logits = (layers == n_layers).nonzero().squeeze(1)
        if len(logits):
            x = self.resid_final[:p].clone().requires_grad_()
            read = final_read(self.model, x)
            g = torch.zeros(m, p, x.shape[-1])
            for i in logits.tolist():
                inject = torch.zeros_like(read)
                inject[positions[i]] = vectors[i]
                (g[i],) = torch.autograd.grad(read, x, inject, retain_graph=True)
        for layer in reversed(range(min(int(layers.max()), n_layers - 1) + 1)):
            g, g_mlp = self._block(layer, p, g, layers, positions, vectors)
            self.sources.add_layer(out, layer, g_mlp)
        self.sources.add_embed(out, g)
        return out

    def _block(self, layer: int, p: int, g: Tensor | None, layers: Tensor, positions: Tensor, vectors: Tensor):
        """(gradient at block `layer`'s input, at its MLP output), [m, p, d_model] each: `g` arrives at its output
        (None: nothing yet) and each target of this layer reads its normalised MLP input at its position."""
        model, d, m = self.model, self.resid_pre[layer].shape[-1], len(layers)
        x = self.resid_pre[layer][:p][None].clone().requires_grad_()
        self.z[layer] = z = torch.zeros(1, p, d, requires_grad=True)
        with frozen(model, self.tc, self.rec, self, n_pos=p):
            post = model(x, start_at_layer=layer, stop_at_layer=layer + 1).float()
        normalized = self.normalized[layer]
        self.z[layer], self.normalized[layer] = None, None
        g_in, g_mlp = torch.zeros(m, p, d), torch.zeros(m, p, d)
        for i in range(m):
            outs, grads = [], []
            if g is not None and g[i].any():
                outs.append(post)
                grads.append(g[i][None])
            if int(layers[i]) == layer:
                inject = torch.zeros_like(normalized)
                inject[0, positions[i]] = vectors[i]
                outs.append(normalized)
                grads.append(inject)
            if not outs:
                continue
            got = torch.autograd.grad(outs, [x, z], grads, retain_graph=True, allow_unused=True)
            if got[0] is not None:
                g_in[i] = got[0][0]
            if got[1] is not None:
                g_mlp[i] = got[1][0]
        return g_in, g_mlp
