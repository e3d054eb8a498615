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


def cached_sha256(path: str | os.PathLike, side: str | os.PathLike | None = None) -> str:
    """sha256 of a file, cached in `side` (default `<file>.sha256.json`) keyed by size and mtime (recomputed if
    either moves).

    Where the folder is read-only (a file inside site-packages, say) the hash is just computed.
    """
    path = Path(path)
    st = path.stat()
    key = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    side = Path(side) if side is not None else path.with_name(path.name + ".sha256.json")
    try:
        saved = json.loads(side.read_text())
        if {k: saved.get(k) for k in key} == key:
            return saved["sha256"]
    except (OSError, ValueError, KeyError):
        pass
    digest = sha256_file(path)
    try:
        side.parent.mkdir(parents=True, exist_ok=True)
        tmp = side.with_name(side.name + ".tmp")
        tmp.write_text(json.dumps({**key, "sha256": digest}))
        os.replace(tmp, side)
    except OSError:
        pass
    return digest


def weights_sha256(
    folder: str | os.PathLike, side_dir: str | os.PathLike | None = None, names: tuple[str, ...] = ()
) -> str:
    """One hash for a HF folder's weights: the file's own hash, or a hash of the per-file hashes when sharded.

    `side_dir`: remember the hashes there (named by the file's real path) instead of beside the files, for
    folders that belong to another tool (the HF cache). `names`: the weight files, when not every
    `*.safetensors` in the folder is one."""
    if names:
        files = [Path(folder) / n for n in sorted(names)]
    else:
        files = sorted(Path(folder).glob("*.safetensors")) or sorted(Path(folder).glob("*.bin"))
    if not files:
        raise FileNotFoundError(f"no weight files (*.safetensors) in {folder}")

    def one(f: Path) -> str:
        if side_dir is None:
            return cached_sha256(f)
        name = hashlib.sha256(str(f.resolve()).encode()).hexdigest()[:32]
        return cached_sha256(f, Path(side_dir) / f"{name}.sha256.json")

    if len(files) == 1:
        return one(files[0])
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.name}:{one(f)}\n".encode())
    return h.hexdigest()


def interp_home() -> Path:
    """Where converted models and other caches live: $INTERP_HOME, else ~/.cache/interp-toolkit."""
    return Path(os.environ.get("INTERP_HOME") or Path.home() / ".cache" / "interp-toolkit")
