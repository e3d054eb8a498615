"""One shard file: `shard_{index:05d}.safetensors`, one tensor per hook plus the index columns.

`write_shard_file` is a pure function of its arguments (no store object, no manifest), so it can run in
any process, e.g. a Ray worker; the coordinating process then records the returned `ShardInfo` with
`ActivationStore.commit_shard`. Only that process ever writes the manifest.

Layout of a shard with n rows (a row is one token of one sequence):
- `<hook name>`: [row, *row_shape] in the store dtype, e.g. `blocks.3.hook_resid_post` [row, d_model]
  or `blocks.3.attn.hook_z` [row, n_heads, d_head]; keys are hook names as-is, dots included.
- `tokens` [row] int32 token id, `seq` [row] int64 global sequence index, `pos` [row] int32 position.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from torch import Tensor

from interp.store.atomic import atomic_write_with
from interp.store.safetensors_io import SAFETENSORS_DTYPES, write_safetensors_hashed

INDEX_COLUMNS: dict[str, torch.dtype] = {"tokens": torch.int32, "seq": torch.int64, "pos": torch.int32}
"""The integer columns every shard carries beside the hook tensors, with their dtypes."""

_SHARD_NAME = re.compile(r"^shard_(\d{5,})\.safetensors$")


def shard_file_name(index: int) -> str:
    """`shard_file_name(3)` -> "shard_00003.safetensors"."""
    return f"shard_{index:05d}.safetensors"


def parse_shard_index(name: str) -> int | None:
    """The index in a shard file name, or None if `name` is not one."""
    m = _SHARD_NAME.match(name)
    return int(m[1]) if m else None


def torch_dtype(name: str) -> torch.dtype:
    """`torch_dtype("bfloat16")` -> torch.bfloat16; a clear error for names torch does not know."""
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or dtype not in SAFETENSORS_DTYPES:
        known = ", ".join(str(d).removeprefix("torch.") for d in SAFETENSORS_DTYPES)
        raise ValueError(f"unknown dtype {name!r}; use one of: {known}")
    return dtype


@dataclass(frozen=True)
class ShardInfo:
    """What the manifest records about one committed shard."""

    index: int
    """Shard number; the file is `shard_file_name(index)`."""
    file: str
    """File name inside the store folder."""
    n_rows: int
    """Rows (tokens) in the shard."""
    sha256: str
    """Hex sha256 of the whole file, checked when the shard is read."""
    seq_start: int | None = None
    """Smallest global sequence index in the shard (None if it has no `seq` column or no rows)."""
    seq_end: int | None = None
    """One past the largest global sequence index in the shard."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ShardInfo:
        return cls(**d)


def _own_storage(t: Tensor) -> Tensor:
    """`t` on CPU, contiguous and owning its storage: safetensors refuses tensors that share memory."""
    t = t.detach().to("cpu").contiguous()
    # row-major strides: a one-row column slice ([1], stride 8) counts as contiguous, but the writer's byte view
    # needs stride 1
    dense, size = [], 1
    for d in reversed(t.shape):
        dense.insert(0, size)
        size *= d
    if (
        t.storage_offset() != 0
        or t.untyped_storage().nbytes() != t.numel() * t.element_size()
        or t.stride() != tuple(dense)
    ):
        t = t.clone(memory_format=torch.contiguous_format)
    return t


def write_shard_file(folder: str | Path, index: int, tensors: dict[str, Tensor]) -> ShardInfo:
    """Write `tensors` as `folder/shard_{index:05d}.safetensors`, atomically, and describe the file.

    Pure: touches only that file (and its temporary twin), so it is safe in a worker process. All
    tensors must share their first (row) dimension. Returns the `ShardInfo` to commit.

    >>> info = write_shard_file(tmp, 0, {"blocks.0.hook_resid_post": x, "tokens": t, "seq": s, "pos": p})
    >>> store.commit_shard(info)
    """
    if index < 0:
        raise ValueError(f"shard index must be >= 0, got {index}")
    if not tensors:
        raise ValueError("write_shard_file needs at least one tensor")
    rows = {name: (t.shape[0] if t.dim() > 0 else None) for name, t in tensors.items()}
    if None in rows.values() or len(set(rows.values())) != 1:
        shown = ", ".join(f"{k}: {tuple(t.shape)}" for k, t in tensors.items())
        raise ValueError(f"all tensors of a shard must have the same first (row) dimension; got {shown}")
    n_rows = next(iter(rows.values()))
    assert n_rows is not None
    clean = {name: _own_storage(t) for name, t in tensors.items()}
    folder = Path(folder)
    name = shard_file_name(index)
    # Written straight from tensor memory and hashed on the way (byte-identical to safetensors' own save).
    digest = atomic_write_with(folder / name, lambda tmp: write_safetensors_hashed(tmp, clean, {"format": "pt"}))
    seq = clean.get("seq")
    seq_start = seq_end = None
    if seq is not None and n_rows > 0:
        seq_start, seq_end = int(seq.min()), int(seq.max()) + 1
    return ShardInfo(index, name, int(n_rows), digest, seq_start, seq_end)


def read_header(path: Path) -> dict[str, tuple[str, list[int]]]:
    """Key -> (safetensors dtype, shape) of a shard, from its header only (no tensor data is read)."""
    with safe_open(str(path), framework="pt") as f:
        out = {}
        for key in f.keys():
            sl = f.get_slice(key)
            out[key] = (sl.get_dtype(), list(sl.get_shape()))
        return out
