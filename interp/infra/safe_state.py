"""Save and load nested training state (optimizer, scheduler, counters) as safetensors + JSON, never pickle.

Why: `torch.save` writes a pickle, and reading one back runs whatever code the file names; a checkpoint
folder is exactly the kind of file people pass around or leave in a shared `--out`. A state dict is
only tensors, numbers, strings, booleans and None nested in dicts, lists and tuples, so it splits
cleanly: every tensor goes to `{stem}.safetensors` under a generated key, and the structure, with
`{"__tensor__": key}` in place of each tensor, goes to `{stem}.json`. Dict keys keep their type (an
optimizer's state is keyed by int), tuples stay tuples. Anything else is refused when saving, so a
state that cannot be read back without pickle is never written.

    >>> save_state(folder, "trainer_state", {"optimizer": opt.state_dict(), "step": 12})
    >>> opt.load_state_dict(load_state(folder, "trainer_state")["optimizer"])
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from interp.store.atomic import atomic_write_bytes, atomic_write_with

FORMAT = "interp.safe_state"


class StateFileError(ValueError):
    """A state file is missing, damaged, or holds something other than what `save_state` writes."""


def _encode(obj: Any, tensors: dict[str, torch.Tensor], where: str) -> Any:
    if isinstance(obj, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = obj.detach().to("cpu").contiguous().clone()  # clone: safetensors refuses shared storage
        return {"__tensor__": key}
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"__float__": repr(obj)}
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"{where}: dict key {k!r} is not a str or int; save_state cannot keep it")
        return {"__dict__": [[k, _encode(v, tensors, f"{where}[{k!r}]")] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, tensors, f"{where}[{i}]") for i, v in enumerate(obj)]
        return {"__tuple__": items} if isinstance(obj, tuple) else items
    raise TypeError(f"{where}: a {type(obj).__name__} cannot be saved without pickle; convert it to plain data")


def _decode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        return tensors[obj["__tensor__"]]
    if "__float__" in obj:
        return float(obj["__float__"])
    if "__tuple__" in obj:
        return tuple(_decode(v, tensors) for v in obj["__tuple__"])
    if "__dict__" in obj:
        return {k: _decode(v, tensors) for k, v in obj["__dict__"]}
    raise ValueError(f"unknown node {sorted(obj)[:3]}")


def state_paths(folder: str | Path, stem: str) -> tuple[Path, Path]:
    """(`{stem}.json`, `{stem}.safetensors`) in `folder`."""
    folder = Path(folder)
    return folder / f"{stem}.json", folder / f"{stem}.safetensors"


def save_state(folder: str | Path, stem: str, state: Any) -> None:
    """Write `state` as `folder/{stem}.json` + `folder/{stem}.safetensors`, each atomically.

    Raises `TypeError` (before writing anything) for a value that is not plain data or a tensor.
    """
    tensors: dict[str, torch.Tensor] = {}
    tree = _encode(state, tensors, stem)
    js, st = state_paths(folder, stem)
    atomic_write_with(st, lambda tmp: save_file(tensors, str(tmp), metadata={"format": FORMAT}))
    atomic_write_bytes(js, json.dumps({"format": FORMAT, "version": 1, "tree": tree}).encode())


def load_state(folder: str | Path, stem: str, map_location: str | torch.device | None = None) -> Any:
    """Read what `save_state(folder, stem, ...)` wrote; `StateFileError` naming the file if it cannot."""
    js, st = state_paths(folder, stem)
    for p in (js, st):
        if not p.is_file():
            raise StateFileError(f"{p} is missing: the state in {folder} is incomplete")
    try:
        head = json.loads(js.read_text())
        if not isinstance(head, dict) or head.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file")
        tensors = load_file(str(st), device=str(map_location) if map_location is not None else "cpu")
        return _decode(head["tree"], tensors)
    except StateFileError:
        raise
    except Exception as e:  # noqa: BLE001 - any parse failure is "this file is damaged"
        raise StateFileError(
            f"cannot read the state {js.name} + {st.name} in {folder} ({e}); the file is "
            "damaged or was not written by this toolkit"
        ) from None


def load_torch_weights_only(path: str | Path, map_location: str | torch.device | None = "cpu") -> Any:
    """`torch.load` with `weights_only=True` passed explicitly (so `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` cannot
    turn it off): plain tensors and containers load, anything that would run code is a `StateFileError`."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # noqa: BLE001 - UnpicklingError, RuntimeError (bad zip), EOFError, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise StateFileError(
            f"refused to load {path}: it is not a plain tensor file ({first[:200]}). "
            "Files that need pickle to load can run code; only load files you made"
        ) from None
