"""GFD-EMVC: detect label noise from per-sample gradient outliers, relabel by feature prototypes, then run
the evolutionary multi-view search on the purified data.

Paper: label-noise "detect-then-calibrate" for evolutionary multi-view classification (ICML 2026; title
not found; code URL in its abstract, github.com/LiShuailzn/ICML-2026-GFD-EMVC, not verified). Label
noise biases the fitness an evolutionary search sees (fitness evaluation bias, FEB); annotators err
near *their* decision boundary, which is not the model's, so a sample's loss alone is a weak signal.

- **Detect**: per-sample last-layer gradient embeddings g_i = (p_i - y_i) ⊗ z_i (the exact gradient of
  the cross-entropy w.r.t. the last linear layer's weight, z_i its input) for every view; within each
  labelled class, a shrunk Mahalanobis distance on the top principal directions of the embeddings is
  the outlier score; views' standardised scores are averaged; the top fraction is flagged.
- **Calibrate**: class prototypes from the unflagged samples' (concatenated, normalised) features;
  each flagged sample takes its nearest prototype's label, or is dropped when the nearest two are
  within `margin` (cosine).
- **Search**: `evolve_fusion`, a (μ + λ) evolution of the views' fusion weights with fitness = accuracy
  of the fused logits on a labelled validation split.

Baseline: small-loss selection (flag the largest per-sample losses). The gradient embedding here is the
closed form, checked against autograd in the tests; the attribution family's hook-based per-example
gradients serve LM modules and live in a package `interp` may not import.

    g = last_layer_gradients(logits, y_noisy, z)              # [n, K * d]
    score = gradient_outlier_scores(g, y_noisy)               # higher = more likely mislabelled
    new_y, keep = prototype_relabel(feats, y_noisy, flag_top(score, 0.3))
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor


def last_layer_gradients(logits: Tensor, labels: Tensor, feats: Tensor) -> Tensor:
    """Per-sample ∂CE/∂W of a last linear layer logits = W z + b: (softmax(logits) - onehot(y)) ⊗ z,
    flattened to [n, K * d]."""
    if logits.ndim != 2 or feats.ndim != 2 or len(logits) != len(feats) or labels.shape != (len(logits),):
        raise ValueError(
            f"need logits [n, K], feats [n, d], labels [n]; got {tuple(logits.shape)}, "
            f"{tuple(feats.shape)}, {tuple(labels.shape)}"
        )
    err = F.softmax(logits.double(), -1) - F.one_hot(labels, logits.shape[1]).double()
    return torch.einsum("nk,nd->nkd", err, feats.double()).flatten(1)


def gradient_outlier_scores(grads: Tensor, labels: Tensor, rank: int = 10, shrink: float = 0.1) -> Tensor:
    """Within each labelled class: squared Mahalanobis distance (covariance shrunk towards its mean
    eigenvalue by `shrink`) of the gradient embedding, on the class's top-`rank` principal directions."""
    if grads.ndim != 2 or labels.shape != (len(grads),):
        raise ValueError(f"need grads [n, D] and labels [n]; got {tuple(grads.shape)}, {tuple(labels.shape)}")
    if rank < 1 or not 0 <= shrink <= 1:
        raise ValueError(f"need rank >= 1 and 0 <= shrink <= 1; got {rank}, {shrink}")
    out = torch.zeros(len(grads), dtype=torch.float64)
    for c in torch.unique(labels):
        m = labels == c
        g = grads[m].double()
        if len(g) < 3:
            continue
        c0 = g - g.mean(0)
        _, s, vh = torch.linalg.svd(c0, full_matrices=False)
        r = min(rank, len(s))
        var = s[:r].pow(2) / (len(g) - 1)
        var = (1 - shrink) * var + shrink * var.mean()
        out[m] = ((c0 @ vh[:r].T).pow(2) / var.clamp_min(1e-12)).sum(1)
    return out


def small_loss_scores(logits: Tensor, labels: Tensor) -> Tensor:
    """Per-sample cross-entropy (the small-loss baseline: large loss = likely mislabelled)."""
    return F.cross_entropy(logits.double(), labels, reduction="none")


def standardise(scores: Tensor) -> Tensor:
    return (scores - scores.mean()) / scores.std().clamp_min(1e-12)


def flag_top(scores: Tensor, frac: float) -> Tensor:
    """Boolean mask of the round(frac n) highest scores."""
    if not 0 <= frac <= 1:
        raise ValueError(f"frac={frac} must lie in [0, 1]")
    mask = torch.zeros(len(scores), dtype=torch.bool)
    mask[scores.argsort(descending=True)[: round(frac * len(scores))]] = True
    return mask


def prototype_relabel(feats: Tensor, labels: Tensor, flagged: Tensor, margin: float = 0.0) -> tuple[Tensor, Tensor]:
    """(new labels, keep mask): flagged samples take the label of the nearest clean class prototype
    (cosine on normalised features); dropped when the two nearest prototypes are closer than `margin`."""
    if flagged.shape != labels.shape or len(feats) != len(labels):
        raise ValueError("feats, labels and flagged must have one row per sample")
    z = F.normalize(feats.double(), dim=1)
    classes = torch.unique(labels)
    clean = ~flagged
    if any(int((clean & (labels == c)).sum()) == 0 for c in classes):
        raise ValueError("every class needs at least one unflagged sample to build its prototype")
    protos = F.normalize(torch.stack([z[clean & (labels == c)].mean(0) for c in classes]), dim=1)
    sim = z @ protos.T
    top2 = sim.topk(min(2, len(classes)), dim=1)
    new = labels.clone()
    new[flagged] = classes[top2.indices[flagged, 0]]
    keep = torch.ones_like(labels, dtype=torch.bool)
    if len(classes) > 1:
        keep[flagged] = (top2.values[flagged, 0] - top2.values[flagged, 1]) >= margin
    return new, keep


def detection_f1(flagged: Tensor, noisy: Tensor) -> float:
    """F1 of the flagged set against the truly mislabelled set."""
    tp = float((flagged & noisy).sum())
    if tp == 0:
        return 0.0
    prec, rec = tp / float(flagged.sum()), tp / float(noisy.sum())
    return 2 * prec * rec / (prec + rec)


def fused_accuracy(weights: Tensor, view_logits: Sequence[Tensor], labels: Tensor) -> float:
    fused = sum(w * F.log_softmax(lg, -1) for w, lg in zip(weights, view_logits))
    return float((fused.argmax(-1) == labels).float().mean())


def evolve_fusion(
    view_logits: Sequence[Tensor], labels: Tensor, pop: int = 20, gens: int = 10, sigma: float = 0.3, seed: int = 0
) -> tuple[Tensor, list[tuple[Tensor, float]]]:
    """(best non-negative fusion weights [V], every evaluated (weights, fitness)): a (μ + λ) evolution,
    fitness = accuracy of Σ_v w_v log softmax(logits_v) against `labels`."""
    if pop < 2 or gens < 1 or not view_logits:
        raise ValueError(f"need pop >= 2, gens >= 1 and at least one view; got {pop}, {gens}, {len(view_logits)}")
    g = torch.Generator().manual_seed(seed)
    v = len(view_logits)
    popu = torch.rand(pop, v, generator=g, dtype=torch.float64)
    history: list[tuple[Tensor, float]] = []
    fit = torch.tensor([fused_accuracy(w, view_logits, labels) for w in popu])
    history += list(zip(popu, fit.tolist()))
    for _ in range(gens):
        parents = popu[torch.randint(pop, (pop,), generator=g)]
        kids = (parents + sigma * torch.randn(pop, v, generator=g, dtype=torch.float64)).clamp_min(0)
        kfit = torch.tensor([fused_accuracy(w, view_logits, labels) for w in kids])
        history += list(zip(kids, kfit.tolist()))
        allp, allf = torch.cat([popu, kids]), torch.cat([fit, kfit])
        best = allf.argsort(descending=True)[:pop]
        popu, fit = allp[best], allf[best]
    return popu[0], history
