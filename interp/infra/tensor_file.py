"""Read a safetensors file that a user (or an earlier run) handed in, with every failure naming the file.

Input files (`--acts`, `tokens:PATH`, an attribution run's `prepared.safetensors`) arrive from outside
the code that reads them: random bytes, a truncated copy, a tensor of the wrong rank or a missing key
otherwise surface as safetensors' or torch's own errors, without the file's name. `read_tensors`
checks each of those and raises `TensorFileError` (a `ValueError`, one line for the CLI) that says
which file, what is wrong with it, and what was expected.

    >>> t, meta = read_tensors("acts.safetensors", what="--acts", need={"acts": 2})
"""

from __future__ import annotations

import os
from pathlib import Path

from torch import Tensor


class TensorFileError(ValueError):
    """An input safetensors file that is missing, unreadable, or not of the expected layout."""


def check_input_file(path: Path, what: str) -> None:
    """A one-line error naming `path` unless it is a regular file (or a symlink to one) that can be opened."""
    try:
        path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise TensorFileError(
                f"{what}: {path} is a symlink to nothing ({os.readlink(path)}); replace it with the file"
            ) from None
        raise FileNotFoundError(f"{what}: no such file {path}") from None
    except OSError as e:  # ELOOP: a symlink loop; ENAMETOOLONG, ...
        raise TensorFileError(f"{what}: cannot open {path} ({e.strerror}); replace it with the file") from None
    if not path.is_file():
        raise TensorFileError(f"{what}: {path} is not a file")


def read_tensors(
    path: str | Path, *, what: str, need: dict[str, int | None] | None = None, keys: list[str] | None = None
) -> tuple[dict[str, Tensor], dict[str, str]]:
    """(tensors, metadata) of the safetensors file `path`, given as `what` (e.g. "--acts").

    `need`: key -> number of dimensions it must have (None: any); such keys must be present.
    `keys`: read only these (default: all). Any problem raises `TensorFileError` naming the file.
    """
    from safetensors import safe_open

    path = Path(path)
    check_input_file(path, what)
    need = need or {}
    try:
        with safe_open(str(path), framework="pt") as f:
            present = list(f.keys())
            missing = [k for k in need if k not in present]
            if missing:
                raise TensorFileError(
                    f"{what}: {path} has no tensor {', '.join(map(repr, missing))} "
                    f"(it holds {', '.join(map(repr, present[:5])) or 'nothing'})"
                )
            out = {k: f.get_tensor(k) for k in (keys if keys is not None else present) if k in present}
            meta = dict(f.metadata() or {})
    except TensorFileError:
        raise
    except PermissionError:
        raise
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error types for damaged files
        raise _unreadable(path, what, e) from None
    for k, ndim in need.items():
        if ndim is not None and out[k].dim() != ndim:
            raise TensorFileError(
                f"{what}: tensor {k!r} in {path} has shape {list(out[k].shape)}; expected {ndim} dimensions"
            )
    return out, meta


def tensor_shapes(path: str | Path, *, what: str) -> dict[str, list[int]]:
    """Name -> shape of every tensor in the safetensors file `path`, from its header alone (nothing is
    loaded); the same checks and errors as `read_tensors`."""
    from safetensors import safe_open

    path = Path(path)
    check_input_file(path, what)
    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: list(f.get_slice(k).get_shape()) for k in f.keys()}
    except PermissionError:
        raise
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error types for damaged files
        raise _unreadable(path, what, e) from None


def _unreadable(path: Path, what: str, e: Exception) -> TensorFileError:
    """The one-line error for a file safetensors cannot parse (a pickle, random bytes, a header claiming more
    than the file holds); a symlink names its target, which may be a system file, not the user's data."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
    link = f" (a symlink to {path.resolve()})" if path.is_symlink() else ""
    return TensorFileError(
        f"{what}: cannot read {path}{link} as a safetensors file ({first}); is it damaged or another format?"
    )
