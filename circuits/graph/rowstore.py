"""The rows of an attribution graph as they are computed (each visited feature's and logit's incoming edges over
every source), held in memory or appended to a file in row blocks and read back block by block: a long prompt's
rows outgrow memory (SmolLM2 at 4,096 tokens: 4.2 million active features, 17 MB a row).

    store = RowStore(n_rows, n_cols, folder)    # folder=None: in memory
    store.append(rows, nodes)                   # [b, n_cols] and the node each row is
    for block, nodes in store.blocks(): ...     # every row so far, in order, a block at a time
    store.select(cols)                          # [rows so far, len(cols)], rows sorted by node
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

BLOCK_BYTES = 256 * 2**20
"""A file-backed store reads this much at a time."""


class RowStore:
    def __init__(self, n_rows: int, n_cols: int, folder: str | Path | None = None):
        self.n_rows, self.n_cols, self.filled = n_rows, n_cols, 0
        self.nodes = torch.zeros(n_rows, dtype=torch.long)
        self.path = None if folder is None else Path(folder) / "graph_rows.f32"
        if self.path is None:
            self.mem = torch.zeros(n_rows, n_cols)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "wb")  # noqa: SIM115 (closed by close())

    @property
    def shape(self) -> tuple[int, int]:
        return self.filled, self.n_cols

    @property
    def on_disk(self) -> bool:
        return self.path is not None

    def append(self, rows: Tensor, nodes: Tensor) -> None:
        b = len(rows)
        if self.filled + b > self.n_rows:
            raise ValueError(f"the store holds {self.n_rows} rows; {self.filled + b} appended")
        self.nodes[self.filled : self.filled + b] = nodes
        if self.path is None:
            self.mem[self.filled : self.filled + b] = rows
        else:
            self._file.write(rows.float().contiguous().numpy().tobytes())
            self._file.flush()
        self.filled += b

    def blocks(self) -> Iterator[tuple[Tensor, Tensor]]:
        """(rows [b, n_cols], their nodes [b]) over every row appended so far."""
        if self.path is None:
            yield self.mem[: self.filled], self.nodes[: self.filled]
            return
        step = max(1, BLOCK_BYTES // (4 * self.n_cols))
        data = np.memmap(self.path, dtype=np.float32, mode="r", shape=(self.filled, self.n_cols))
        for i in range(0, self.filled, step):
            j = min(i + step, self.filled)
            yield torch.from_numpy(np.array(data[i:j])), self.nodes[i:j]
        del data

    def select(self, cols: Tensor) -> tuple[Tensor, Tensor]:
        """(rows [filled, len(cols)] sorted by node, their nodes sorted)."""
        parts = [block[:, cols] for block, _ in self.blocks()]
        rows = torch.cat(parts) if parts else torch.zeros(0, len(cols))
        order = self.nodes[: self.filled].argsort()
        return rows[order], self.nodes[: self.filled][order]

    def close(self) -> None:
        """Delete the file (a file-backed store); a memory store frees its rows."""
        if self.path is not None:
            self._file.close()
            if self.path.exists():
                os.unlink(self.path)
        self.mem = None
