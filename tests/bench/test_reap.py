"""Stopping a benchmark's process also ends its descendants that left its process group, as
PySpark's daemon and workers do (``bench.harness.reap``, ``bench.harness.processes.Processes``)."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from bench.harness.errors import BenchFailed
from bench.harness.processes import Processes
from bench.harness.reap import reap, with_environ
from config.embedded import pid_alive

SPAWN = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         start_new_session=True)
print(child.pid, flush=True)
time.sleep(120)
"""


def test_stop_ends_a_descendant_in_a_session_of_its_own(tmp_path):
    procs = Processes()
    log = tmp_path / "p.log"
    proc = procs.start("spawner", [sys.executable, "-c", SPAWN], dict(os.environ), log)
    try:
        deadline = time.monotonic() + 30
        while not log.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(log.read_text().split()[0])
        assert os.getpgid(child) != os.getpgid(proc.popen.pid)  # out of reach of killpg
        assert child in with_environ(proc.marker)
        procs.stop(proc, grace=5, reap_grace=0.5)
        # A killed process loses its environment while it exits, a moment before it is a
        # zombie or gone: wait for both.
        deadline = time.monotonic() + 5
        while (with_environ(proc.marker) or _running(child)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert with_environ(proc.marker) == []
        assert not _running(child)
    finally:
        procs.stop_all()
        reap(proc.marker, 0)  # whatever a failure left

def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.integration
def test_a_broker_gone_fails_the_benchmark_at_once_naming_its_log(tmp_path):
    """A benchmark whose broker dies stops at its next check instead of waiting out
    the clients' outage limit (its drain and warm-up waits are minutes long)."""
    procs = Processes()
    procs.start_broker(tmp_path / "state")
    try:
        procs.check_broker()  # running: nothing to say
        os.kill(procs.broker_pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(procs.broker_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(BenchFailed, match=r"broker \(pid \d+\) exited; see .*server\.log"):
            procs.check_broker()
    finally:
        procs.stop_all()
