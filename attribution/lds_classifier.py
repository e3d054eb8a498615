"""A classifier LDS task: an MLP on scikit-learn's handwritten digits, for attribution beyond language models.

`DigitsTask` is a `RetrainTask` for `attribution.lds.retrain_subsets`: from a fixed initialisation, full-batch
Adam on the chosen training rows for a fixed number of steps (deterministic), then each query's cross-entropy.
`ClassifierTask` carries Kronfluence's two methods, so the same object serves our `EKFAC` and Kronfluence's
`Analyzer`. A batch is a pair (x [b, 64], y [b]).

    task = DigitsTask(n_train=1000, n_query=50)
    masks = random_subsets(task.n_train, 50)
    losses = retrain_subsets(task, masks, "runs/lds_digits/retrain")
    model = task.train(torch.arange(task.n_train))             # the full model the scores are computed on
    ek = EKFAC(model, ClassifierTask()).fit(task.batches("train"))
    lds(ek.scores(task.batches("train"), task.batches("query")), masks, losses).mean
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class ClassifierTask:
    """Kronfluence's `Task` methods for a classifier: summed cross-entropy, labels drawn from the model when
    `sample` (the true Fisher), the measurement is the query's cross-entropy."""

    def compute_train_loss(self, batch: tuple[Tensor, Tensor], model: nn.Module, sample: bool = False) -> Tensor:
        x, y = batch
        logits = model(x)
        if sample:
            with torch.no_grad():
                y = torch.multinomial(logits.softmax(-1), 1).flatten()
        return F.cross_entropy(logits, y, reduction="sum")

    def compute_measurement(self, batch: tuple[Tensor, Tensor], model: nn.Module) -> Tensor:
        return self.compute_train_loss(batch, model)


def mlp(seed: int = 0, hidden: int = 32) -> nn.Module:
    """64 -> hidden -> hidden -> 10, tanh (smooth, so the Gauss-Newton view of the loss is a fair one)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 10))


@dataclass(frozen=True)
class DigitsTask:
    """Digits split into `n_train` training rows and `n_query` query rows (seeded), standardised features."""

    n_train: int = 1000
    n_query: int = 50
    steps: int = 300
    lr: float = 1e-2
    weight_decay: float = 1e-3
    hidden: int = 32
    seed: int = 0
    batch: int = 64

    def data(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(x_train, y_train, x_query, y_query)."""
        from sklearn.datasets import load_digits

        d = load_digits()
        x = torch.tensor(d.data, dtype=torch.float32)
        y = torch.tensor(d.target, dtype=torch.long)
        if self.n_train + self.n_query > len(x):
            raise ValueError(f"digits has {len(x)} rows; n_train + n_query = {self.n_train + self.n_query}")
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(self.seed))
        x = (x - x.mean(0)) / (x.std(0) + 1.0)
        tr, q = order[: self.n_train], order[self.n_train : self.n_train + self.n_query]
        return x[tr], y[tr], x[q], y[q]

    def train(self, rows: Tensor) -> nn.Module:
        """The model trained from the fixed init on training rows `rows` (full batch, fixed steps)."""
        x, y, _, _ = self.data()
        model = mlp(self.seed, self.hidden)
        opt = torch.optim.Adam(model.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        with torch.enable_grad():  # the harness may call this under no_grad
            for _ in range(self.steps):
                opt.zero_grad()
                F.cross_entropy(model(x[rows]), y[rows]).backward()
                opt.step()
        return model.eval()

    def train_and_eval(self, rows: Tensor) -> Tensor:
        _, _, xq, yq = self.data()
        with torch.no_grad():
            return F.cross_entropy(self.train(rows)(xq), yq, reduction="none")

    def identity(self) -> dict:
        return {"task": "digits-mlp", **{k: getattr(self, k) for k in self.__dataclass_fields__}}

    def batches(self, split: str) -> list[tuple[Tensor, Tensor]]:
        """The training ("train") or query ("query") rows in batches of `batch`, in order."""
        x, y, xq, yq = self.data()
        x, y = (x, y) if split == "train" else (xq, yq)
        return [(x[i : i + self.batch], y[i : i + self.batch]) for i in range(0, len(x), self.batch)]
