"""One reading of `--device`: "auto", "cpu", "cuda" or "cuda:N", checked before any work starts.

Every command and library entry point that takes a device passes it through `resolve_device`, so
"cuda" on a machine without CUDA is one clear error naming the fix, never torch's
`AssertionError: Torch not compiled with CUDA enabled` from deep inside a forward pass.

    >>> resolve_device("auto")          # "cuda" when a GPU is usable, else "cpu"
    'cpu'
"""

from __future__ import annotations

import re

DEVICE_CHOICES = "auto|cpu|cuda[:N]"
"""How the CLI shows the accepted values (the metavar of `--device`)."""

_DEVICE = re.compile(r"^(auto|cpu|cuda)(?::(\d+))?$")


class DeviceError(ValueError):
    """A device that is malformed or not present on this machine (the message says what to use)."""


def cuda_status() -> tuple[bool, str]:
    """(usable, why not): CUDA needs a CUDA build of torch and at least one visible GPU."""
    import torch

    if not torch.backends.cuda.is_built():
        return False, f"this torch ({torch.__version__}) is built without CUDA"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU is visible (check the driver and CUDA_VISIBLE_DEVICES)"
    return True, ""


def resolve_device(device: object = "auto") -> str:
    """The torch device string for a `--device` value: "auto" picks "cuda" when usable, else "cpu".

    Raises `DeviceError` for a malformed value, for CUDA where there is none and for a GPU index
    past the last GPU; "cpu" never imports more than torch.
    """
    text = str(device).strip().lower()
    m = _DEVICE.match(text)
    if not m or (m[1] != "cuda" and m[2] is not None):
        raise DeviceError(f"unknown device {device!r}; use {DEVICE_CHOICES} (e.g. --device cuda:0)")
    if m[1] == "cpu":
        return "cpu"
    ok, why = cuda_status()
    if m[1] == "auto":
        return "cuda" if ok else "cpu"
    if not ok:
        raise DeviceError(
            f"--device {text} asked for CUDA but {why}; use --device cpu (or auto, which picks CUDA when it is there)"
        )
    import torch

    index = int(m[2] or 0)
    if index >= torch.cuda.device_count():
        raise DeviceError(
            f"--device {text}: this machine has {torch.cuda.device_count()} CUDA device(s), "
            f"numbered 0..{torch.cuda.device_count() - 1}"
        )
    return text


def synchronize(device: object) -> None:
    """Wait for queued GPU work on `device` (a no-op on CPU), so a timing measures the work itself."""
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize(torch.device(str(device)))
