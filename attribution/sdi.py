"""Step-Decomposed Influence (SDI) for looped transformers (Kaissis et al. 2026, arXiv 2602.10097).

A looped model applies one block tau times. The gradient of the shared weights is the sum of the
gradients through each use (Proposition 1): grad_body loss = sum_t phi_t. SDI splits TracIn along the
query's loop steps, exactly as the official code's `compute_query_sdi` does:

    SDI_t(z, z')  = sum_k eta_k < sum_s phi_s(w_k; z), phi_t(w_k; z') >      t = 1..tau
    sum_t SDI_t   = TracIn restricted to the shared block (conservation, exact)
    M[s, t]       = sum_k eta_k < phi_s(w_k; z), phi_t(w_k; z') >            (the step-by-step matrix)

phi_t comes from per-step hooks (`attribution.capture`): exactly (flattened outer products) or as a
TensorSketch with hashes shared across steps and checkpoints, so sketched SDI also sums exactly to
sketched TracIn. `untied_step_gradients` is an independent exact reference without hooks: each loop step
gets its own copy of the block's parameters, and phi_t is plain autograd w.r.t. copy t.

>>> res = step_decomposed_influence(model, checkpoints, train_ids, query_ids, sketch_dim=2048)
>>> res.sdi.shape, res.tracin.shape        # [n_train, n_query, tau], [n_train, n_query]
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attribution.capture import GradientFeaturizer, per_example_lm_loss
from attribution.tracin import Checkpoint, features


@dataclass
class SDIResult:
    sdi: Tensor
    """[n_train, n_query, tau]: influence of each training example through each loop step of the query."""
    tracin: Tensor
    """[n_train, n_query]: TracIn on the same parameters (= sdi.sum(-1))."""
    matrix: Tensor | None = None
    """[n_train, n_query, tau, tau]: train step s x query step t, when asked for."""


def looped_featurizer(model: nn.Module, sketch_dim: int | None = 2048, seed: int = 0) -> GradientFeaturizer:
    """Featurizer over a looped GPT's shared block (all its Linear and LayerNorm parameters)."""
    if not hasattr(model, "step_modules"):
        raise ValueError(f"{type(model).__name__} is not a looped model (no step_modules()); SDI needs one")
    return GradientFeaturizer(model.step_modules(), sketch_dim=sketch_dim, seed=seed)


def sdi_from_features(ftr: Tensor, fq: Tensor, lr: float, step_matrix: bool = False) -> SDIResult:
    """One checkpoint's contribution from per-step features [n, tau, dim] of train and query examples."""
    sdi = lr * torch.einsum("id,jtd->ijt", ftr.sum(1), fq)
    mat = lr * torch.einsum("isd,jtd->ijst", ftr, fq) if step_matrix else None
    return SDIResult(sdi, sdi.sum(-1), mat)


def step_decomposed_influence(
    model: nn.Module,
    checkpoints: Sequence[Checkpoint],
    train: Tensor,
    queries: Tensor,
    sketch_dim: int | None = 2048,
    seed: int = 0,
    batch_size: int = 16,
    step_matrix: bool = False,
    featurizer: GradientFeaturizer | None = None,
) -> SDIResult:
    """SDI over checkpoints (each loaded into a new model; `model` is not modified). `sketch_dim=None` gives the exact
    result."""
    feat = featurizer or looped_featurizer(model, sketch_dim, seed)
    was_training = model.training
    model.eval()
    total: SDIResult | None = None
    try:
        for ck in checkpoints:
            work = ck.load(model)  # a new model: `model` (often memoised) is never written to
            f = feat.rebind(model, work)
            part = sdi_from_features(
                features(work, f, train, None, batch_size),
                features(work, f, queries, None, batch_size),
                ck.lr,
                step_matrix,
            )
            if total is None:
                total = part
            else:
                total.sdi += part.sdi
                total.tracin += part.tracin
                if step_matrix:
                    total.matrix += part.matrix
    finally:
        model.train(was_training)
    return total


# ------------------------------------------------------------------------------------- exact reference
def untied_step_gradients(model: nn.Module, ids: Tensor, mask: Tensor | None = None) -> Tensor:
    """phi_t for every example by untying the weights: [batch, tau, n_body_params] (no hooks involved).

    Each step's proxies are pointed at a private deep copy of the shared module for the duration of the
    call, and phi_t is the gradient w.r.t. copy t of each example's mean-token loss (one example at a time).
    Parameter order matches `looped_featurizer(model, None)`: per module, weight then bias.
    """
    mask = torch.ones_like(ids) if mask is None else mask
    groups = model.step_modules()
    tau = len(next(iter(groups.values())))
    saved = {name: [p.target for p in proxies] for name, proxies in groups.items()}
    copies = {name: [copy.deepcopy(proxies[0].target) for _ in range(tau)] for name, proxies in groups.items()}
    try:
        for name, proxies in groups.items():
            for t, proxy in enumerate(proxies):
                object.__setattr__(proxy, "target", copies[name][t])
        rows = []
        for b in range(ids.shape[0]):
            loss = per_example_lm_loss(model, ids[b : b + 1], mask[b : b + 1]).sum()
            steps = []
            for t in range(tau):
                params = [p for name in groups for p in _weight_bias(copies[name][t])]
                steps.append(params)
            flat = [p for ps in steps for p in ps]
            grads = torch.autograd.grad(loss, flat, allow_unused=True)
            grads = [torch.zeros_like(p) if g is None else g for p, g in zip(flat, grads)]
            per = len(steps[0])
            rows.append(
                torch.stack([torch.cat([g.flatten() for g in grads[t * per : (t + 1) * per]]) for t in range(tau)])
            )
        return torch.stack(rows)
    finally:
        for name, proxies in groups.items():
            for proxy, target in zip(proxies, saved[name]):
                object.__setattr__(proxy, "target", target)


def _weight_bias(module: nn.Module) -> list[nn.Parameter]:
    return [module.weight] + ([module.bias] if getattr(module, "bias", None) is not None else [])
