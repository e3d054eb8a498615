"""FPE: Fixed Parameter Expansion -- split neurons, keep the count of nonzero parameters.

Paper: Kong, Subramanian, Y. Shavit, Adler, Alistarh, N. Shavit, *Expand Neurons, Not Parameters*
(arXiv 2510.04500). Code not disclosed; this follows the paper's description.

A trained one-hidden-layer MLP x -> relu(W1 x + b1) -> W2 h + b2 is expanded: each hidden neuron j is
replaced by `alpha` children whose incoming edges partition j's nonzero inputs (disjointly), each child
copying j's bias and outgoing weights. That adds (alpha - 1) * m * d_out outgoing weights, so the smallest
magnitude weights (both layers, globally) are pruned back to the original nonzero count, and the network
is fine-tuned under the masks. The partition is either random (balanced) or clause/feature-aware: the
inputs of a neuron are clustered by their rows of the first-layer Gram matrix W1^T W1 (features used
together share a profile) into balanced groups.

Interference metrics on a first-layer weight matrix W1 [m, n_features]:
- `feature_capacity`: C_i = (W_i . W_i)^2 / sum_j (W_i . W_j)^2, W_i the column of feature i;
- `mean_neuron_cosine`: mean |cos| between distinct neurons' incoming weight vectors;
- `polysemanticity`: per neuron, how many ground-truth features (clauses) it responds to.

    >>> mlp = MaskedMLP.dense(n_in=32, n_hidden=8, n_out=1)   # train it, then
    >>> wide = expand_neurons(mlp, alpha=2, partition="clause")
    >>> assert wide.nonzero_count() == mlp.nonzero_count()
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp.contrib.common.fit import fit, make_optimizer, random_batches


class MaskedMLP(nn.Module):
    """One-hidden-layer ReLU MLP whose weights are multiplied by fixed 0/1 masks."""

    def __init__(
        self, W1: Tensor, b1: Tensor, W2: Tensor, b2: Tensor, M1: Tensor | None = None, M2: Tensor | None = None
    ):
        super().__init__()
        if (
            W1.ndim != 2
            or W2.ndim != 2
            or W2.shape[1] != W1.shape[0]
            or b1.shape != (W1.shape[0],)
            or b2.shape != (W2.shape[0],)
        ):
            raise ValueError(
                f"shapes must be W1 [m, n_in], b1 [m], W2 [n_out, m], b2 [n_out]; got "
                f"{tuple(W1.shape)}, {tuple(b1.shape)}, {tuple(W2.shape)}, {tuple(b2.shape)}"
            )
        self.W1, self.b1 = nn.Parameter(W1.clone().float()), nn.Parameter(b1.clone().float())
        self.W2, self.b2 = nn.Parameter(W2.clone().float()), nn.Parameter(b2.clone().float())
        self.register_buffer("M1", torch.ones_like(self.W1) if M1 is None else M1.clone().float())
        self.register_buffer("M2", torch.ones_like(self.W2) if M2 is None else M2.clone().float())

    @classmethod
    def dense(cls, n_in: int, n_hidden: int, n_out: int = 1, seed: int = 0) -> MaskedMLP:
        g = torch.Generator().manual_seed(seed)
        return cls(
            torch.randn(n_hidden, n_in, generator=g) / math.sqrt(n_in),
            torch.zeros(n_hidden),
            torch.randn(n_out, n_hidden, generator=g) / math.sqrt(n_hidden),
            torch.zeros(n_out),
        )

    def hidden(self, x: Tensor) -> Tensor:
        return F.relu(x @ (self.W1 * self.M1).T + self.b1)

    def forward(self, x: Tensor) -> Tensor:
        return self.hidden(x) @ (self.W2 * self.M2).T + self.b2

    def nonzero_count(self) -> int:
        """Nonzero weights (masked-in and not exactly zero) of both layers; biases are not counted."""
        return int(((self.W1 * self.M1) != 0).sum() + ((self.W2 * self.M2) != 0).sum())

    def effective_W1(self) -> Tensor:
        return (self.W1 * self.M1).detach()


def _balanced_split(items: Tensor, alpha: int, generator: torch.Generator) -> list[Tensor]:
    perm = items[torch.randperm(len(items), generator=generator)]
    return [perm[c::alpha] for c in range(alpha)]


def _balanced_clusters(profile: Tensor, alpha: int, generator: torch.Generator, iters: int = 20) -> list[Tensor]:
    """k-means on the rows of `profile` followed by a capacity-limited greedy assignment (balanced groups)."""
    n = profile.shape[0]
    cap = math.ceil(n / alpha)
    centres = profile[torch.randperm(n, generator=generator)[:alpha]].clone()
    assign = torch.zeros(n, dtype=torch.long)
    for _ in range(iters):
        d = torch.cdist(profile, centres)
        order = torch.argsort(d.reshape(-1))
        assign = torch.full((n,), -1, dtype=torch.long)
        load = [0] * alpha
        for flat in order.tolist():
            i, c = divmod(flat, alpha)
            if assign[i] < 0 and load[c] < cap:
                assign[i] = c
                load[c] += 1
        new = torch.stack([profile[assign == c].mean(0) for c in range(alpha)])
        if torch.allclose(new, centres):
            break
        centres = new
    return [torch.nonzero(assign == c).ravel() for c in range(alpha)]


def expand_neurons(mlp: MaskedMLP, alpha: int = 2, partition: str = "random", seed: int = 0) -> MaskedMLP:
    """Split each hidden neuron into `alpha` children, then prune back to the original nonzero count."""
    if partition not in ("random", "clause"):
        raise ValueError(f"partition must be 'random' or 'clause'; got {partition!r}")
    if alpha < 2:
        raise ValueError(f"alpha must be >= 2 (alpha=1 is the original network); got {alpha}")
    g = torch.Generator().manual_seed(seed)
    W1, M1 = mlp.W1.detach(), mlp.M1
    W2, M2 = mlp.W2.detach(), mlp.M2
    m, n_in = W1.shape
    budget = mlp.nonzero_count()
    eff = W1 * M1
    gram = eff.T @ eff  # [n_in, n_in]: features used by the same neurons get similar rows
    profile = F.normalize(gram.abs(), dim=1)
    rows1, masks1, rows2, masks2, biases = [], [], [], [], []
    for j in range(m):
        inputs = torch.nonzero(M1[j] * (W1[j] != 0)).ravel()
        if len(inputs) < alpha:
            raise ValueError(f"neuron {j} has {len(inputs)} nonzero inputs; cannot split it into {alpha} children")
        groups = (
            _balanced_split(inputs, alpha, g)
            if partition == "random"
            else [inputs[gr] for gr in _balanced_clusters(profile[inputs], alpha, g)]
        )
        for grp in groups:
            mask = torch.zeros(n_in)
            mask[grp] = 1.0
            rows1.append(W1[j] * mask)
            masks1.append(mask)
            rows2.append(W2[:, j])
            masks2.append(M2[:, j])
            biases.append(mlp.b1.detach()[j])
    W1n, M1n = torch.stack(rows1), torch.stack(masks1)
    W2n, M2n = torch.stack(rows2, 1), torch.stack(masks2, 1)
    # prune the smallest-magnitude live weights (both layers together) back to the budget
    live = torch.cat([(W1n * M1n).abs().reshape(-1), (W2n * M2n).abs().reshape(-1)])
    alive = torch.cat([M1n.reshape(-1), M2n.reshape(-1)]).bool() & (live > 0)
    excess = int(alive.sum()) - budget
    if excess > 0:
        scores = torch.where(alive, live, torch.full_like(live, float("inf")))
        drop = torch.topk(scores, excess, largest=False).indices
        keep = torch.ones_like(live)
        keep[drop] = 0.0
        M1n = M1n * keep[: M1n.numel()].reshape(M1n.shape)
        M2n = M2n * keep[M1n.numel() :].reshape(M2n.shape)
    return MaskedMLP(W1n * M1n, torch.stack(biases), W2n * M2n, mlp.b2.detach(), M1n, M2n)


# ---------------------------------------------------------------- metrics


def feature_capacity(W1: Tensor) -> Tensor:
    """C_i = (W_i . W_i)^2 / sum_j (W_i . W_j)^2 for each feature (column) i of W1 [m, n_features]."""
    if W1.ndim != 2:
        raise ValueError(f"W1 must be [n_neurons, n_features]; got {tuple(W1.shape)}")
    gram = W1.double().T @ W1.double()
    den = gram.pow(2).sum(1)
    return torch.where(den > 0, gram.diagonal().pow(2) / den.clamp_min(1e-300), torch.zeros_like(den))


def mean_neuron_cosine(W1: Tensor) -> float:
    """Mean |cos| between the incoming weight vectors of distinct (nonzero) neurons."""
    w = W1.double()
    w = w[w.norm(dim=1) > 0]
    if len(w) < 2:
        raise ValueError("need at least 2 nonzero neurons")
    c = F.normalize(w, dim=1) @ F.normalize(w, dim=1).T
    off = ~torch.eye(len(w), dtype=torch.bool)
    return float(c[off].abs().mean())


def polysemanticity(acts: Tensor, features: Tensor, threshold: float = 0.5) -> Tensor:
    """For each neuron, the number of features it responds to.

    acts [N, m] hidden activations, features [N, F] 0/1 ground-truth indicators (e.g. clause satisfied).
    Response of neuron j to feature f = mean act when f is on - mean act when f is off; a neuron counts
    feature f when the response is >= threshold * its largest response (and positive). Dead neurons get 0.
    """
    if acts.ndim != 2 or features.ndim != 2 or acts.shape[0] != features.shape[0]:
        raise ValueError(
            f"acts [N, m] and features [N, F] must share N; got {tuple(acts.shape)} and {tuple(features.shape)}"
        )
    on = features.double()
    n_on = on.sum(0)
    if ((n_on == 0) | (n_on == len(on))).any():
        raise ValueError("every feature must be both on and off somewhere in the sample")
    a = acts.double()
    resp = (on.T @ a) / n_on[:, None] - ((1 - on).T @ a) / (len(on) - n_on)[:, None]  # [F, m]
    top = resp.max(0).values
    counts = ((resp >= threshold * top) & (resp > 1e-9)).sum(0)
    return torch.where(top > 1e-9, counts, torch.zeros_like(counts))


# ---------------------------------------------------------------- Boolean DNF task


@dataclass
class DNFTask:
    x: Tensor  # [N, n_bits] in {-1, +1}
    y: Tensor  # [N] in {0, 1}
    clauses: Tensor  # [N, n_clauses] 0/1: clause satisfied
    literals: list[list[tuple[int, int]]]  # per clause: (bit, sign)


def make_dnf(
    n_bits: int = 32, n_clauses: int = 8, literals: tuple[int, int] = (3, 4), n_samples: int = 20000, seed: int = 0
) -> DNFTask:
    """Random DNF: each clause is an AND of 3-4 literals on distinct random bits; label = OR of the clauses."""
    if n_bits < literals[1] or n_clauses < 1 or n_samples < 2:
        raise ValueError("need n_bits >= the clause width, n_clauses >= 1, n_samples >= 2")
    g = torch.Generator().manual_seed(seed)
    bits = torch.randint(0, 2, (n_samples, n_bits), generator=g)
    lits, sat = [], []
    for _ in range(n_clauses):
        width = int(torch.randint(literals[0], literals[1] + 1, (1,), generator=g))
        idx = torch.randperm(n_bits, generator=g)[:width]
        sign = torch.randint(0, 2, (width,), generator=g)
        lits.append(list(zip(idx.tolist(), sign.tolist())))
        sat.append((bits[:, idx] == sign).all(1))
    clauses = torch.stack(sat, 1).float()
    return DNFTask(bits.float() * 2 - 1, clauses.max(1).values, clauses, lits)


def train_mlp(
    mlp: MaskedMLP, x: Tensor, y: Tensor, steps: int = 3000, lr: float = 1e-2, batch: int = 512, seed: int = 0
) -> MaskedMLP:
    """Adam on binary cross-entropy; masked-out weights stay zero (the mask multiplies them in forward)."""
    fit(
        make_optimizer(mlp.parameters(), lr=lr),
        lambda idx: F.binary_cross_entropy_with_logits(mlp(x[idx]).squeeze(-1), y[idx]),
        random_batches(len(x), batch, steps, seed),
    )
    with torch.no_grad():
        mlp.W1.mul_(mlp.M1)
        mlp.W2.mul_(mlp.M2)
    return mlp


@torch.no_grad()
def accuracy(mlp: MaskedMLP, x: Tensor, y: Tensor) -> float:
    return float(((mlp(x).squeeze(-1) > 0).float() == y).float().mean())
