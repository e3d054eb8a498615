"""Per-example, per-use gradient features of chosen modules, from forward and backward hooks.

A *group* is one set of tied parameters (e.g. the looped block's `q_proj`) and the modules that use
them: the per-step proxy modules of a looped model, or one module called several times. Each call of a
module of the group is one *use*; uses are numbered in forward order, which for a looped model is the
loop step. A forward hook saves each use's input and output; one backward pass then gives each
output's gradient, so we hold, per use t, the activations `a_t` and output gradients `delta_t`, and

    phi_t = sum_l delta_{t,l} a_{t,l}^T     (the gradient through use t, Proposition 1 of SDI)

Features are either exact (flattened phi_t, for small models and references) or sketched
(`attribution.sketch`, one m-dim sketch per parameter tensor, concatenated). Per-example gradients are
exact because the loss is a *sum* of per-example losses (each example's gradient flows only into its
own rows).

Output gradients come from one `torch.autograd.grad` call w.r.t. the hooked outputs (the backward half
of the tracking), so parameters' `.grad` is never touched.

Supported modules: `nn.Linear`, `nn.LayerNorm`, `nn.Embedding` and the looped GPT's proxies
(`StepLinear`, `StepLayerNorm`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attribution.looped import StepLayerNorm, StepLinear
from attribution.sketch import CountHash, count_sketch, param_seed, tensor_sketch_embedding, tensor_sketch_linear

LossFn = Callable[[nn.Module, Tensor, Tensor], Tensor]
"""(hf_model, input_ids, attention_mask) -> per-example losses [batch]."""


def per_example_lm_loss(model: nn.Module, ids: Tensor, mask: Tensor) -> Tensor:
    """Mean next-token cross-entropy of each example over its non-padded targets -> [batch]."""
    logits = model(input_ids=ids, attention_mask=mask).logits
    ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none").view(ids.shape[0], -1)
    keep = mask[:, 1:].to(ce.dtype)
    return (ce * keep).sum(1) / keep.sum(1).clamp(min=1)


def _kind(module: nn.Module) -> tuple[str, nn.Module]:
    """("linear" | "layernorm" | "embedding", the module that owns the parameters)."""
    if isinstance(module, StepLinear):
        return "linear", module.target
    if isinstance(module, StepLayerNorm):
        return "layernorm", module.target
    if isinstance(module, nn.Linear):
        return "linear", module
    if isinstance(module, nn.LayerNorm):
        return "layernorm", module
    if isinstance(module, nn.Embedding):
        return "embedding", module
    raise NotImplementedError(
        f"per-example gradients of {type(module).__name__} are not supported; "
        "choose Linear, LayerNorm or Embedding modules (or the looped GPT's step proxies)"
    )


@dataclass
class _Use:
    x: Tensor
    out: Tensor
    grad: Tensor | None = None


class GradientFeaturizer:
    """Per-example, per-use gradient features of tied parameter groups: exact or sketched.

    groups: name -> modules sharing parameters (one entry per step, or one module called many times).
    sketch_dim: None for exact features, else the sketch size m (one m-dim sketch per parameter tensor).
    seed: hashes are derived from (seed, group name, parameter), so they are shared across steps,
    batches, checkpoints, processes.

    >>> feat = GradientFeaturizer(model.step_modules(), sketch_dim=2048)
    >>> phi = feat(model, ids, mask)          # [batch, steps, dim]
    """

    def __init__(
        self,
        groups: Mapping[str, Sequence[nn.Module]],
        sketch_dim: int | None = None,
        seed: int = 0,
        loss_fn: LossFn = per_example_lm_loss,
    ):
        if not groups:
            raise ValueError("no parameter groups to attribute over")
        self.groups = {k: list(v) for k, v in groups.items()}
        self.sketch_dim = sketch_dim
        self.seed = seed
        self.loss_fn = loss_fn
        self.kinds = {k: _kind(mods[0]) for k, mods in self.groups.items()}
        self._hashes: dict[tuple, CountHash] = {}

    def rebind(self, old: nn.Module, new: nn.Module) -> GradientFeaturizer:
        """The same featurizer (groups, sketch size, seed, loss) on `new`, a model with `old`'s module tree
        (e.g. a checkpoint's copy); modules are matched by their name in `old`."""
        if old is new:
            return self
        names = {id(m): n for n, m in old.named_modules()}
        missing = [k for k, mods in self.groups.items() if any(id(m) not in names for m in mods)]
        if missing:
            raise ValueError(f"featurizer groups {missing} are not modules of the model it is rebound from")
        groups = {k: [new.get_submodule(names[id(m)]) for m in mods] for k, mods in self.groups.items()}
        return GradientFeaturizer(groups, sketch_dim=self.sketch_dim, seed=self.seed, loss_fn=self.loss_fn)

    # ------------------------------------------------------------------ sizes
    def param_tensors(self) -> list[tuple[str, str, nn.Parameter]]:
        """(group, "weight" | "bias", parameter) for every parameter tensor covered, in feature order."""
        out = []
        for name, (kind, owner) in self.kinds.items():
            out.append((name, "weight", owner.weight))
            if getattr(owner, "bias", None) is not None and kind != "embedding":
                out.append((name, "bias", owner.bias))
        return out

    def dim(self) -> int:
        ps = self.param_tensors()
        return len(ps) * self.sketch_dim if self.sketch_dim else sum(p.numel() for _, _, p in ps)

    def _hash(self, group: str, part: str, d: int, device) -> CountHash:
        key = (group, part, d, str(device))
        if key not in self._hashes:
            self._hashes[key] = CountHash.make(d, self.sketch_dim, param_seed(self.seed, group, part), device)
        return self._hashes[key]

    # ------------------------------------------------------------------ capture
    def __call__(self, model: nn.Module, ids: Tensor, mask: Tensor | None = None) -> Tensor:
        """Features [batch, uses, dim] of the per-example losses on (ids, mask)."""
        if mask is None:
            mask = torch.ones_like(ids)
        uses: dict[str, list[_Use]] = {k: [] for k in self.groups}
        handles = []

        def make_hook(group: str):
            def hook(mod, args, out):
                uses[group].append(_Use(args[0].detach(), out))

            return hook

        for group, mods in self.groups.items():
            for mod in set(mods):
                handles.append(mod.register_forward_hook(make_hook(group)))
        params = [p for _, _, p in self.param_tensors()]
        flags = [p.requires_grad for p in params]
        try:
            for p in params:
                p.requires_grad_(True)
            with torch.enable_grad():
                losses = self.loss_fn(model, ids, mask)
                if losses.ndim != 1 or losses.shape[0] != ids.shape[0]:
                    raise ValueError(f"loss_fn must return per-example losses [batch], got {tuple(losses.shape)}")
                # the backward pass stops at the hooked outputs: d loss / d output of every use, and
                # parameter .grad is left untouched
                outs = [u for us in uses.values() for u in us if u.out.requires_grad]
                grads = torch.autograd.grad(losses.sum(), [u.out for u in outs], allow_unused=True)
                for u, g in zip(outs, grads):
                    u.grad = None if g is None else g.detach()
                    u.out = None
        finally:
            for h in handles:
                h.remove()
            for p, f in zip(params, flags):
                p.requires_grad_(f)
        counts = {k: len(v) for k, v in uses.items()}
        if len(set(counts.values())) != 1:
            raise ValueError(
                f"parameter groups were used a different number of times per forward: {counts}; "
                "attribute over groups used equally often (e.g. only the looped block)"
            )
        n_uses = next(iter(counts.values()))
        tok_mask = mask.to(torch.float32)[..., None]
        per_use = []
        for t in range(n_uses):
            feats = []
            for group, (kind, owner) in self.kinds.items():
                use = uses[group][t]
                grad = use.grad if use.grad is not None else torch.zeros_like(_out_like(kind, owner, use.x))
                feats += self._features(group, kind, owner, use.x, grad.float() * tok_mask)
            per_use.append(torch.cat(feats, dim=-1))
        return torch.stack(per_use, dim=1)

    def _features(self, group: str, kind: str, owner: nn.Module, x: Tensor, g: Tensor) -> list[Tensor]:
        m = self.sketch_dim
        has_bias = getattr(owner, "bias", None) is not None and kind != "embedding"
        if kind == "layernorm":
            xhat = F.layer_norm(x.float(), owner.normalized_shape, eps=owner.eps)
            w = (g * xhat).sum(1)
            parts = [("weight", w)] + ([("bias", g.sum(1))] if has_bias else [])
            if not m:
                return [v for _, v in parts]
            return [count_sketch(v, self._hash(group, p, v.shape[-1], v.device)) for p, v in parts]
        if kind == "embedding":
            ids = x
            if not m:
                full = torch.zeros(g.shape[0], owner.num_embeddings, g.shape[-1], device=g.device)
                full.scatter_add_(1, ids[..., None].expand_as(g), g)
                return [full.flatten(1)]
            h_tok = self._hash(group, "weight_in", owner.num_embeddings, g.device)
            h_out = self._hash(group, "weight_out", g.shape[-1], g.device)
            return [tensor_sketch_embedding(ids, g, h_tok, h_out)]
        a = x.float()
        out = []
        if not m:
            out.append(torch.einsum("blo,bli->boi", g, a).flatten(1))
            if has_bias:
                out.append(g.sum(1))
            return out
        h_in = self._hash(group, "weight_in", a.shape[-1], a.device)
        h_out = self._hash(group, "weight_out", g.shape[-1], g.device)
        out.append(tensor_sketch_linear(a, g, h_in, h_out))
        if has_bias:
            out.append(count_sketch(g.sum(1), self._hash(group, "bias", g.shape[-1], g.device)))
        return out


def _out_like(kind: str, owner: nn.Module, x: Tensor) -> Tensor:
    if kind == "linear":
        return x.new_zeros(*x.shape[:-1], owner.out_features)
    if kind == "embedding":
        return x.new_zeros(*x.shape, owner.embedding_dim, dtype=torch.float32)
    return x.new_zeros(x.shape)


def flat_gradient_layout(featurizer: GradientFeaturizer) -> list[tuple[str, str, tuple[int, ...]]]:
    """(group, part, shape) of each block of an exact feature vector, in order (for unflattening)."""
    return [(g, part, tuple(p.shape)) for g, part, p in featurizer.param_tensors()]
