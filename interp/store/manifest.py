"""`manifest.json`: what a store holds (`StoreMeta`) and which shards are committed (`Manifest`).

The manifest is the only source of truth for committed shards: a shard file on disk that the manifest
does not list is a leftover of a killed run. It is rewritten atomically after every commit, and only by
the coordinating process.

```json
{"format": "interp.activation_store", "format_version": 1,
 "meta": {"model": "...", "model_sha256": "...", "hooks": {"blocks.0.hook_resid_post": [64]}, ...},
 "n_shards_planned": 8, "n_shards": 2, "n_rows": 4096,
 "shards": [{"index": 0, "file": "shard_00000.safetensors", "n_rows": 2048, "sha256": "...",
             "seq_start": 0, "seq_end": 16}, ...]}
```
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any

from interp.store.atomic import atomic_write_bytes
from interp.store.errors import NotAStoreError, StoreError
from interp.store.shards import INDEX_COLUMNS, ShardInfo, shard_file_name, torch_dtype
from interp.store.validate import check_manifest

MANIFEST_NAME = "manifest.json"
FORMAT = "interp.activation_store"
FORMAT_VERSION = 1

COMPAT_FIELDS = ("model", "model_sha256", "hooks", "dtype", "tokenizer", "ctx_len", "data")
"""Fields of `StoreMeta` that must be equal for a run to add shards to an existing store."""


def _default_code_version() -> str:
    try:
        return metadata.version("interp-toolkit")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _jsonable(x: Any) -> Any:
    """`x` as it reads back from JSON (tuples become lists), so equality means "same on disk"."""
    return json.loads(json.dumps(x))


@dataclass
class StoreMeta:
    """What a store was made from: enough to refuse mixing rows of different runs in one folder."""

    model: str
    """Model spec string as given to the loader (a folder, a GGUF package, a config name)."""
    model_sha256: str
    """Hash of the model weights, so a retrained model under the same name is told apart."""
    hooks: dict[str, list[int]]
    """Hook name -> row shape, e.g. {"blocks.3.hook_resid_post": [768], "blocks.3.attn.hook_z": [12, 64]}."""
    dtype: str
    """Dtype of every hook tensor, a torch name: "float32", "bfloat16", "float16"."""
    tokenizer: str
    """Tokenizer name or path."""
    ctx_len: int
    """Tokens per sequence fed to the model."""
    data: dict[str, Any]
    """Description of the text source (name, split, corpus digest, ...)."""
    code_version: str = field(default_factory=_default_code_version)
    """Version of this toolkit that wrote the store (informative; not part of compatibility)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else worth keeping (not part of compatibility)."""

    def __post_init__(self) -> None:
        self.hooks = {str(k): [int(n) for n in v] for k, v in self.hooks.items()}
        if not self.hooks:
            raise ValueError("a store needs at least one hook")
        clash = sorted(set(self.hooks) & set(INDEX_COLUMNS))
        if clash:
            raise ValueError(f"hook names {clash} collide with the index columns {list(INDEX_COLUMNS)}")
        torch_dtype(self.dtype)  # raises on unknown names
        if int(self.ctx_len) <= 0:
            raise ValueError(f"ctx_len must be positive, got {self.ctx_len}")
        self.ctx_len = int(self.ctx_len)
        self.data = _jsonable(self.data)
        self.extra = _jsonable(self.extra)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StoreMeta:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise StoreError(f"manifest meta has unknown fields {unknown}; was it written by a newer version?")
        return cls(**d)

    def differences(self, other: StoreMeta) -> list[tuple[str, str]]:
        """(field, "this has A, other has B") for each compatibility field that differs."""
        out = []
        for name in COMPAT_FIELDS:
            a, b = _jsonable(getattr(self, name)), _jsonable(getattr(other, name))
            if a != b:
                out.append((name, _describe_diff(a, b)))
        return out

    def compatible_with(self, other: StoreMeta) -> bool:
        """True when rows written under `other` may join a store written under `self`."""
        return not self.differences(other)


def _short(x: Any, limit: int = 160) -> str:
    s = json.dumps(x, sort_keys=True)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _describe_diff(a: Any, b: Any) -> str:
    """Both values, or for dicts only the keys that differ, so a long hooks dict stays readable."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b), key=str)
        parts = [
            f"[{k!r}] store has {_short(a.get(k, '<absent>'))}, this run has {_short(b.get(k, '<absent>'))}"
            for k in keys
            if a.get(k, "<absent>") != b.get(k, "<absent>")
        ]
        return "; ".join(parts)
    return f"store has {_short(a)}, this run has {_short(b)}"


@dataclass
class Manifest:
    """Meta + committed shards of a store (read-only for callers; the store updates it)."""

    meta: StoreMeta
    """What the store was made from."""
    shards: dict[int, ShardInfo] = field(default_factory=dict)
    """Committed shards by index."""
    n_shards_planned: int | None = None
    """How many shards the run that made the store intends to write (None: unknown)."""

    @property
    def n_rows(self) -> int:
        return sum(s.n_rows for s in self.shards.values())

    @property
    def n_shards(self) -> int:
        return len(self.shards)

    @property
    def complete(self) -> bool:
        """True when a plan is known and every planned shard is committed."""
        planned = self.n_shards_planned
        return planned is not None and all(i in self.shards for i in range(planned))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "meta": self.meta.to_dict(),
            "n_shards_planned": self.n_shards_planned,
            "n_shards": self.n_shards,
            "n_rows": self.n_rows,
            "shards": [self.shards[i].to_dict() for i in sorted(self.shards)],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Manifest:
        if d.get("format") != FORMAT:
            raise StoreError(f"manifest format is {d.get('format')!r}, expected {FORMAT!r}")
        if int(d.get("format_version", 0)) > FORMAT_VERSION:
            raise StoreError(
                f"manifest format_version {d['format_version']} is newer than this code reads ({FORMAT_VERSION});"
                " upgrade interp-toolkit"
            )
        shards = [ShardInfo.from_dict(s) for s in d.get("shards", [])]
        by_index = {s.index: s for s in shards}
        if len(by_index) != len(shards):
            raise StoreError("manifest lists the same shard index twice")
        return cls(StoreMeta.from_dict(d["meta"]), by_index, d.get("n_shards_planned"))


def manifest_path(folder: Path) -> Path:
    return Path(folder) / MANIFEST_NAME


def read_manifest(folder: Path) -> Manifest:
    """Load `folder/manifest.json`; `NotAStoreError` if there is none."""
    path = manifest_path(folder)
    if not path.is_file():
        what = "does not exist" if not Path(folder).exists() else "has no manifest.json"
        raise NotAStoreError(f"{folder} is not an activation store: the folder {what}")
    try:
        raw = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StoreError(f"{path} is not valid JSON ({e}); the store is damaged") from None
    except OSError as e:
        raise StoreError(f"cannot read {path} ({e.strerror or e})") from None
    check_manifest(raw, path, shard_file_name)
    try:
        return Manifest.from_dict(raw)
    except StoreError as e:
        raise StoreError(f"the manifest {path} is malformed: {e}") from None
    except (ValueError, TypeError, KeyError) as e:  # StoreMeta's own checks (dtype names, hook names, ...)
        raise StoreError(f"the manifest {path} is malformed: {e}; the store is damaged") from None


def write_manifest(folder: Path, manifest: Manifest) -> None:
    """Rewrite `folder/manifest.json` atomically (temporary file, fsync, `os.replace`)."""
    text = json.dumps(manifest.to_dict(), indent=1) + "\n"
    atomic_write_bytes(manifest_path(folder), text.encode())
