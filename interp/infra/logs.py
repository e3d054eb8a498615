"""Logging and progress for every `interp` command: one handler on stderr, bars only on a terminal.

`interp -v ...` shows debug lines, `interp --quiet ...` only warnings and errors (`setup`). Library code logs
through `logging.getLogger(__name__)` (the loggers under `interp`, `sae`, `circuits`, `attribution`) and warns
through `warnings.warn`, which `setup` routes into the same handler. Without `setup` (a library user),
warnings show as Python shows them and info lines stay silent.

`progress(iterable, desc=..., total=...)` is a tqdm bar when stderr is a terminal and progress is on; elsewhere
(a log file, CI) it writes one line when the stage starts and one when it ends, never a carriage-return
redraw. `progress_enabled()` says whether bars may be drawn at all (off under `--quiet`).

    >>> for x in progress(range(3), desc="demo"):  # not a TTY here: no bar, two log lines at most
    ...     pass
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

LOGGERS = ("interp", "sae", "circuits", "attribution", "py.warnings")
"""The toolkit's loggers (and the one `logging.captureWarnings` writes to) that `setup` configures."""

QUIET, NORMAL, VERBOSE = -1, 0, 1
_STATE = {"verbosity": NORMAL, "configured": False}


class _Stderr(logging.StreamHandler):
    """A handler writing to the current `sys.stderr` (test runners and notebooks swap it)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> Any:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


class _Format(logging.Formatter):
    """`warning: ...` / `error: ...` prefixes as the CLI's error lines have; info and debug lines plain."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.name == "py.warnings":  # "path:line: Category: message\n  source line": keep the message
            text = _warning_text(text)
        if record.levelno >= logging.ERROR:
            return f"error: {text}"
        if record.levelno >= logging.WARNING:
            return f"warning: {text}"
        return text


def _warning_text(formatted: str) -> str:
    first = formatted.strip().splitlines()[0] if formatted.strip() else formatted
    for category in ("FutureWarning: ", "DeprecationWarning: ", "UserWarning: ", "RuntimeWarning: ", "Warning: "):
        if category in first:
            return first.split(category, 1)[1]
    return first


def setup(verbosity: int = NORMAL) -> None:
    """Configure the toolkit's loggers for a command: QUIET (-1) warnings and errors, NORMAL (0) info too,
    VERBOSE (1) debug too. Python warnings go through the same handler. Safe to call again."""
    _STATE["verbosity"] = verbosity
    level = logging.WARNING if verbosity <= QUIET else logging.DEBUG if verbosity >= VERBOSE else logging.INFO
    handler = next((h for h in logging.getLogger("interp").handlers if isinstance(h, _Stderr)), None)
    if handler is None:
        handler = _Stderr()
        handler.setFormatter(_Format())
    for name in LOGGERS:
        log = logging.getLogger(name)
        log.setLevel(level)
        if handler not in log.handlers:
            log.addHandler(handler)
    logging.captureWarnings(True)
    _STATE["configured"] = True


def ensure() -> None:
    """`setup()` unless a command already called it (a family's app run on its own, as tests do)."""
    if not _STATE["configured"]:
        setup()


def verbosity() -> int:
    """The verbosity `setup` was given (NORMAL when it was not called)."""
    return _STATE["verbosity"]


def is_tty(stream: Any = None) -> bool:
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or stand-in stream
        return False


def progress_enabled(stream: Any = None) -> bool:
    """Whether a progress bar may be drawn: stderr is a terminal and `--quiet` was not given."""
    return verbosity() > QUIET and is_tty(stream)


def progress(iterable: Iterable[T], desc: str = "", total: int | None = None, enabled: bool = True,
             logger: str = "interp", **tqdm_kw: Any) -> Iterator[T]:
    """`iterable` with a tqdm bar on a terminal; elsewhere one log line at the start and one at the end."""
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    if enabled and progress_enabled():
        from tqdm.auto import tqdm

        yield from tqdm(iterable, desc=desc, total=total, file=sys.stderr, **tqdm_kw)
        return
    log = logging.getLogger(logger)
    if enabled and desc:
        log.info("%s: %s", desc, f"{total} steps" if total is not None else "started")
    t0, n = time.perf_counter(), 0
    for n, item in enumerate(iterable, 1):
        yield item
    if enabled and desc:
        log.info("%s: done, %d%s in %.1f s", desc, n, f"/{total}" if total is not None else "", time.perf_counter() - t0)
