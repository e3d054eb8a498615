"""One writer at a time, live writers' files spared, kills during creation and caching recovered
(issue 17 causes 6 and 14). Other writers are real processes; each test takes a few seconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch

from interp.store import ActivationStore, StoreLockedError, write_shard_file
from tests.interp.store.store_helpers import concat, make_meta, shard_tensors
from tests.reliability.store_damage import build

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        **kw,
    )


def _holder(folder: Path) -> subprocess.Popen:
    """A process that takes the store's writer lock and keeps it until its stdin closes."""
    # plain fcntl, as interp.store.lock does it (importing the toolkit would import torch: seconds)
    p = _python(f"""
        import fcntl, json, os, socket, sys, time
        fd = os.open({str(folder / ".writer.lock")!r}, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({{"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}}).encode())
        print("locked", flush=True)
        sys.stdin.read()
    """)
    assert p.stdout.readline().strip() == "locked"
    return p


FIRST_WRITER = """
    import sys
    from pathlib import Path
    import interp.store.shards as S
    from interp.store import ActivationStore, write_shard_file
    from tests.interp.store.store_helpers import make_meta, shard_tensors
    real = S.write_safetensors_hashed

    def paused(tmp, *args, **kw):
        digest = real(tmp, *args, **kw)  # the shard's bytes are in its temporary file, not yet renamed
        Path(sys.argv[2]).write_text(str(tmp))  # the marker: this writer is inside the window
        print("in window", flush=True)
        sys.stdin.readline()  # held here while the test runs the second writer
        return digest

    S.write_safetensors_hashed = paused
    store = ActivationStore.open_or_create(sys.argv[1], make_meta(), n_shards_planned=4)
    store.clean_partial()
    store.commit_shard(write_shard_file(store.path, 3, shard_tensors(75, 5)))
    print("committed", flush=True)
"""


def test_a_second_writer_is_refused_and_deletes_nothing(tmp_path):
    """The start-up race: a second writer's open and clean-up while the first writer is inside its shard write
    (temporary file written, not yet renamed). The first writer holds itself in that window, so the test cannot
    pass by missing it: the marker file and the live temporary file prove the second writer ran inside it."""
    build(tmp_path / "s")
    marker = tmp_path / "in_window"
    first = _python(
        FIRST_WRITER.replace("sys.argv[1]", repr(str(tmp_path / "s"))).replace("sys.argv[2]", repr(str(marker)))
    )
    try:
        assert first.stdout.readline().strip() == "in window"
        temp = Path(marker.read_text())
        assert temp.parent == tmp_path / "s" and temp.is_file() and f".tmp-{first.pid}-" in temp.name
        with pytest.raises(StoreLockedError, match=rf"being written by pid {first.pid}.*--wait"):
            ActivationStore.open_or_create(tmp_path / "s", make_meta(), n_shards_planned=4)
        with pytest.warns(UserWarning, match="1 of 4 planned shards are not committed"):  # shard 3: in flight
            reader = ActivationStore.open(tmp_path / "s")
        with pytest.raises(StoreLockedError):
            reader.clean_partial()
        with pytest.raises(StoreLockedError):
            reader.commit_shard(write_shard_file(tmp_path / "s", 3, shard_tensors(75, 5)))
        assert len(reader.get_rows(torch.arange(75))["seq"]) == 75  # reading needs no lock
        assert first.poll() is None and temp.is_file()  # still inside the window: all of the above ran in it
        first.stdin.write("go\n")
        first.stdin.flush()
        assert first.stdout.readline().strip() == "committed"
    finally:
        first.stdin.close()
        first.wait()
    assert first.returncode == 0
    store = ActivationStore.open(tmp_path / "s")
    assert store.complete and store.verify().ok and len(store) == 80  # the first writer's shard was not lost
    assert not temp.exists() and not [q for q in (tmp_path / "s").iterdir() if ".tmp-" in q.name]


def test_a_writer_that_waits_resumes_from_what_the_first_committed(tmp_path):
    build(tmp_path / "s", sizes=(20, 30))
    holder = _holder(tmp_path / "s")
    extra = write_shard_file(tmp_path / "s", 2, shard_tensors(50, 10))

    def finish_first_writer():
        # the first writer commits shard 2 and exits; the second must see that commit
        first = ActivationStore.open(tmp_path / "s")
        first._manifest.shards[2] = extra
        from interp.store.manifest import write_manifest

        write_manifest(first.path, first._manifest)
        holder.stdin.close()

    timer = threading.Timer(0.5, finish_first_writer)
    timer.start()
    try:
        second = ActivationStore.open_or_create(tmp_path / "s", make_meta(), n_shards_planned=3, wait=120)
        assert second.missing() == [] and len(second) == 60
    finally:
        timer.join()
        holder.wait()


def test_live_processes_keep_their_temp_files_dead_ones_do_not(tmp_path):
    store = build(tmp_path / "s")
    live = _python("import sys; sys.stdin.read()")
    dead = _python("pass")
    dead.wait()
    try:
        mine = tmp_path / "s" / f".shard_00004.safetensors.tmp-{live.pid}-00000001"
        stale = tmp_path / "s" / f".shard_00005.safetensors.tmp-{dead.pid}-00000002"
        mine.write_bytes(b"x"), stale.write_bytes(b"y")
        removed = ActivationStore.open(store.path).clean_partial()
        assert removed == [stale.name] and mine.exists()
    finally:
        live.stdin.close()
        live.wait()


def test_a_kill_during_store_creation_leaves_a_folder_the_rerun_accepts(tmp_path):
    dead = _python("pass")
    dead.wait()
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / f".manifest.json.tmp-{dead.pid}-1234abcd").write_text('{"format": ')  # killed mid-write
    (folder / ".writer.lock").write_text("")
    store = ActivationStore.open_or_create(folder, make_meta(), n_shards_planned=1)
    store.commit_shard(write_shard_file(folder, 0, shard_tensors(0, 8)))
    assert sorted(p.name for p in folder.iterdir()) == [".writer.lock", "manifest.json", "shard_00000.safetensors"]
    other = tmp_path / "user_folder"
    other.mkdir()
    (other / "notes.txt").write_text("a user's file")
    with pytest.raises(FileExistsError, match="not empty"):
        ActivationStore.create(other, make_meta())
    assert [p.name for p in other.iterdir()] == ["notes.txt"]  # refused before writing anything


WRITER = """
    import os, sys, time
    from interp.store import ActivationStore, write_shard_file
    from tests.interp.store.store_helpers import make_meta, shard_tensors
    sizes = [int(n) for n in sys.argv[2].split(",")]
    store = ActivationStore.open_or_create(sys.argv[1], make_meta(), n_shards_planned=len(sizes))
    store.clean_partial()
    for i in store.missing():
        info = write_shard_file(store.path, i, shard_tensors(sum(sizes[:i]), sizes[i]))
        store.commit_shard(info)
        print(i, flush=True)
"""


@pytest.mark.slow
def test_a_writer_killed_with_sigkill_resumes_with_no_row_lost_or_doubled(tmp_path):
    sizes = [30] * 8
    code = WRITER.replace("sys.argv[1]", repr(str(tmp_path / "s"))).replace(
        "sys.argv[2]", repr(",".join(map(str, sizes)))
    )
    p = _python(code)
    assert p.stdout.readline().strip() == "0"
    p.stdout.readline()
    os.kill(p.pid, signal.SIGKILL)  # mid-run: somewhere in a shard write, a rename or a manifest rewrite
    p.wait()
    store = ActivationStore.open_or_create(tmp_path / "s", make_meta(), n_shards_planned=len(sizes))  # the rerun
    store.clean_partial()
    for i in store.missing():
        store.commit_shard(write_shard_file(store.path, i, shard_tensors(sum(sizes[:i]), sizes[i])))
    store.close()
    store = ActivationStore.open(tmp_path / "s")
    assert store.complete and store.verify().ok
    want = concat([shard_tensors(sum(sizes[:i]), n) for i, n in enumerate(sizes)])
    got = store.get_rows(slice(None))
    assert all(torch.equal(got[k], want[k]) for k in want)
    assert not [q for q in (tmp_path / "s").iterdir() if ".tmp-" in q.name]


def test_the_holder_is_named_even_after_a_longer_record_was_overwritten(tmp_path):
    from interp.store.lock import _holder as holder_text

    path = tmp_path / ".writer.lock"
    short = json.dumps({"pid": 7, "host": "h", "since": 0.5})
    path.write_text(short + '789, "host": "an-older-longer-record", "since": 1.25}')
    assert holder_text(path).startswith("pid 7 on h, since 1970-01-01")
    path.write_text("not json")
    assert holder_text(path) == "another process"
