"""Progress for long loops: a tqdm bar on a terminal, one plain line every N steps otherwise.

Logs and CI captures should not fill with carriage-return bar redraws, so the bar appears only when
stderr is a TTY; elsewhere `every` steps (default: a tenth of the total) print one line
`<desc>: step i/total (p%) k=v ...` to stderr.
"""

from __future__ import annotations

import sys
from typing import Any


class Progress:
    """`update()` / `set_postfix()` / `close()` like tqdm's, TTY-aware."""

    def __init__(self, total: int, desc: str, initial: int = 0, enabled: bool = True, every: int | None = None,
                 stream: Any = None):
        self.total, self.desc, self.n = total, desc, initial
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.every = every or max(1, total // 10)
        self.postfix: dict[str, Any] = {}
        self.bar = None
        from interp.infra import logs

        self.enabled = enabled = enabled and logs.verbosity() > logs.QUIET  # `interp --quiet`: no progress at all
        if enabled and logs.progress_enabled(self.stream):
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=desc, file=self.stream)

    def set_postfix(self, **kw: Any) -> None:
        self.postfix = kw
        if self.bar is not None:
            self.bar.set_postfix(**kw)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.enabled and (self.n % self.every == 0 or self.n == self.total):
            extra = " ".join(f"{k}={v}" for k, v in self.postfix.items())
            print(f"{self.desc}: step {self.n}/{self.total} ({100 * self.n // max(self.total, 1)}%) {extra}".rstrip(),
                  file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
