"""BRep (Brain Representation learning; demo code Kevin-916/BRep-demo): replace the hand-crafted Pearson
"functional connectivity" between regions by a *learnable* correlation function, trained end to end with
the predictor.

Pearson's r_ij = (1/T) Σ_t z_{i,t} z_{j,t} (z standardised) is a V-statistic of order 2 with the fixed
kernel z_i z_j. BRep learns the kernel: c_ij^k = (1/T) Σ_t φ_θ(z_{i,t}, z_{j,t})_k, with φ_θ a small shared
MLP R² -> R^K (a parametric, nonlinear, high-order correlation; MLPs approximate any continuous kernel,
hence any V-statistic of that order). The connectivity tensor [K, R, R] feeds an MLP classifier.

    model = BRep(n_regions=30, n_kernels=4)
    logits = model(x)              # x [batch, T, R] time series (ROIs, or tokens x neurons)
    C = model.connectivity(x)      # [batch, K, R, R] learned connectivity, for inspection

`pearson_connectivity` is the baseline representation (Pearson + the same MLP head: `PearsonMLP`).
Our reconstruction differs from the demo code in the readout: a plain MLP instead of the orthogonal
clustering (DEC) pooling.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from interp.contrib.common.fit import epoch_batches, fit, make_optimizer


def _standardise(x: Tensor) -> Tensor:
    if x.ndim != 3 or x.shape[1] < 2 or x.shape[2] < 2:
        raise ValueError(f"x must be [batch, T >= 2, regions >= 2]; got {tuple(x.shape)}")
    return (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True).clamp_min(1e-8)


def pearson_connectivity(x: Tensor) -> Tensor:
    """[batch, T, R] -> [batch, R, R] Pearson correlation matrices (1/T normalisation of standardised z,
    with z using the unbiased std: equal to np.corrcoef up to the factor (T-1)/T)."""
    z = _standardise(x)
    return z.transpose(1, 2) @ z / x.shape[1]


def _triu(C: Tensor) -> Tensor:
    R = C.shape[-1]
    i, j = torch.triu_indices(R, R, 1)
    return C[..., i, j]


class PearsonMLP(nn.Module):
    """Baseline: upper triangle of the Pearson matrix -> MLP."""

    def __init__(self, n_regions: int, n_classes: int = 2, hidden: int = 64):
        super().__init__()
        if n_regions < 2 or n_classes < 2:
            raise ValueError(f"need n_regions >= 2 and n_classes >= 2; got {n_regions}, {n_classes}")
        self.head = nn.Sequential(
            nn.Linear(n_regions * (n_regions - 1) // 2, hidden), nn.ReLU(), nn.Linear(hidden, n_classes)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.head(_triu(pearson_connectivity(x)).float())


class BRep(nn.Module):
    """Learnable order-2 correlation kernels φ_θ shared across region pairs, then an MLP head."""

    def __init__(
        self, n_regions: int, n_classes: int = 2, n_kernels: int = 4, kernel_hidden: int = 16, hidden: int = 64
    ):
        super().__init__()
        if n_regions < 2 or n_classes < 2 or n_kernels < 1 or kernel_hidden < 1:
            raise ValueError("need n_regions >= 2, n_classes >= 2, n_kernels >= 1 and kernel_hidden >= 1")
        self.n_regions, self.n_kernels = n_regions, n_kernels
        self.phi = nn.Sequential(nn.Linear(2, kernel_hidden), nn.Tanh(), nn.Linear(kernel_hidden, n_kernels))
        P = n_regions * (n_regions - 1) // 2
        self.norm = nn.LayerNorm(P * n_kernels)
        self.head = nn.Sequential(nn.Linear(P * n_kernels, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))

    def pair_features(self, x: Tensor) -> Tensor:
        """[batch, K, P] learned correlations of the P = R(R-1)/2 region pairs."""
        z = _standardise(x).float()
        if z.shape[2] != self.n_regions:
            raise ValueError(f"x has {z.shape[2]} regions; the model was built for {self.n_regions}")
        i, j = torch.triu_indices(self.n_regions, self.n_regions, 1)
        pairs = torch.stack([z[:, :, i], z[:, :, j]], -1)  # [B, T, P, 2]
        return self.phi(pairs).mean(1).transpose(1, 2)  # [B, K, P]

    def connectivity(self, x: Tensor) -> Tensor:
        """[batch, K, R, R] symmetric learned connectivity (zero diagonal)."""
        f = self.pair_features(x)
        C = torch.zeros(f.shape[0], self.n_kernels, self.n_regions, self.n_regions)
        i, j = torch.triu_indices(self.n_regions, self.n_regions, 1)
        C[..., i, j] = f
        return C + C.transpose(-1, -2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.norm(self.pair_features(x).flatten(1)))


def train_classifier(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    epochs: int = 30,
    batch: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    weight_decay: float = 1e-4,
) -> list[float]:
    """Adam on cross-entropy; returns the per-epoch mean loss."""
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"x and y must have the same non-zero length; got {len(x)}, {len(y)}")
    if epochs <= 0 or batch <= 0:
        raise ValueError("epochs and batch must be positive")
    opt = make_optimizer(model.parameters(), lr=lr, name="adamw", weight_decay=weight_decay)
    res = fit(
        opt,
        lambda idx: nn.functional.cross_entropy(model(x[idx]), y[idx]),
        epoch_batches(len(x), batch, epochs, seed),
        record_losses=True,
    )
    sizes = [min(batch, len(x) - k) for k in range(0, len(x), batch)]
    losses = []
    for e in range(epochs):
        tot = 0.0
        for loss, size in zip(res.losses[e * len(sizes) : (e + 1) * len(sizes)], sizes, strict=True):
            tot += loss * size
        losses.append(tot / len(x))
    return losses


@torch.no_grad()
def accuracy(model: nn.Module, x: Tensor, y: Tensor) -> float:
    return float((model(x).argmax(1) == y).float().mean())
