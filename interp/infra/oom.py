"""Turn "the allocator failed" into advice: what ran out, how much was asked, and which option to lower.

torch reports a failed allocation as `torch.OutOfMemoryError` (CUDA) or as a `RuntimeError` /
`MemoryError` from the CPU allocator ("DefaultCPUAllocator: can't allocate memory: you tried to
allocate N bytes"), both with a long traceback from deep inside a forward pass. `advise_on_oom` wraps
the memory-hungry part of a job and re-raises such a failure as `OutOfMemoryAdvice`, a `ValueError`
(so commands print it as one `error:` line) that names the step, the request, the memory available
and the options that shrink it.

    >>> with advise_on_oom("an SAE training step", "lower --batch-size or --d-sae"):
    ...     trainer.step(batch)
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

_ASKED = re.compile(
    r"(?:tried to allocate|allocate memory: you tried to allocate)\s+([\d.]+)\s*([KMGT]i?B|bytes)?", re.I
)


class OutOfMemoryAdvice(ValueError):
    """A step ran out of memory; the message says how much it asked for and what to lower."""


def is_oom(exc: BaseException) -> bool:
    """True for torch's and Python's out-of-memory failures (CPU or GPU)."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text.lower())


def _asked(text: str) -> str | None:
    m = _ASKED.search(text)
    if not m:
        return None
    n, unit = float(m[1]), (m[2] or "bytes")
    if unit.lower() == "bytes":
        return f"{n / 2**30:.2f} GiB"
    return f"{m[1]} {unit}"


def _available(cuda: bool) -> str:
    try:
        if cuda:
            import torch

            free, total = torch.cuda.mem_get_info()
            return f"{free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB on the GPU"
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        kb = int(info["MemAvailable"].split()[0])
        return f"{kb / 2**20:.1f} GiB of RAM available"
    except Exception:  # noqa: BLE001 - advice without the number is still advice
        return "memory available unknown"


def advice(exc: BaseException, what: str, fix: str) -> OutOfMemoryAdvice:
    """The `OutOfMemoryAdvice` for an out-of-memory failure `exc` during `what`."""
    text = str(exc)
    cuda = type(exc).__name__ == "OutOfMemoryError" or "CUDA" in text
    asked = _asked(text)
    where = "GPU" if cuda else "CPU"
    return OutOfMemoryAdvice(
        f"{what} ran out of {where} memory"
        + (f" asking for {asked}" if asked else "")
        + f" ({_available(cuda)}): {fix}"
        + ("" if cuda else ", or run where there is more RAM")
    )


@contextlib.contextmanager
def advise_on_oom(what: str, fix: str) -> Iterator[None]:
    """Re-raise an out-of-memory failure inside the block as `OutOfMemoryAdvice` (see module doc)."""
    try:
        yield
    except BaseException as exc:
        if is_oom(exc):
            raise advice(exc, what, fix) from None
        raise
