"""A Hugging Face cache and hub made in the test: no network, tiny models, two revisions.

`fabricate(cache, repo_id, {"main": folder, ...})` lays out the cache as huggingface_hub writes it
(`models--ORG--NAME/blobs/<sha256>`, `snapshots/<commit>/<file>` symlinks, `refs/<revision>`);
`FakeHub` serves the same folders on 127.0.0.1 through the endpoints `snapshot_download` uses;
`hub_env` points huggingface_hub at both (it reads its settings at import time, so the constants are
patched as well as the environment).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from interp.data import byte_tokenizer
from tests.tiny import tiny_hf


def commit_sha(repo_id: str, revision: str) -> str:
    """A made-up 40-hex commit id, fixed per repo and revision."""
    return hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()


def save_repo(folder: Path, arch: str = "llama", seed: int = 0, tokenizer: bool = True, shard: str | None = None):
    """A tiny random causal LM saved as a hub repo would hold it (safetensors, config, byte tokenizer);
    `shard` (e.g. "40KB") splits the weights into shards named by `model.safetensors.index.json`."""
    model = tiny_hf(arch, seed=seed)
    model.config.architectures = [type(model).__name__]
    model.save_pretrained(folder, **({"max_shard_size": shard} if shard else {}))
    if tokenizer:
        byte_tokenizer().save_pretrained(folder)
    return model


def config_repo(folder: Path, config, files: tuple[str, ...] = ()) -> None:
    """A repo of only a config (and the named empty files): enough to be refused before any weights are read."""
    config.save_pretrained(folder)
    for name in files:
        (folder / name).write_bytes(b"")


def fabricate(cache: Path, repo_id: str, revisions: dict[str, Path]) -> dict[str, str]:
    """Put each revision's folder into the HF cache `cache`; returns revision -> commit sha."""
    root = cache / f"models--{repo_id.replace('/', '--')}"
    shas = {}
    for revision, folder in revisions.items():
        sha = shas[revision] = commit_sha(repo_id, revision)
        snap = root / "snapshots" / sha
        snap.mkdir(parents=True, exist_ok=True)
        for f in sorted(folder.iterdir()):
            data = f.read_bytes()
            blob = root / "blobs" / hashlib.sha256(data).hexdigest()
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(data)
            (snap / f.name).symlink_to(os.path.relpath(blob, snap))
        (root / "refs").mkdir(parents=True, exist_ok=True)
        (root / "refs" / revision).write_text(sha)
    return shas


def hub_env(monkeypatch, cache: Path, endpoint: str | None = None, offline: bool = True) -> None:
    """Point huggingface_hub at `cache` (and the hub at `endpoint`), online or offline, for this test."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1" if offline else "0")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    if endpoint is not None:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        monkeypatch.setattr(
            constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}"
        )


class FakeHub:
    """The hub's model-info, tree and file endpoints over local folders, on 127.0.0.1 in a thread.

    `repos`: repo id -> revision -> folder. `requests` records each (method, path) served."""

    def __init__(self, repos: dict[str, dict[str, Path]]):
        self.repos = {
            repo: {commit_sha(repo, rev): (rev, Path(folder)) for rev, folder in revs.items()}
            for repo, revs in repos.items()
        }
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                hub._serve(self, body=False)

            def do_GET(self):
                hub._serve(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _commit(self, repo: str, revision: str) -> tuple[str, Path] | None:
        for sha, (rev, folder) in self.repos.get(repo, {}).items():
            if revision in (rev, sha):
                return sha, folder
        return None

    def _reply(self, h, status: int, data: bytes, body: bool, headers: dict[str, str]) -> None:
        h.send_response(status)
        for k, v in {**headers, "Content-Length": str(len(data))}.items():
            h.send_header(k, v)
        h.end_headers()
        if body:
            h.wfile.write(data)

    def _serve(self, h, body: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        self.requests.append((h.command, path))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] in ("revision", "tree"):
            repo, kind, rev = "/".join(parts[2:4]), parts[4], "/".join(parts[5:])
        elif len(parts) >= 5 and parts[2] == "resolve":
            repo, kind, rev, name = "/".join(parts[:2]), "resolve", parts[3], "/".join(parts[4:])
        else:
            return self._reply(h, 404, b"{}", body, {})
        if repo not in self.repos:
            return self._reply(h, 404, b'{"error": "no repo"}', body, {"X-Error-Code": "RepoNotFound"})
        found = self._commit(repo, rev)
        if found is None:
            return self._reply(h, 404, b'{"error": "no revision"}', body, {"X-Error-Code": "RevisionNotFound"})
        sha, folder = found
        files = sorted(p.name for p in folder.iterdir())
        if kind == "revision":
            info = {"id": repo, "sha": sha, "siblings": [{"rfilename": f} for f in files]}
            return self._reply(h, 200, json.dumps(info).encode(), body, {"Content-Type": "application/json"})
        if kind == "tree":
            tree = [
                {
                    "type": "file",
                    "path": f,
                    "size": (folder / f).stat().st_size,
                    "oid": hashlib.sha1(f.encode()).hexdigest(),
                }
                for f in files
            ]
            return self._reply(h, 200, json.dumps(tree).encode(), body, {"Content-Type": "application/json"})
        if name not in files:
            return self._reply(h, 404, b"", body, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": sha})
        data = (folder / name).read_bytes()
        etag = hashlib.sha256(data).hexdigest()
        return self._reply(h, 200, data, body, {"X-Repo-Commit": sha, "ETag": f'"{etag}"'})
