"""A benchmark stopped by SIGTERM stops what it started, also when a second SIGTERM arrives
while it stops (``timeout`` forwards its own to a command ``pkill`` already reached)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import time
from cli.common import sigterm_as_interrupt
with sigterm_as_interrupt():
    try:
        print("ready", flush=True)
        time.sleep(60)
    finally:
        print("stopping", flush=True)
        time.sleep(1.5)
        print("stopped", flush=True)
"""


def _wait_line(proc: subprocess.Popen, want: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == want:
            return
        assert line, f"the child ended before printing {want!r}"
    raise AssertionError(f"no {want!r} within 30 s")


def test_a_second_sigterm_does_not_interrupt_the_stopping() -> None:
    proc = subprocess.Popen([sys.executable, "-c", CHILD], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_line(proc, "ready")
        proc.send_signal(signal.SIGTERM)
        _wait_line(proc, "stopping")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert "stopped" in out.split(), err
    assert "KeyboardInterrupt: SIGTERM" in err  # the first one stopped the block as Ctrl-C does
