"""Expected failures become one `error: ...` line and exit status 2; nothing is written before the checks.

Every `interp` command runs under `run_guarded` (the root group installs it, so family commands get it
too): an expected failure (bad input, missing file, a store written with other settings, no CUDA,
permission denied, disk full) prints one line naming the problem and the fix, a bug prints its
traceback, and `--debug` (anywhere on the command line) or `INTERP_DEBUG=1` shows the traceback of
an expected failure as well.

Library code raises `ValueError` / `FileNotFoundError` (or `CliError`) with a message that says what
to do; commands check their output location with `check_out_dir` before loading anything.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

EXIT_USAGE = 2
"""Exit status of every expected failure (click uses 2 for usage errors too)."""


DISK_FULL_TEXTS = ("No space left on device", "(os error 28)", "Disk quota exceeded", "(os error 122)")
"""How libraries that wrap the OS error in their own type (safetensors' SafetensorError) report a full disk."""


def debug_from_env() -> bool:
    """`INTERP_DEBUG=1` turns `--debug` on for every command."""
    return os.environ.get("INTERP_DEBUG", "") not in ("", "0")


_DEBUG = {"on": debug_from_env()}


class CliError(ValueError):
    """An expected failure whose message names the problem and the fix."""


def set_debug(on: bool) -> None:
    """Show tracebacks of expected failures too (the `--debug` flag)."""
    _DEBUG["on"] = bool(on)


def debug_enabled() -> bool:
    return _DEBUG["on"]


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


TEMP_FOLDERS = {".features.partial": "features", "checkpoint.tmp": "checkpoint", "checkpoint.old": "checkpoint"}
"""Temporary folders the writers fill and rename into place -> the name the user will see."""


def user_path(filename: str | os.PathLike) -> str:
    """The path the user asked for in place of a writer's temporary one: `.x.json.tmp-123-ab` -> `x.json`,
    `out/.features.partial/3.html` -> `out/features/3.html`, so a message names the user's --out."""
    from interp.store.atomic import TEMP_TAG, is_temp_name

    parts = list(Path(filename).parts)
    for i, part in enumerate(parts):
        if is_temp_name(part):
            parts[i] = part[1:].split(TEMP_TAG)[0]
        parts[i] = TEMP_FOLDERS.get(parts[i], parts[i])
    return str(Path(*parts)) if parts else str(filename)


def describe(exc: BaseException) -> str | None:
    """The one-line message of an expected failure, or None for a bug (which keeps its traceback)."""
    name = type(exc).__name__
    text = str(exc)
    if name == "OutOfMemoryError" or "CUDA out of memory" in text:
        return "the GPU ran out of memory: lower --batch-size (or the sizes), or use --device cpu"
    if isinstance(exc, (AssertionError, RuntimeError)) and (
        "not compiled with CUDA" in text or "no NVIDIA driver" in text or "Found no NVIDIA" in text
    ):
        return "this machine has no usable CUDA (torch built without CUDA, or no GPU); use --device cpu or auto"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        where = f" writing {user_path(exc.filename)}" if exc.filename else ""
        return f"disk full{where}: free some space or choose an --out on another disk"
    if not isinstance(exc, OSError) and any(s in text for s in DISK_FULL_TEXTS):  # safetensors' own error type
        return "disk full: free some space or choose an --out on another disk"
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return f"read-only file system: cannot write {exc.filename or 'the output'}; choose another --out"
    if isinstance(exc, PermissionError):
        where = user_path(exc.filename) if exc.filename else text
        return f"permission denied: {where}; choose a location you can write (--out) or read"
    if isinstance(exc, (IsADirectoryError, NotADirectoryError)) and exc.filename:
        kind = "a folder" if isinstance(exc, IsADirectoryError) else "not a folder"
        # an atomic write fails at os.replace(tmp, target): the target (filename2) is the path the user gave
        where = user_path(exc.filename2 or exc.filename)
        return f"{where} is {kind}: {exc.strerror or text}; check the path"
    if isinstance(exc, ImportError) and "install" in text:  # an optional dependency, with its install line
        return _one_line(text)
    if isinstance(exc, (ValueError, FileNotFoundError, FileExistsError)):
        if isinstance(exc, OSError) and exc.errno is not None and exc.filename:  # raised by the OS, not by us
            return f"{exc.strerror or 'cannot use'}: {user_path(exc.filename)}; check the path"
        return _one_line(text) or name
    return None


def fail(problem: BaseException | str) -> NoReturn:
    """Print `error: <problem>` on stderr and exit with status 2 (a traceback too with --debug)."""
    import typer

    if isinstance(problem, BaseException) and debug_enabled():
        import traceback

        traceback.print_exception(problem, file=sys.stderr)
    message = problem if isinstance(problem, str) else (describe(problem) or _one_line(str(problem)))
    typer.echo(f"error: {_one_line(message)}", err=True)
    raise typer.Exit(EXIT_USAGE)


def run_guarded(fn: Callable[[], Any]) -> Any:
    """Run a command body; expected failures end as `fail(...)`, bugs propagate with their traceback."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - sorted below
        if describe(exc) is None:
            raise
        fail(exc)


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_out_dir(out: str | os.PathLike, option: str = "--out") -> Path:
    """Check, without creating anything, that `out` can be (or is) a writable folder; returns it as a Path.

    Refused: a file where the folder should be, a file in the way on the path, a location the user
    cannot write. Run it before loading models or data, so a refused run leaves the disk as it was.
    """
    path = Path(out).expanduser()
    if path.exists() and not path.is_dir():
        raise CliError(f"{option} {path} is a file; {option} takes a folder (the command names the files inside it)")
    base = _nearest_existing(path.absolute())
    if not base.is_dir():
        raise CliError(f"{option} {path}: {base} is a file, so no folder can be made under it; choose another {option}")
    if not os.access(base, os.W_OK | os.X_OK):
        raise CliError(f"permission denied: cannot write into {base}; choose another {option} you can write")
    return path


def check_out_file(out: str | os.PathLike, option: str = "--out-file") -> Path:
    """Check, without creating anything, that a file can be written at `out`: not a folder, a folder on its
    path that is not a file, writable. Run it before loading anything, as `check_out_dir`."""
    path = Path(out).expanduser()
    if path.is_dir():
        raise CliError(f"{option} {path} is a folder; {option} takes a file name, e.g. {path / 'out.html'}")
    base = _nearest_existing(path.absolute().parent)
    if not base.is_dir():
        raise CliError(f"{option} {path}: {base} is a file, so no folder can be made under it; choose another {option}")
    if not os.access(base, os.W_OK | os.X_OK):
        raise CliError(f"permission denied: cannot write into {base}; choose another {option} you can write")
    return path


def refuse_existing(folder: Path, names: list[str], overwrite: bool) -> None:
    """Refuse to replace finished outputs in `folder` unless `--overwrite` was given."""
    if overwrite:
        return
    found = [n for n in names if (Path(folder) / n).exists()]
    if found:
        raise CliError(f"{Path(folder) / found[0]} exists: pass --overwrite to replace it, or choose another --out")
