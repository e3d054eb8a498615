"""The settings of `interp attribute build` and `query` (`attribution.gradstore`), checked without torch.

A bad value (`--dim 0`, `--projection pca`, `--precondition adam` without `--adam-state`) is refused when the
config is made, before the command imports torch or transformers; only the device check imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

PROJECTIONS = ("random", "sketch")
PRECONDITIONERS = ("none", "adam", "diag")


@dataclass
class BuildConfig:
    """Settings of `interp attribute build`."""

    model: str
    """Model spec (the weights whose training gradients are stored)."""
    train: str
    """Training data: `tokens:PATH.safetensors` or a corpus spec."""
    out: str
    """The store folder (resumed when it holds a build with the same settings)."""
    modules: list[str] = field(default_factory=list)
    """Module-name globs of the Linear/LayerNorm/Embedding modules (default: every one inside the layers)."""
    projection: Literal["random", "sketch"] = "random"
    """random: seeded Gaussian projection of the whole gradient; sketch: TensorSketch per parameter tensor."""
    dim: int = 512
    """random: the row dimension; sketch: buckets per parameter tensor."""
    seed: int = 0
    """Projection seed (and corpus shuffling)."""
    ctx_len: int = 64
    max_train: int = 256
    shard_size: int = 256
    """Training sequences per shard (one task)."""
    batch_size: int = 16
    """Sequences per forward/backward."""
    device: str = "auto"
    executor: Literal["inprocess", "ray"] = "inprocess"
    ray_address: str | None = None
    num_workers: int | None = None

    def __post_init__(self) -> None:
        if self.projection not in PROJECTIONS:
            raise ValueError(f"--projection must be one of {', '.join(PROJECTIONS)}, got {self.projection!r}")
        for name in ("dim", "ctx_len", "max_train", "shard_size", "batch_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.executor not in ("inprocess", "ray"):
            raise ValueError(f"executor must be inprocess or ray, got {self.executor!r}")
        from interp.infra.devices import resolve_device

        self.device = resolve_device(self.device)


@dataclass
class QueryConfig:
    """Settings of `interp attribute query`."""

    store: str
    """A gradient store written by `interp attribute build`."""
    queries: str
    """Query data: `tokens:PATH.safetensors` or a corpus spec."""
    out: str | None = None
    """Folder for topk.json and topk.safetensors (None: nothing written)."""
    top: int = 10
    """Training rows kept per query."""
    precondition: Literal["none", "adam", "diag"] = "none"
    """Query-side preconditioner (see module docstring)."""
    adam_state: str = ""
    """adam: a checkpoint folder with adam_state.safetensors."""
    damping: float = 0.1
    """diag: damping as a multiple of the mean diagonal."""
    fit_samples: int = 64
    """diag: training sequences the diagonal Fisher is fitted on."""
    model: str | None = None
    """Model spec; default the store's. Must be the weights the store was built from."""
    modules: list[str] | None = None
    """Parameter globs; default the store's. Must cover the store's parameter list."""
    projection: str | None = None
    dim: int | None = None
    seed: int | None = None
    """Expected projection (checked against the store's when given)."""
    faiss: bool = False
    """Search with a FAISS inner-product index (when `faiss` imports; otherwise an error)."""
    ctx_len: int = 64
    max_queries: int = 8
    batch_size: int = 16
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.precondition not in PRECONDITIONERS:
            raise ValueError(f"--precondition must be one of {', '.join(PRECONDITIONERS)}, got {self.precondition!r}")
        if self.top <= 0:
            raise ValueError(f"--top must be positive, got {self.top}")
        if self.precondition == "adam" and not self.adam_state:
            raise ValueError("--precondition adam needs --adam-state CHECKPOINT (a folder with adam_state.safetensors)")
        if not self.damping > 0:
            raise ValueError(f"--damping must be positive, got {self.damping}")
        from interp.infra.devices import resolve_device

        self.device = resolve_device(self.device)
