"""What a checkpoint needs in memory, read from its safetensors headers before any weight is loaded.

A safetensors file starts with an 8-byte length and a JSON header listing each tensor's dtype and shape, so the
parameter count of a multi-GB checkpoint costs a few kilobytes of reading.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path


def machine_memory_gb() -> float | None:
    """This machine's memory in GB (the cgroup limit when lower), or None when it cannot be read."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return total / 1e9


MAX_HEADER = 100_000_000
"""The safetensors format's own limit on the JSON header (bytes); a file claiming more is not safetensors."""


def parameter_count(files: list[Path]) -> int:
    """Number of parameters in the safetensors files (from their headers only); a `ValueError` naming the file
    for one that is not safetensors (a pickle under that name, a huge or broken header)."""
    total = 0
    for path in files:
        try:
            with open(path, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                if not 2 <= size <= MAX_HEADER:
                    raise ValueError(f"its header claims {size} bytes")
                header = json.loads(f.read(size))
            shapes = [t["shape"] for name, t in header.items() if name != "__metadata__"]
            total += sum(math.prod(int(n) for n in shape) for shape in shapes)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(
                f"{path} is not a readable safetensors file ({e}); delete it from the HF cache and load again"
            ) from None
    return total


def gigabytes(n_params: int, dtype) -> float:
    """GB that `n_params` parameters take in `dtype` (a torch dtype)."""
    return n_params * dtype.itemsize / 1e9


def check_fits(label: str, n_params: int, dtype, have_gb: float | None, spread: bool) -> str:
    """One line saying what the model needs; a `ValueError` naming the fixes when it cannot fit in this machine's
    memory and is not spread over devices (`device_map`)."""
    need = gigabytes(n_params, dtype)
    name = str(dtype).removeprefix("torch.")
    line = f"{label}: {n_params / 1e9:.3g} B parameters, ~{need:.3g} GB as {name}"
    if have_gb is not None:
        line += f" (this machine: {have_gb:.3g} GB)"
    if have_gb is not None and need > have_gb and not spread:
        half = gigabytes(n_params, _bfloat16())
        raise ValueError(
            f"{line}: it does not fit. Load it as bfloat16 (load_model(..., dtype='bfloat16'), ~{half:.3g} GB) "
            "or spread it over devices with device_map='auto' (accelerate)"
        )
    return line


def _bfloat16():
    import torch

    return torch.bfloat16
