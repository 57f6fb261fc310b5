"""Progress on stderr: a one-line bar (only on a terminal), and timestamped log lines."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    """Call ``update(done)`` as work proceeds and ``close()`` at the end."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None,
                 every: float = 0.1):
        self.total = total
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.every = every
        self._t0 = time.monotonic()
        self._last = 0.0

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < self.every and done < self.total:
            return
        self._last = now
        frac = done / self.total if self.total else 1.0
        bar = "#" * int(30 * frac)
        rate = done / max(now - self._t0, 1e-9)
        self.stream.write(f"\r{self.label} [{bar:<30}] {done}/{self.total} {rate:,.0f}/s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def elapsed_log(command: str, width: int = 6, digits: int = 1) -> Callable[[str], None]:
    """A logger of ``<command>: [<seconds since this call>s] <message>`` lines on stderr."""
    t0 = time.monotonic()

    def log(message: str) -> None:
        print(f"{command}: [{time.monotonic() - t0:{width}.{digits}f}s] {message}",
              file=sys.stderr, flush=True)

    return log
