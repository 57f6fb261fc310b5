"""Ending what a benchmark started, children that left its process group included.

Each process a benchmark starts runs in a session of its own; ``stop_group`` ends that process
group (the JVM and Python workers of `geops app`). PySpark's Python daemon and workers make a
process group of their own and leave only when they notice their JVM is gone; an app stopped
during its start-up (the executors already scanning the subscriptions) leaves them to that.
Benchmarks mark each process they start with a variable in its environment, which its children
inherit, and ``reap`` finds them by it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def stop_group(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM the process group ``proc`` leads, wait up to ``grace`` seconds for it, then
    SIGKILL what is left of the group (children that outlived their parent)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def reap(marker: bytes, grace: float = 10.0) -> None:
    """Wait up to ``grace`` seconds for the processes whose environment holds ``marker``
    (``b"NAME=value\\0"``) to end, then SIGKILL those left."""
    deadline = time.monotonic() + grace
    while (pids := with_environ(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def with_environ(marker: bytes) -> list[int]:
    """Live processes (other than this one) whose environment holds ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes():
                    pids.append(int(entry.name))
    return pids
