"""EK-FAC influence restricted to chosen components, e.g. one attention head's W_Q and W_K.

A *component* is one head's slice of the attention projections (`HeadComponent(layer, head, "qk")`);
its parameters are grouped in Kronecker blocks, as in MDA's `ekfac_blocks.py`:

    "qk":  input a = [x, 1] (x = input of the q/k projection, 1 for the bias), output g = [dq_h, dk_h]
    "v":   input a = [x, 1],                                                    output g = dv_h
    "o":   input a = z_h (the head's attention output),                          output g = d(attn_out)

The per-example gradient of a block is `G = sum_l g_l a_l^T` ([d_out, d_in]); all of it comes from the
core's hook points (`blocks.L.attn.hook_q|k|v|z` forward and backward, `hook_attn_out` backward) and
one forward hook on the projection module named by the model's adapter, so any architecture `interp`
wraps works (GPT-NeoX fused q|k|v, Llama separate projections, the looped GPT).

EK-FAC (George et al. 2018; Grosse et al. 2023), per block:
1. `A = E_tok[a a^T]`, `S = E_tok[g g^T]`, with labels *sampled from the model* (true Fisher), tokens
   averaged over the fitting data; eigenvectors `Q_A`, `Q_S`.
2. Eigenvalue correction `Lambda = E_examples[(Q_S^T G Q_A)^2]` from per-example gradients (the correct
   estimator); `lambda_from_batches=True` reproduces MDA's code, which squares batch-mean gradients.
3. Damped inverse: `H^-1 v = Q_S [(Q_S^T v Q_A) / (Lambda + alpha * mean(Lambda))] Q_A^T`, floor 1e-5
   (MDA: alpha = 0.1), the mean taken per block, over the whole head or per module (`DAMPING_SCOPES`).

Influence of training example z on a measurement f (MDA's sign): `I(z) = - grad L(z)^T H^-1 grad f`;
positive means up-weighting z increases f.

Why our own EK-FAC and not Kronfluence: Kronfluence (1.0.1 installs with `--no-deps` plus einconv and
opt_einsum, and imports fine alongside torch 2.13) factors whole `nn.Linear`/`Conv2d` modules. MDA needs
one head's rows of a fused q|k|v projection (or the q and k rows of two projections as one block), which
Kronfluence cannot express without rewriting the model. `benchmarks/bench_attribution.py` compares the
throughput of both on whole-module influence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

Objective = Callable[[object, Tensor, Tensor], Tensor]
"""(HookedModel, ids, mask) -> per-example scalars [batch] to differentiate."""

BLOCKS = {"qk": ("qk",), "qkv": ("qk", "v"), "qkvo": ("qk", "v", "o")}

DampingScope = Literal["block", "head", "module"]
DAMPING_SCOPES = ("block", "head", "module")
"""Damping `alpha * mean(lambda)` with the mean over: each Kronecker block's own eigenvalues ("block", MDA's code);
all blocks of the head component ("head": one scalar for the head's factors); or the blocks that share a module's
input (Kronfluence damps per module: q|k and v read the projection input, o the heads' output)."""


@dataclass(frozen=True)
class HeadComponent:
    """One attention head's parameters: `mode` "qk" (W_Q, W_K), "qkv" or "qkvo"."""

    layer: int
    head: int
    mode: Literal["qk", "qkv", "qkvo"] = "qk"

    @classmethod
    def parse(cls, text: str) -> HeadComponent:
        """ "L1H3" or "L1H3:qkvo" -> HeadComponent(1, 3, ...)."""
        import re

        m = re.fullmatch(r"L(\d+)H(\d+)(?::(qk|qkv|qkvo))?", text.strip())
        if not m:
            raise ValueError(f"bad component {text!r}: write L<layer>H<head>[:qk|qkv|qkvo], e.g. L1H3:qk")
        return cls(int(m[1]), int(m[2]), m[3] or "qk")

    def check(self, model) -> None:
        """Raise a clear error if the model has no such layer or head."""
        if not 0 <= self.layer < model.n_layers:
            raise ValueError(
                f"component {self}: layer {self.layer} does not exist; the model has layers 0..{model.n_layers - 1}"
            )
        if not 0 <= self.head < model.n_heads:
            raise ValueError(
                f"component {self}: head {self.head} does not exist; the model has heads 0..{model.n_heads - 1}"
            )
        if self.mode not in BLOCKS:
            raise ValueError(f"component mode {self.mode!r} unknown; use one of {', '.join(BLOCKS)}")

    def __str__(self) -> str:
        return f"L{self.layer}H{self.head}:{self.mode}"


def lm_loss(model, ids: Tensor, mask: Tensor) -> Tensor:
    """Summed next-token cross-entropy of each example -> [batch] (MDA's training loss)."""
    logits = model.hf_model(input_ids=ids, attention_mask=mask).logits.float()
    ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none").view(len(ids), -1)
    return (ce * mask[:, 1:]).sum(1)


def sampled_label_loss(seed: int = 0) -> Objective:
    """Summed cross-entropy against labels drawn from the model's own predictions (the true Fisher).

    Labels are drawn on the model's device (no [tokens, vocab] copy to the host) from a generator on that
    device seeded with `seed`, created at the first call and reused, so a fit is reproducible per device.
    """
    gens: dict[str, torch.Generator] = {}

    def objective(model, ids: Tensor, mask: Tensor) -> Tensor:
        logits = model.hf_model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        with torch.no_grad():
            dev = str(logits.device)
            if dev not in gens:
                gens[dev] = torch.Generator(device=logits.device).manual_seed(seed)
            probs = logits.float().softmax(-1).flatten(0, 1)
            labels = torch.multinomial(probs, 1, generator=gens[dev]).view(len(ids), -1)
        ce = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), reduction="none").view(len(ids), -1)
        return (ce * mask[:, 1:]).sum(1)

    return objective


# ----------------------------------------------------------------------------------------- capture
def _projection_weight(module) -> Tensor:
    return module.weight if hasattr(module, "weight") else module.target.weight  # looped GPT: a step proxy


def _has_bias(module) -> bool:
    target = module if hasattr(module, "weight") else module.target
    return getattr(target, "bias", None) is not None


def component_gradients(
    model,
    comp: HeadComponent,
    ids: Tensor,
    mask: Tensor | None = None,
    objective: Objective = lm_loss,
    return_factors: bool = False,
):
    """Per-example block gradients {block: [batch, d_out, d_in]} of `objective` w.r.t. the component.

    The gradients of q, k and v come from the core's `attn.hook_q|k|v` backward hooks, which split fused
    projections (GPT-NeoX per-head q|k|v, GPT-2 q|k|v blocks) and separate ones (Llama, Gemma 3) into heads;
    grouped-query models give the k/v head that serves query head `head`. The projection input is read
    with a forward hook on the adapter's first q/k/v module (all three share it), and autograd is taken
    w.r.t. the weights of *every* q/k/v projection so that each hook sees its gradient. The bias column
    (homogeneous coordinate) is included only when the projections have a bias. The "o" block reads the
    output projection's input (the heads' z) and the gradient of its output directly, so norms after it
    (Gemma 3's post-attention norm) do not enter. With `return_factors`, also the token-level factors
    {block: (a [batch, pos, d_in], g [batch, pos, d_out])}.
    """
    comp.check(model)
    mask = torch.ones_like(ids) if mask is None else mask
    L, h = comp.layer, comp.head
    blocks = BLOCKS[comp.mode]
    acts: dict[str, Tensor] = {}
    grads: dict[str, Tensor] = {}

    def keep_grad(key):
        def bwd(g, hook):
            grads[key] = g.detach()

        return bwd

    a = f"blocks.{L}.attn"
    bwd = [(f"{a}.hook_q", keep_grad("q")), (f"{a}.hook_k", keep_grad("k"))]
    if "v" in blocks:
        bwd.append((f"{a}.hook_v", keep_grad("v")))
    prefix = f"{model.adapter.layers}.{L}"
    projs = [model.hf_model.get_submodule(f"{prefix}.{name}") for name in model.adapter.qkv]
    handles = [projs[0].register_forward_hook(lambda mod, args, out: acts.__setitem__("x", args[0].detach()))]
    if "o" in blocks:
        out_proj = model.hf_model.get_submodule(f"{prefix}.{model.adapter.out_proj}")

        def keep_o(mod, args, out):
            acts["z"] = args[0].detach()
            if out.requires_grad:
                out.register_hook(lambda g: grads.__setitem__("out", g.detach()))

        handles.append(out_proj.register_forward_hook(keep_o))
    weights = list({id(w): w for w in map(_projection_weight, projs)}.values())
    flags = [w.requires_grad for w in weights]
    try:
        for w in weights:
            w.requires_grad_(True)
        with torch.enable_grad(), model.hooks([], bwd):
            values = objective(model, ids, mask)
            torch.autograd.grad(values.sum(), weights)  # fires the backward hooks; no .grad is written
    finally:
        for hd in handles:
            hd.remove()
        for w, f in zip(weights, flags):
            w.requires_grad_(f)
    m = mask.to(torch.float32)[..., None]
    x = acts["x"].float()
    if _has_bias(projs[0]):  # homogeneous coordinate for the bias
        x = torch.cat([x, torch.ones_like(x[..., :1])], -1)
    x1 = x * m
    kv_head = h // max(1, model.n_heads // model.n_kv_heads)
    factors = {}
    if "qk" in blocks:
        factors["qk"] = (x1, torch.cat([grads["q"][:, :, h], grads["k"][:, :, kv_head]], -1).float() * m)
    if "v" in blocks:
        factors["v"] = (x1, grads["v"][:, :, kv_head].float() * m)
    if "o" in blocks:
        z = acts["z"].float().unflatten(-1, (model.n_heads, -1))[:, :, h]
        factors["o"] = (z * m, grads["out"].float() * m)
    out = {k: torch.einsum("blo,bli->boi", g, a_) for k, (a_, g) in factors.items()}
    return (out, factors, values.detach()) if return_factors else out


# ----------------------------------------------------------------------------------------- EK-FAC
@dataclass
class EKFACFactors:
    """Eigenbases and corrected eigenvalues per block of one component."""

    component: HeadComponent
    q_a: dict[str, Tensor] = field(default_factory=dict)
    q_s: dict[str, Tensor] = field(default_factory=dict)
    lam: dict[str, Tensor] = field(default_factory=dict)
    """[d_out, d_in] eigenvalues in the Kronecker eigenbasis."""
    damping_alpha: float = 0.1
    damping_floor: float = 1e-5
    damping_scope: DampingScope = "head"
    """Which eigenvalues the damping's mean is taken over (see `DAMPING_SCOPES`; "head" tracked the exact damped
    GGN best, attribution/README.md)."""

    def damping(self) -> dict[str, Tensor]:
        """{block: alpha * mean(lambda over the block's damping scope)}."""
        if self.damping_scope not in DAMPING_SCOPES:
            raise ValueError(f"damping scope {self.damping_scope!r} unknown; use one of {', '.join(DAMPING_SCOPES)}")
        lam = self.lam

        def scope(k: str) -> list[str]:
            if self.damping_scope == "block":
                return [k]
            if self.damping_scope == "head":
                return list(lam)
            return [b for b in lam if (b == "o") == (k == "o")]  # "module": blocks that share an input factor

        return {k: self.damping_alpha * torch.cat([lam[b].flatten() for b in scope(k)]).mean() for k in lam}

    def inverse_hvp(self, v: dict[str, Tensor]) -> dict[str, Tensor]:
        """H^-1 v per block (v: {block: [..., d_out, d_in]})."""
        out = {}
        damp = self.damping()
        for k, x in v.items():
            qa, qs, lam = self.q_a[k], self.q_s[k], self.lam[k]
            rot = qs.T @ x @ qa
            denom = (lam + damp[k]).clamp(min=self.damping_floor)
            out[k] = qs @ (rot / denom) @ qa.T
        return out

    def state_dict(self) -> dict[str, Tensor]:
        d = {}
        for k in self.q_a:
            d[f"{k}.q_a"], d[f"{k}.q_s"], d[f"{k}.lam"] = self.q_a[k], self.q_s[k], self.lam[k]
        return d


def fit_ekfac(
    model,
    comp: HeadComponent,
    ids: Tensor,
    mask: Tensor | None = None,
    batch_size: int = 8,
    seed: int = 0,
    damping_alpha: float = 0.1,
    lambda_from_batches: bool = False,
    label_samples: int = 1,
    damping_scope: DampingScope = "head",
) -> EKFACFactors:
    """Fit EK-FAC factors of a component on fitting data (labels sampled from the model; `seed` fixes them)."""
    comp.check(model)
    mask = torch.ones_like(ids) if mask is None else mask
    objective = sampled_label_loss(seed)
    sums_a: dict[str, Tensor] = {}
    sums_s: dict[str, Tensor] = {}
    n_tok = 0.0
    batches = [(ids[i : i + batch_size], mask[i : i + batch_size]) for i in range(0, len(ids), batch_size)]
    for _ in range(label_samples):
        for b_ids, b_mask in batches:
            _, factors, _ = component_gradients(model, comp, b_ids, b_mask, objective, return_factors=True)
            n_tok += float(b_mask.sum())
            for k, (a, g) in factors.items():
                sums_a[k] = sums_a.get(k, 0) + torch.einsum("bli,blj->ij", a, a)
                sums_s[k] = sums_s.get(k, 0) + torch.einsum("bli,blj->ij", g, g)
    f = EKFACFactors(comp, damping_alpha=damping_alpha, damping_scope=damping_scope)
    for k in sums_a:
        for _name, mat, store in (("A", sums_a[k], f.q_a), ("S", sums_s[k], f.q_s)):
            mat = (mat + mat.T) / (2 * n_tok)
            mat = mat + 1e-6 * mat.trace() / mat.shape[0] * torch.eye(mat.shape[0], device=mat.device)
            store[k] = torch.linalg.eigh(mat.double())[1].float()
    lam_sum: dict[str, Tensor] = {}
    count = 0
    for _ in range(label_samples):
        for b_ids, b_mask in batches:
            g_blocks = component_gradients(model, comp, b_ids, b_mask, objective)
            for k, G in g_blocks.items():
                G = G.mean(0, keepdim=True) if lambda_from_batches else G
                lam_sum[k] = lam_sum.get(k, 0) + ((f.q_s[k].T @ G @ f.q_a[k]) ** 2).sum(0)
            count += 1 if lambda_from_batches else len(b_ids)
    f.lam = {k: v / count for k, v in lam_sum.items()}
    return f


def influence_scores(
    model,
    factors: EKFACFactors,
    train_ids: Tensor,
    probe_grad: dict[str, Tensor],
    train_mask: Tensor | None = None,
    batch_size: int = 8,
) -> tuple[Tensor, Tensor]:
    """(scores [n_train], losses [n_train]): `-grad L(z)^T H^-1 grad f` for every training sequence."""
    comp = factors.component
    ihvp = factors.inverse_hvp(probe_grad)
    train_mask = torch.ones_like(train_ids) if train_mask is None else train_mask
    scores, losses = [], []
    for i in range(0, len(train_ids), batch_size):
        g, _, loss = component_gradients(
            model, comp, train_ids[i : i + batch_size], train_mask[i : i + batch_size], lm_loss, return_factors=True
        )
        scores.append(-sum((g[k] * ihvp[k]).sum((-1, -2)) for k in g))
        losses.append(loss)
    return torch.cat(scores), torch.cat(losses)


def mean_gradient(
    model, comp: HeadComponent, ids: Tensor, objective: Objective, mask: Tensor | None = None, batch_size: int = 16
) -> dict[str, Tensor]:
    """Gradient of the mean of a per-example objective (e.g. a probe) w.r.t. the component's blocks."""
    total: dict[str, Tensor] = {}
    for i in range(0, len(ids), batch_size):
        m = None if mask is None else mask[i : i + batch_size]
        for k, G in component_gradients(model, comp, ids[i : i + batch_size], m, objective).items():
            total[k] = total.get(k, 0) + G.sum(0)
    return {k: v / len(ids) for k, v in total.items()}


def flatten_blocks(blocks: dict[str, Tensor]) -> Tensor:
    """{block: [..., d_out, d_in]} -> [..., n_params] in block order (for exact references)."""
    return torch.cat([blocks[k].flatten(-2) for k in sorted(blocks)], -1)
