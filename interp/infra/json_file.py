"""Read a JSON file that a user (or an earlier run) handed in, with every failure naming the file.

A run folder's `cfg.json`, `state.json` or `result.json` can be truncated by a kill, damaged, or
crafted: `json.loads` then says "Expecting value: line 1 column 1" without saying which file, and a
list where an object was expected surfaces later as an AttributeError. `read_json` raises
`JsonFileError` (a `ValueError`, one line for the CLI) naming the file, what is wrong and the fix.

    >>> cfg = read_json(folder / "cfg.json", what="SAE config")        # a dict, or JsonFileError
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class JsonFileError(ValueError):
    """An input JSON file that is unreadable, not JSON, not UTF-8, or not of the expected type."""


def read_json(path: str | Path, *, what: str, kind: type = dict, fix: str = "") -> Any:
    """The JSON value in `path` (a `kind`, dict by default); `what` names it in errors ("SAE config").

    A missing file is a `FileNotFoundError` naming it; anything else wrong a `JsonFileError`.
    `fix` is appended to the message (e.g. "delete the folder to start over").
    """
    path = Path(path)
    tail = f"; {fix}" if fix else ""
    if not path.exists():
        raise FileNotFoundError(f"{what}: no such file {path}")
    if not path.is_file():
        raise JsonFileError(f"{what}: {path} is not a file{tail}")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise JsonFileError(f"{what}: {path} is not UTF-8 text (byte {e.start}){tail}") from None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        where = f" ({e.msg} at line {e.lineno} column {e.colno})" if isinstance(e, json.JSONDecodeError) else ""
        raise JsonFileError(f"{what}: {path} is not valid JSON{where}: is it truncated or damaged?{tail}") from None
    if kind is not None and not isinstance(value, kind):
        want = {dict: "an object {...}", list: "a list [...]"}.get(kind, kind.__name__)
        raise JsonFileError(
            f"{what}: {path} holds {type(value).__name__ if value is not None else 'null'}, expected {want}{tail}"
        )
    return value
