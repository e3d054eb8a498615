"""`StoreView`: what the store's reading and checking helpers (`reader`, `verified`) need of a store.

`ActivationStore` is the one implementation; the helpers name this protocol instead of the class, so the
class can import them without the helpers importing it back.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch
    from torch import Tensor

    from interp.store.manifest import StoreMeta
    from interp.store.shards import ShardInfo


class StoreView(Protocol):
    path: Path
    """The store folder."""

    @property
    def meta(self) -> StoreMeta: ...

    @property
    def hooks(self) -> dict[str, tuple[int, ...]]: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def shard_indices(self) -> list[int]: ...

    def shard_info(self, index: int) -> ShardInfo: ...

    def row_offsets(self) -> Tensor: ...
