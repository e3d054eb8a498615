"""EK-FAC over whole `nn.Linear` modules named by pattern (attention q/k/v/o, MLP up/gate/down, the unembedding).

Where `attribution.influence` factors one attention head's slices (MDA's unit), this factors each chosen Linear
as one Kronecker block, block-diagonal across modules, as Kronfluence's `tracked_modules` does:

    a = [x, 1] (the module's input; 1 for the bias, when it has one),  g = dL/d(output)
    per-example gradient  G = sum_tokens g a^T                          [d_out, d_in (+1)]

Fitting (George et al. 2018; Grosse et al. 2023): `A = E_tok[a a^T]`, `S = E_tok[g g^T]` with labels sampled
from the model (the true Fisher), their eigenbases `Q_A`, `Q_S`, and the corrected eigenvalues
`Lambda = E_examples[(Q_S^T G Q_A)^2]` from per-example gradients. The damping rule is Kronfluence's default
heuristic: `alpha * mean(Lambda)` over each module's own eigenvalues, alpha = 0.1 (`EKFACFactors` with
`damping_scope="block"`, a block being a module here).

    mods = linear_modules(model, ["*.mlp.*", "*.attention.*"])      # globs over module names; None: every Linear
    f = fit_linear_ekfac(model, mods, fit_ids)                      # in the layers (Kronfluence's default set)
    scores = linear_influence(model, f, mods, train_ids, query_ids) # [n_train, n_query], -grad L(z)^T H^-1 grad q

A module must run once per forward (the looped GPT's shared block runs once per step: refused).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from attribution.influence import EKFACFactors, Objective, lm_loss, sampled_label_loss


def linear_modules(model, patterns: Sequence[str] | None = None) -> dict[str, nn.Linear]:
    """{name: module} of the HF model's Linear modules matching any glob in `patterns` (fnmatch over
    `hf_model.named_modules()` names). None: every Linear inside the decoder layers (no unembedding)."""
    found = {n: m for n, m in model.hf_model.named_modules() if isinstance(m, nn.Linear)}
    if patterns is None:
        chosen = {n: m for n, m in found.items() if ".layers." in n or ".h." in n}
    else:
        chosen = {n: m for n, m in found.items() if any(fnmatch.fnmatch(n, p) for p in patterns)}
        unused = [p for p in patterns if not any(fnmatch.fnmatch(n, p) for n in found)]
        if unused:
            near = ", ".join(list(found)[:6])
            raise ValueError(f"module pattern(s) {unused} match no Linear of the model; its Linears: {near}, ...")
    if not chosen:
        raise ValueError("no Linear module chosen: name them with glob patterns, e.g. '*.mlp.*'")
    return chosen


def linear_gradients(
    model,
    modules: dict[str, nn.Linear],
    ids: Tensor,
    mask: Tensor | None = None,
    objective: Objective = lm_loss,
    return_factors: bool = False,
):
    """Per-example gradients {module: [batch, d_out, d_in (+1)]} of `objective` w.r.t. each module's weight
    (and bias, as the last column); with `return_factors`, also {module: (a [b, pos, d_in+], g [b, pos, d_out])}
    and the objective's values."""
    mask = torch.ones_like(ids) if mask is None else mask
    inputs: dict[str, Tensor] = {}
    outputs: dict[str, Tensor] = {}

    def keep(name: str):
        def hook(mod, args, out):
            if name in outputs:
                raise ValueError(f"module {name} ran twice in one forward: per-module EK-FAC needs one call")
            inputs[name] = args[0].detach()
            outputs[name] = out

        return hook

    handles = [m.register_forward_hook(keep(n)) for n, m in modules.items()]
    try:
        with torch.enable_grad():
            values = objective(model, ids, mask)
            names = [n for n in modules if n in outputs and outputs[n].requires_grad]
            grads = torch.autograd.grad(values.sum(), [outputs[n] for n in names], allow_unused=True)
    finally:
        for h in handles:
            h.remove()
    m = mask.to(torch.float32)[..., None]
    blocks, factors = {}, {}
    for name, g in zip(names, grads):
        a = inputs[name].float()
        if modules[name].bias is not None:
            a = torch.cat([a, torch.ones_like(a[..., :1])], -1)
        g = torch.zeros_like(outputs[name], dtype=torch.float32) if g is None else g.float()
        a, g = a * m, g * m
        factors[name] = (a, g)
        blocks[name] = torch.einsum("blo,bli->boi", g, a)
    return (blocks, factors, values.detach()) if return_factors else blocks


def fit_linear_ekfac(
    model,
    modules: dict[str, nn.Linear],
    ids: Tensor,
    mask: Tensor | None = None,
    batch_size: int = 8,
    seed: int = 0,
    damping_alpha: float = 0.1,
    label_samples: int = 1,
) -> EKFACFactors:
    """EK-FAC factors of every module on fitting data (labels sampled from the model, `seed` fixes them;
    `label_samples` draws per token average the sampled Fisher towards its expectation, the GGN)."""
    mask = torch.ones_like(ids) if mask is None else mask
    objective = sampled_label_loss(seed)
    sums_a: dict[str, Tensor] = {}
    sums_s: dict[str, Tensor] = {}
    n_tok = 0.0
    batches = [(ids[i : i + batch_size], mask[i : i + batch_size]) for i in range(0, len(ids), batch_size)]
    for b_ids, b_mask in batches * label_samples:
        _, factors, _ = linear_gradients(model, modules, b_ids, b_mask, objective, return_factors=True)
        n_tok += float(b_mask.sum())
        for k, (a, g) in factors.items():
            sums_a[k] = sums_a.get(k, 0) + torch.einsum("bli,blj->ij", a, a)
            sums_s[k] = sums_s.get(k, 0) + torch.einsum("bli,blj->ij", g, g)
    f = EKFACFactors(None, damping_alpha=damping_alpha, damping_scope="block")  # type: ignore[arg-type]
    for k in sums_a:
        for mat, store in ((sums_a[k], f.q_a), (sums_s[k], f.q_s)):
            mat = (mat + mat.T) / (2 * n_tok)
            mat = mat + 1e-6 * mat.trace() / mat.shape[0] * torch.eye(mat.shape[0], device=mat.device)
            store[k] = torch.linalg.eigh(mat.double())[1].float()
    objective = sampled_label_loss(seed)  # the same labels again for the eigenvalue correction
    lam_sum: dict[str, Tensor] = {}
    for b_ids, b_mask in batches * label_samples:
        for k, G in linear_gradients(model, modules, b_ids, b_mask, objective).items():
            lam_sum[k] = lam_sum.get(k, 0) + ((f.q_s[k].T @ G @ f.q_a[k]) ** 2).sum(0)
    f.lam = {k: v / (len(ids) * label_samples) for k, v in lam_sum.items()}
    return f


def linear_influence(
    model,
    factors: EKFACFactors,
    modules: dict[str, nn.Linear],
    train_ids: Tensor,
    query_ids: Tensor,
    batch_size: int = 16,
    objective: Objective = lm_loss,
) -> Tensor:
    """[n_train, n_query] influence `-grad L(z)^T H^-1 grad q(query)` summed over the modules (block diagonal);
    positive: up-weighting z raises the query's objective (for a loss: makes the query worse)."""
    ihvp: dict[str, list[Tensor]] = {}
    for i in range(0, len(query_ids), batch_size):
        for k, v in factors.inverse_hvp(linear_gradients(model, modules, query_ids[i : i + batch_size])).items():
            ihvp.setdefault(k, []).append(v)
    q = {k: torch.cat(v) for k, v in ihvp.items()}
    total = torch.zeros(len(train_ids), len(query_ids), dtype=torch.float64)
    for i in range(0, len(train_ids), batch_size):
        g = linear_gradients(model, modules, train_ids[i : i + batch_size], None, objective)
        total[i : i + batch_size] -= sum(torch.einsum("boi,qoi->bq", g[k], q[k]) for k in g).double()
    return total
