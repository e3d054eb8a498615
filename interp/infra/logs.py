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
    >>> with progress(total=4, desc="tasks") as bar:
    ...     bar.update(4)
"""

from __future__ import annotations

import logging
import os
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
    if not progress_enabled():
        quiet_third_party_bars()
    _STATE["configured"] = True


def quiet_third_party_bars() -> None:
    """No carriage-return bars from huggingface_hub and transformers (weight loading, GGUF conversion, downloads)
    where ours are off: set before they are imported, their own switch after."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


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


class progress:
    """A tqdm bar on a terminal, one log line when the stage starts and one when it ends elsewhere.

    Used as tqdm is: `for x in progress(xs, desc=...)`, or `with progress(total=n, desc=...) as bar: bar.update()`,
    with `set_postfix(...)` (shown in the bar, or in the end line). `enabled=False` shows nothing.
    """

    def __init__(
        self,
        iterable: Iterable[T] | None = None,
        desc: str = "",
        total: int | None = None,
        enabled: bool = True,
        logger: str = "interp",
        **tqdm_kw: Any,
    ) -> None:
        if total is None and iterable is not None:
            try:
                total = len(iterable)  # type: ignore[arg-type]
            except TypeError:
                total = None
        self.iterable, self.desc, self.total, self.n = iterable, desc, total, 0
        self.postfix: dict[str, Any] = {}
        self.log = logging.getLogger(logger)
        self.lines = enabled and bool(desc) and not progress_enabled()
        self.bar = None
        if enabled and progress_enabled():
            from tqdm.auto import tqdm

            tqdm_kw.setdefault("dynamic_ncols", True)
            self.bar = tqdm(iterable, desc=desc, total=total, file=sys.stderr, **tqdm_kw)
        elif self.lines:
            self.log.info("%s: %s", desc, f"{total} steps" if total is not None else "started")
        self.t0 = time.perf_counter()
        self.closed = False

    def __iter__(self) -> Iterator[Any]:
        source = self.bar if self.bar is not None else self.iterable
        try:
            for item in source:  # type: ignore[union-attr]
                if self.bar is None:
                    self.n += 1
                yield item
        finally:
            self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.bar is not None:
            self.bar.update(n)

    def set_postfix(self, **kw: Any) -> None:
        self.postfix = kw
        if self.bar is not None:
            self.bar.set_postfix(**kw)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.bar is not None:
            self.bar.close()
        elif self.lines:
            extra = "".join(f" {k}={v}" for k, v in self.postfix.items())
            of = f"/{self.total}" if self.total is not None else ""
            self.log.info("%s: done, %d%s in %.1f s%s", self.desc, self.n, of, time.perf_counter() - self.t0, extra)

    def __enter__(self) -> progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
