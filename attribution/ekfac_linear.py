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

Any `torch.nn.Module` works through a task object with Kronfluence's two methods (so a Kronfluence `Task` works
as it is): `compute_train_loss(batch, model, sample=False)` (summed over the batch; `sample=True` draws labels
from the model, for the Fisher) and `compute_measurement(batch, model)`, optionally `get_attention_mask(batch)`:

    ek = EKFAC(mlp, task).fit(fit_batches)                          # every Linear of `mlp` unless modules=[...]
    scores = ek.scores(train_batches, query_batches)                # [n_train, n_query], Kronfluence's sign:
                                                                    # positive = training row lowers the measurement
A module must run once per forward (the looped GPT's shared block runs once per step: refused), and its input's
first axis must be the batch (an MLP's [batch, d] input is one token per example).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence

import torch
from torch import Tensor, nn

from attribution.influence import EKFACFactors, Objective, lm_loss, sampled_label_loss


def linear_modules(model, patterns: Sequence[str] | None = None) -> dict[str, nn.Linear]:
    """{name: module} of the Linear modules matching any glob in `patterns` (fnmatch over `named_modules()` names
    of `model.hf_model` for an interp model, else of `model`). None: for an interp model every Linear inside the
    decoder layers (no unembedding, Kronfluence's set in the LDS table); for any other module every Linear."""
    root = getattr(model, "hf_model", model)
    found = {n: m for n, m in root.named_modules() if isinstance(m, nn.Linear)}
    if patterns is None:
        layered = root is not model
        chosen = {n: m for n, m in found.items() if not layered or ".layers." in n or ".h." in n}
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
    """Per-example gradients {module: [batch, d_out, d_in (+1)]} of `objective` (an interp model's per-sequence
    values) w.r.t. each module's weight (and bias, as the last column); with `return_factors`, also
    {module: (a [b, pos, d_in+], g [b, pos, d_out])} and the objective's values."""
    mask = torch.ones_like(ids) if mask is None else mask
    values: list[Tensor] = []

    def run() -> Tensor:
        values.append(objective(model, ids, mask))
        return values[-1].sum()

    blocks, factors = per_example_gradients(modules, run, mask)
    return (blocks, factors, values[0].detach()) if return_factors else blocks


def per_example_gradients(
    modules: dict[str, nn.Linear], run: Callable[[], Tensor], mask: Tensor | None = None
) -> tuple[dict[str, Tensor], dict[str, tuple[Tensor, Tensor]]]:
    """({module: G [batch, d_out, d_in (+1)]}, {module: (a, g)}) for the scalar `run()` returns (a sum over the
    batch's examples). Each example's G is the sum over its tokens of g a^T, g = d run / d output; `mask`
    [batch, pos] zeroes padding. An input [batch, d] (no token axis) is one token per example."""
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
            total = run()
            names = [n for n in modules if n in outputs and outputs[n].requires_grad]
            grads = torch.autograd.grad(total, [outputs[n] for n in names], allow_unused=True)
    finally:
        for h in handles:
            h.remove()
    blocks, factors = {}, {}
    for name, g in zip(names, grads):
        a = inputs[name].float()
        if modules[name].bias is not None:
            a = torch.cat([a, torch.ones_like(a[..., :1])], -1)
        g = torch.zeros_like(outputs[name], dtype=torch.float32) if g is None else g.float()
        if a.dim() == 2:  # [batch, d]: one token per example
            a, g = a[:, None], g[:, None]
        if mask is not None:
            m = mask.to(torch.float32).reshape(a.shape[0], -1)[..., None]
            a, g = a * m, g * m
        factors[name] = (a, g)
        blocks[name] = torch.einsum("blo,bli->boi", g, a)
    return blocks, factors


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
    """EK-FAC factors of every module of an interp model on fitting sequences (labels sampled from the model,
    `seed` fixes them; `label_samples` draws per token average the sampled Fisher towards the GGN)."""
    mask = torch.ones_like(ids) if mask is None else mask
    batches = [(ids[i : i + batch_size], mask[i : i + batch_size]) for i in range(0, len(ids), batch_size)]

    def grads(objective: Objective) -> Callable:
        return lambda b: linear_gradients(model, modules, b[0], b[1], objective, return_factors=True)[:2]

    return fit_factors(batches * label_samples, grads(sampled_label_loss(seed)), grads(sampled_label_loss(seed)),
                       damping_alpha)  # fmt: skip


def fit_factors(
    batches: Sequence,
    covariance_pass: Callable[[object], tuple[dict, dict]],
    eigen_pass: Callable[[object], tuple[dict, dict]],
    damping_alpha: float = 0.1,
) -> EKFACFactors:
    """EK-FAC from two passes over `batches`, each pass giving ({module: G [batch, d_out, d_in]}, {module: (a, g)})
    per batch: token covariances A, S and their eigenbases from the first, the eigenvalue correction from the
    second's per-example gradients (both with sampled labels)."""
    sums_a: dict[str, Tensor] = {}
    sums_s: dict[str, Tensor] = {}
    n_tok = 0.0
    for batch in batches:
        _, factors = covariance_pass(batch)
        for k, (a, g) in factors.items():
            sums_a[k] = sums_a.get(k, 0) + torch.einsum("bli,blj->ij", a, a)
            sums_s[k] = sums_s.get(k, 0) + torch.einsum("bli,blj->ij", g, g)
        n_tok += float((next(iter(factors.values()))[0].abs().sum(-1) > 0).sum())  # unmasked tokens
    f = EKFACFactors(None, damping_alpha=damping_alpha, damping_scope="block")  # type: ignore[arg-type]
    for k in sums_a:
        for mat, store in ((sums_a[k], f.q_a), (sums_s[k], f.q_s)):
            mat = (mat + mat.T) / (2 * n_tok)
            mat = mat + 1e-6 * mat.trace() / mat.shape[0] * torch.eye(mat.shape[0], device=mat.device)
            store[k] = torch.linalg.eigh(mat.double())[1].float()
    lam_sum: dict[str, Tensor] = {}
    n_examples = 0
    for batch in batches:
        blocks, _ = eigen_pass(batch)
        for k, G in blocks.items():
            lam_sum[k] = lam_sum.get(k, 0) + ((f.q_s[k].T @ G @ f.q_a[k]) ** 2).sum(0)
        n_examples += len(next(iter(blocks.values())))
    f.lam = {k: v / n_examples for k, v in lam_sum.items()}
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


class EKFAC:
    """EK-FAC influence for any `torch.nn.Module` and a task with Kronfluence's method names (see the module doc).

    `modules`: globs over the model's module names (None: every Linear). `fit(batches)` fits the factors with
    labels sampled by `task.compute_train_loss(batch, model, sample=True)` (the global torch generator seeded
    with `seed` first); `scores(train_batches, query_batches)` gives [n_train, n_query] with Kronfluence's sign,
    `grad L(z)^T H^-1 grad m(q)`: positive when up-weighting z lowers the query's measurement.
    """

    def __init__(self, model: nn.Module, task, modules: Sequence[str] | None = None, damping_alpha: float = 0.1):
        for name in ("compute_train_loss", "compute_measurement"):
            if not callable(getattr(task, name, None)):
                raise TypeError(f"the task has no {name}(batch, model, ...): give it Kronfluence's Task methods")
        self.model, self.task, self.damping_alpha = model, task, damping_alpha
        self.modules = linear_modules(model, modules)
        self.factors: EKFACFactors | None = None

    def _grads(self, batch, kind: str) -> tuple[dict, dict]:
        mask = self.task.get_attention_mask(batch) if hasattr(self.task, "get_attention_mask") else None

        def run() -> Tensor:
            if kind == "measurement":
                return self.task.compute_measurement(batch, self.model)
            return self.task.compute_train_loss(batch, self.model, sample=kind == "sampled")

        return per_example_gradients(self.modules, run, mask)

    def fit(self, batches: Iterable, label_samples: int = 1, seed: int = 0) -> EKFAC:
        batches = list(batches) * label_samples
        torch.manual_seed(seed)
        sampled = lambda b: self._grads(b, "sampled")  # noqa: E731
        self.factors = fit_factors(batches, sampled, sampled, self.damping_alpha)
        return self

    def scores(self, train_batches: Iterable, query_batches: Iterable) -> Tensor:
        if self.factors is None:
            raise RuntimeError("fit(batches) first: the factors are not fitted")
        q: dict[str, list[Tensor]] = {}
        for batch in query_batches:
            for k, v in self.factors.inverse_hvp(self._grads(batch, "measurement")[0]).items():
                q.setdefault(k, []).append(v)
        ihvp = {k: torch.cat(v) for k, v in q.items()}
        rows = []
        for batch in train_batches:
            g = self._grads(batch, "train")[0]
            rows.append(sum(torch.einsum("boi,qoi->bq", g[k], ihvp[k]) for k in g).double())
        return torch.cat(rows)
