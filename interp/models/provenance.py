"""Weight-file hashes for provenance, remembered beside the file so a reload does not re-hash 500 MB."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    """sha256 hex digest of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def cached_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file, cached in `<file>.sha256.json` keyed by size and mtime (recomputed if either moves).

    Where the folder is read-only (a file inside site-packages, say) the hash is just computed.
    """
    path = Path(path)
    st = path.stat()
    key = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    side = path.with_name(path.name + ".sha256.json")
    try:
        saved = json.loads(side.read_text())
        if {k: saved.get(k) for k in key} == key:
            return saved["sha256"]
    except (OSError, ValueError, KeyError):
        pass
    digest = sha256_file(path)
    try:
        tmp = side.with_name(side.name + ".tmp")
        tmp.write_text(json.dumps({**key, "sha256": digest}))
        os.replace(tmp, side)
    except OSError:
        pass
    return digest


def weights_sha256(folder: str | os.PathLike) -> str:
    """One hash for a HF folder's weights: the file's own hash, or a hash of the per-file hashes when sharded."""
    files = sorted(Path(folder).glob("*.safetensors")) or sorted(Path(folder).glob("*.bin"))
    if not files:
        raise FileNotFoundError(f"no weight files (*.safetensors) in {folder}")
    if len(files) == 1:
        return cached_sha256(files[0])
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.name}:{cached_sha256(f)}\n".encode())
    return h.hexdigest()


def interp_home() -> Path:
    """Where converted models and other caches live: $INTERP_HOME, else ~/.cache/interp-toolkit."""
    return Path(os.environ.get("INTERP_HOME") or Path.home() / ".cache" / "interp-toolkit")
