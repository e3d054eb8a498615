"""Every expected failure is one `error:` line, exit status 2, no traceback, nothing on disk; --debug shows it."""

import errno
import os
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from interp.cli import errors
from interp.cli.errors import check_out_dir, describe

CACHE = ["cache", "--model", "pythia-14m-init", "--ctx-len", "16", "--max-tokens", "64",
         "--hooks", "blocks.0.hook_resid_post"]


class Proc:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def interp(*args):
    """Run the CLI in this process (torch is already imported here, so this is fast)."""
    from interp.cli.main import app

    res = CliRunner().invoke(app, list(args), prog_name="interp")
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return Proc(res.exit_code, res.stdout, res.stderr)


def interp_subprocess(*args):
    return subprocess.run([sys.executable, "-m", "interp", *args], capture_output=True, text=True)


def assert_one_error(proc, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.mark.parametrize("args, needles", [
    (["--device", "gpu"], ["unknown device", "auto|cpu|cuda[:N]"]),
    (["--executor", "rayy"], ["unknown executor", "inprocess or ray"]),
    (["--model", "pythia-70m"], ["needs trained weights", "pythia-70m-init"]),
    (["--model", "pythia-15m"], ["unknown model spec", "pythia-14m"]),
    (["--ctx-len", "4096", "--max-tokens", "4096"], ["model's context of 2048"]),
    (["--data", "jsonl:/nonexistent.jsonl"], ["/nonexistent.jsonl"]),
])
def test_cache_refuses_bad_input_and_writes_nothing(tmp_path, args, needles):
    out = tmp_path / "store"
    assert_one_error(interp(*CACHE, "--out", str(out), *args), *needles)
    assert not out.exists()


def test_no_cuda_is_one_line_with_the_fix(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "store"
    assert_one_error(interp(*CACHE, "--out", str(out), "--device", "cuda"), "CUDA", "--device cpu")
    assert not out.exists()


def test_out_that_is_a_file_or_under_a_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    assert_one_error(interp(*CACHE, "--out", str(f)), "is a file", "takes a folder")
    assert_one_error(interp(*CACHE, "--out", str(f / "sub")), "is a file")
    assert f.read_text() == "x"


def test_unwritable_out_is_refused_before_work(tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(errors.os, "access", lambda p, mode: False if str(p) == str(locked) else real(p, mode))
    with pytest.raises(errors.CliError, match="permission denied"):
        check_out_dir(locked / "run")
    if os.geteuid() != 0:  # root may write anywhere: the real chmod only binds other users
        locked.chmod(0o500)
        try:
            assert_one_error(interp_subprocess(*CACHE, "--out", str(locked / "run")), "permission denied")
        finally:
            locked.chmod(0o700)
    assert list(locked.iterdir()) == []


def test_a_bad_store_is_one_line(tmp_path):
    assert_one_error(interp("inspect", str(tmp_path)), "not an activation store")
    (tmp_path / "manifest.json").write_text("{not json")
    assert_one_error(interp("inspect", str(tmp_path)), "not valid JSON")


def test_debug_shows_the_traceback_anywhere_on_the_line(tmp_path):
    for args in (["--debug", *CACHE, "--device", "gpu"], [*CACHE, "--device", "gpu", "--debug"]):
        proc = interp_subprocess(*args, "--out", str(tmp_path / "s"))
        assert proc.returncode == 2 and "Traceback" in proc.stderr and "error: unknown device" in proc.stderr
    assert "Traceback" not in interp(*CACHE, "--device", "gpu", "--out", str(tmp_path / "s")).stderr


@pytest.mark.parametrize("exc, needle", [
    (OSError(errno.ENOSPC, "No space left on device", "/data/shard_00001.safetensors"), "disk full writing /data/shard"),
    (PermissionError(errno.EACCES, "Permission denied", "/srv/out"), "permission denied: /srv/out"),
    (OSError(errno.EROFS, "Read-only file system", "/ro/x"), "read-only file system"),
    (AssertionError("Torch not compiled with CUDA enabled"), "--device cpu"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/x/y"), "/x/y; check the path"),
    (ImportError('executor="ray" needs Ray, which is not installed; run: pip install ray'), "pip install ray"),
    (ValueError("bad\n  thing"), "bad thing"),
])
def test_expected_failures_are_described(exc, needle):
    assert needle in describe(exc)


def test_bugs_keep_their_traceback():
    assert describe(KeyError("x")) is None and describe(ZeroDivisionError()) is None
    with pytest.raises(ZeroDivisionError):
        errors.run_guarded(lambda: 1 / 0)


def test_run_guarded_turns_a_real_disk_full_into_exit_2(capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")

    def write_to_a_full_disk():
        with open("/dev/full", "wb") as f:
            f.write(b"x" * 100_000)
            f.flush()

    with pytest.raises(typer.Exit) as ex:
        errors.run_guarded(write_to_a_full_disk)
    assert ex.value.exit_code == 2 and "error: disk full" in capsys.readouterr().err


@pytest.mark.parametrize("args, needles", [
    (["probe", "--model", "pythia-14m-init", "--device", "cuda", "--out", "OUT"], ["CUDA", "--device cpu"]),
    (["attribute", "run", "--method", "tracin", "--model", "pythia-14m-init", "--train", "stdlib-docs", "--queries",
      "stdlib-docs", "--device", "cuda", "--out", "OUT"], ["CUDA", "--device cpu"]),
    (["circuits", "extract", "--model", "pythia-14m-init", "--task", "quotes", "--device", "cuda", "--out", "OUT"],
     ["CUDA", "cpu"]),
    (["sae", "train", "--store", "NOSTORE", "--arch", "topk", "--out", "OUT"], ["not an activation store"]),
    (["sae", "train", "--store", "NOSTORE", "--arch", "topkk", "--out", "OUT"], ["unknown SAE architecture", "topk"]),
    (["dashboard", "--store", "NOSTORE", "--hooks", "x", "--out", "OUT"], ["not an activation store"]),
    (["probe", "--model", "no-such-model", "--out", "OUT"], ["unknown model spec"]),
])
def test_family_commands_fail_in_one_line_and_write_nothing(tmp_path, args, needles):
    import torch

    if torch.cuda.is_available() and "cuda" in args:
        pytest.skip("this machine has CUDA")
    out = tmp_path / "out"
    args = [str(out) if a == "OUT" else str(tmp_path / "nostore") if a == "NOSTORE" else a for a in args]
    assert_one_error(interp(*args), *needles)
    assert not out.exists() and not (tmp_path / "nostore").exists()


def test_cache_overwrite_and_no_resume(tmp_path):
    from interp.store import ActivationStore

    out = str(tmp_path / "s")
    assert interp(*CACHE, "--out", out).returncode == 0
    assert_one_error(interp(*CACHE, "--out", out, "--model", "pythia-31m-init"), "other settings", "--overwrite")
    assert_one_error(interp(*CACHE, "--out", out, "--no-resume"), "--overwrite")
    assert ActivationStore.open(out).meta.model == "pythia-14m-init"  # refused runs changed nothing
    assert interp(*CACHE, "--out", out, "--model", "pythia-31m-init", "--overwrite").returncode == 0
    st = ActivationStore.open(out)
    assert st.meta.model == "pythia-31m-init" and st.verify().ok and len(st) == 64
