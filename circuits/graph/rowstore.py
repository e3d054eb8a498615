"""The rows of an attribution graph as they are computed (each visited feature's and logit's incoming edges over
every source), held in memory or appended to a file in row blocks and read back block by block: a long prompt's
rows outgrow memory (SmolLM2 at 4,096 tokens: 4.2 million active features, 17 MB a row).

    store = RowStore(n_rows, n_cols, folder)    # folder=None: in memory
    store.append(rows, nodes)                   # [b, n_cols] and the node each row is
    for block, nodes in store.blocks(): ...     # every row so far, in order, a block at a time
    store.select(cols)                          # [rows so far, len(cols)], rows sorted by node

On disk, a store made with a `key` (what its rows depend on) can be resumed: the rows, their nodes and a note of
the key are files in the folder, appended in step (rows first), so a run killed at any point leaves a prefix of
whole rows. `RowStore(..., folder, key=k)` on a folder whose note has the same key keeps that prefix (a row
written without its node is cut off) and appends after it; another key starts over. `state` holds what a caller
needs besides the rows to go on exactly (the graph's pending ranking), written atomically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

BLOCK_BYTES = 256 * 2**20
"""A file-backed store reads this much at a time."""


class RowStore:
    def __init__(self, n_rows: int, n_cols: int, folder: str | Path | None = None, key: str | None = None):
        self.n_rows, self.n_cols, self.filled = n_rows, n_cols, 0
        self.nodes = torch.zeros(n_rows, dtype=torch.long)
        self.path = None if folder is None else Path(folder) / "graph_rows.f32"
        self.resumed = 0
        if self.path is None:
            self.mem = torch.zeros(n_rows, n_cols)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._nodes_path = self.path.with_suffix(".nodes")
        self._note = self.path.with_suffix(".json")
        note = {"key": key, "n_rows": n_rows, "n_cols": n_cols}
        if key is not None and self._note.is_file() and json.loads(self._note.read_text()) == note:
            have = min(self.path.stat().st_size // (4 * n_cols), self._nodes_path.stat().st_size // 8)
            self.resumed = self.filled = int(min(have, n_rows))
            os.truncate(self.path, self.filled * 4 * n_cols)
            os.truncate(self._nodes_path, self.filled * 8)
            if self.filled:
                self.nodes[: self.filled] = torch.from_numpy(np.fromfile(self._nodes_path, dtype=np.int64))
            mode = "ab"
        else:
            self._note.unlink(missing_ok=True)
            self._state_path().unlink(missing_ok=True)
            mode = "wb"
        self._file = open(self.path, mode)  # noqa: SIM115 (closed by close())
        self._nodes_file = open(self._nodes_path, mode)  # noqa: SIM115
        if mode == "wb":
            _atomic_text(self._note, json.dumps(note))

    def _state_path(self) -> Path:
        return self.path.with_suffix(".state.json")

    @property
    def state(self) -> dict | None:
        """What the caller saved with `save_state` (None: nothing, or an in-memory store)."""
        if self.path is None or not self._state_path().is_file():
            return None
        return json.loads(self._state_path().read_text())

    def save_state(self, state: dict) -> None:
        if self.path is not None:
            _atomic_text(self._state_path(), json.dumps(state))

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
            self._file.flush()  # rows before their nodes: a node on file always has its row
            self._nodes_file.write(nodes.to(torch.int64).contiguous().numpy().tobytes())
            self._nodes_file.flush()
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

    def close(self, keep: bool = False) -> None:
        """Delete the files (a file-backed store; `keep=True` leaves them to resume from); a memory store frees
        its rows."""
        if self.path is not None:
            self._file.close()
            self._nodes_file.close()
            if not keep:
                for p in (self.path, self._nodes_path, self._note, self._state_path()):
                    p.unlink(missing_ok=True)
        self.mem = None


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
