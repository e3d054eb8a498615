"""Helpers for the issue-29 tests: a refusal is one `error:` line and exit 2, and it leaves the disk as it was."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import torch
from typer.testing import CliRunner

from interp.store import ActivationStore, StoreMeta, write_shard_file

runner = CliRunner()


def snapshot(root: Path) -> dict[str, str]:
    """Every path under `root` with a hash of its bytes ('dir' for folders, a link's target, 'special' for a fifo):
    equal snapshots = disk as it was."""
    root = Path(root)
    if not root.exists():
        return {}
    out = {}
    for p in sorted(root.rglob("*")):
        key = str(p.relative_to(root))
        if p.is_symlink():
            out[key] = f"link to {os.readlink(p)}"
        elif p.is_dir():
            out[key] = "dir"
        elif not p.is_file():  # a fifo or socket: reading it would block
            out[key] = "special"
        else:
            out[key] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def invoke(args: list[str], app=None):
    """Run the `interp` CLI in-process (the root app, so `run_guarded` is in force)."""
    if app is None:
        from interp.cli.main import app
    return runner.invoke(app, [str(a) for a in args])


def assert_refused(result, *needles: str) -> str:
    """Exit 2, exactly one `error:` line, no traceback; returns that line (which must contain every needle)."""
    text = result.output
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2, (result.exit_code, text, result.exception)
    assert len(errors) == 1 and "Traceback" not in text, text
    for n in needles:
        assert n in errors[0], (n, errors[0])
    return errors[0]


def token_store(
    path: Path,
    n_seq: int = 16,
    ctx: int = 8,
    d: int = 12,
    hook: str = "blocks.0.hook_resid_post",
    model: str = "synthetic",
    seed: int = 0,
    also: tuple[str, ...] = (),
    tokens: torch.Tensor | None = None,
) -> ActivationStore:
    """A small store with token ids, seq and pos columns (two shards); `also`: more hooks of the same width;
    `tokens`: the n_seq * ctx token ids (default: random ids below 50)."""
    hooks = (hook, *also)
    meta = StoreMeta(
        model=model,
        model_sha256="-",
        hooks={h: [d] for h in hooks},
        dtype="float32",
        tokenizer="-",
        ctx_len=ctx,
        data={},
    )
    st = ActivationStore.open_or_create(path, meta, n_shards_planned=2)
    g = torch.Generator().manual_seed(seed)
    half = n_seq * ctx // 2
    for i in range(2):
        x = torch.relu(torch.randn(half, 24, generator=g)) @ torch.randn(24, d, generator=g)
        seq = torch.arange(i * half, (i + 1) * half) // ctx
        st.commit_shard(
            write_shard_file(
                st.path,
                i,
                {
                    **{h: x * (j + 1) for j, h in enumerate(hooks)},
                    "tokens": (
                        torch.randint(0, 50, (half,), generator=g, dtype=torch.int32)
                        if tokens is None
                        else tokens[i * half : (i + 1) * half].int()
                    ),
                    "seq": seq,
                    "pos": (torch.arange(half) % ctx).int(),
                },
            )
        )
    st.close()
    return st


@contextmanager
def lock_holder(folder: Path):
    """A real second process holding the writer lock of `folder` (as `interp.store.lock` takes it) until the
    block ends; yields its pid. Plain fcntl in the child: importing the toolkit would import torch (seconds)."""
    folder.mkdir(parents=True, exist_ok=True)
    code = textwrap.dedent(f"""
        import fcntl, json, os, socket, sys, time
        fd = os.open({str(folder / ".writer.lock")!r}, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({{"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}}).encode())
        print("locked", flush=True)
        sys.stdin.read()
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "locked"
        yield p.pid
    finally:
        p.stdin.close()
        p.wait()
