"""Typed checks of a `manifest.json` as read from disk, before any of it is trusted.

A manifest is data from a file, so every field is checked for its type and range, unknown keys are
refused, and each shard's `file` must be exactly `shard_file_name(index)`: the reader never follows a
name from the file, so no entry can point outside the store (`../x`, `/etc/hostname`) or at another
shard. Each problem is a `StoreError` that names the manifest, the shard or field, and what was found.
The recorded totals (`n_shards`, `n_rows`) must agree with the listed shards, so a deleted entry is
caught rather than silently trained around.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from interp.store.errors import StoreError

_HEX64 = re.compile(r"^[0-9a-f]{64}$")

TOP_KEYS = {"format", "format_version", "meta", "n_shards_planned", "n_shards", "n_rows", "shards"}
SHARD_KEYS = {"index": True, "file": True, "n_rows": True, "sha256": True, "seq_start": False, "seq_end": False}
META_TYPES: dict[str, tuple[type, bool]] = {  # field -> (type, required)
    "model": (str, True),
    "model_sha256": (str, True),
    "hooks": (dict, True),
    "dtype": (str, True),
    "tokenizer": (str, True),
    "ctx_len": (int, True),
    "data": (dict, True),
    "code_version": (str, False),
    "extra": (dict, False),
}


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _type_name(x: Any) -> str:
    return "null" if x is None else type(x).__name__


class _Checker:
    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, problem: str) -> StoreError:
        return StoreError(
            f"the manifest {self.path} is malformed: {where} {problem}; the store is damaged "
            "(restore the manifest, or delete the folder and cache again)"
        )

    def keys(self, obj: dict, where: str, allowed: set[str], required: set[str]) -> None:
        extra = sorted(set(obj) - allowed, key=str)
        if extra:
            raise self.fail(where, f"has unknown key(s) {extra}")
        missing = sorted(required - set(obj))
        if missing:
            raise self.fail(where, f"lacks {', '.join(repr(m) for m in missing)}")

    def int_field(self, obj: dict, key: str, where: str, minimum: int = 0, optional: bool = False) -> None:
        v = obj.get(key)
        if v is None and optional:
            return
        if not _is_int(v) or v < minimum:
            raise self.fail(where, f"has {key}={v!r} ({_type_name(v)}); expected an integer >= {minimum}")


def check_manifest(raw: Any, path: Path, shard_file_name) -> None:  # noqa: ANN001 - a name function
    """Raise `StoreError` unless `raw` (parsed JSON) is a well-formed manifest; see the module doc."""
    c = _Checker(path)
    if not isinstance(raw, dict):
        raise c.fail("the top level", f"is {_type_name(raw)}, not an object")
    c.keys(raw, "the top level", TOP_KEYS, {"format", "meta", "shards"})
    if raw.get("format_version") is not None and not _is_int(raw["format_version"]):
        raise c.fail("the top level", f"has format_version={raw['format_version']!r}; expected an integer")
    c.int_field(raw, "n_shards_planned", "the top level", optional=True)
    _check_meta(c, raw["meta"])
    shards = raw["shards"]
    if not isinstance(shards, list):
        raise c.fail("'shards'", f"is {_type_name(shards)}, not a list")
    seen: set[int] = set()
    for pos, s in enumerate(shards):
        where = f"shards[{pos}]"
        if not isinstance(s, dict):
            raise c.fail(where, f"is {_type_name(s)}, not an object")
        c.keys(s, where, set(SHARD_KEYS), {k for k, req in SHARD_KEYS.items() if req})
        c.int_field(s, "index", where)
        where = f"the entry of shard {s['index']}"
        if s["index"] in seen:
            raise c.fail(where, "appears twice")
        seen.add(s["index"])
        want = shard_file_name(s["index"])
        if s["file"] != want:
            raise c.fail(
                where, f"names the file {s['file']!r}; shard {s['index']} must be {want!r} in the store folder"
            )
        c.int_field(s, "n_rows", where)
        if not isinstance(s["sha256"], str) or not _HEX64.match(s["sha256"]):
            raise c.fail(where, f"has sha256={s['sha256']!r}; expected 64 lowercase hex digits")
        c.int_field(s, "seq_start", where, optional=True)
        c.int_field(s, "seq_end", where, optional=True)
    for key, actual in (("n_shards", len(shards)), ("n_rows", sum(s["n_rows"] for s in shards))):
        if key in raw:
            c.int_field(raw, key, "the top level")
            if raw[key] != actual:
                raise c.fail(
                    "the top level",
                    f"records {key}={raw[key]} but its shard entries add up to {actual} "
                    "(an entry was removed or added by hand)",
                )


def _check_meta(c: _Checker, meta: Any) -> None:
    if not isinstance(meta, dict):
        raise c.fail("'meta'", f"is {_type_name(meta)}, not an object")
    c.keys(meta, "'meta'", set(META_TYPES), {k for k, (_, req) in META_TYPES.items() if req})
    for key, (typ, _) in META_TYPES.items():
        if key in meta and not (isinstance(meta[key], typ) and not isinstance(meta[key], bool)):
            raise c.fail(f"meta.{key}", f"is {_type_name(meta[key])}; expected {typ.__name__}")
    if meta["ctx_len"] <= 0:
        raise c.fail("meta.ctx_len", f"is {meta['ctx_len']}; expected a positive integer")
    for hook, shape in meta["hooks"].items():
        if not isinstance(shape, list) or not all(_is_int(n) and n > 0 for n in shape):
            raise c.fail(f"meta.hooks[{hook!r}]", f"is {shape!r}; expected a list of positive integers (the row shape)")
