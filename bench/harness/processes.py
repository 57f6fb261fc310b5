"""The processes a benchmark starts: the broker, `geops app`, `geops distributor`.

Every process runs in a process group of its own, its output in a log file, and is registered
with ``Processes``, whose ``stop_all`` (called from a ``finally``, so also on Ctrl-C, SIGTERM
and failures) stops them in reverse order, the broker last. `geops bench live`, `churn`,
`delivery`, `scale` and `paper` all start their processes here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.harness.errors import BenchFailed
from bench.harness.reap import reap, stop_group
from kafkaio import broker

GEOPS = [sys.executable, "-m", "cli.main"]
REPO = Path(__file__).resolve().parents[2]
MARKER = "GEOPS_BENCH_PROCESS"  # environment variable marking a started process's tree


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path
    marker: bytes  # ``MARKER=<id>\0``, in the environment of it and its descendants


class Processes:
    """Everything the benchmark started, stopped in reverse order by ``stop_all``."""

    def __init__(self) -> None:
        self.procs: list[Proc] = []
        self.started: list[Proc] = []  # every process ever started, stopped ones too
        self.broker_state: Path | None = None
        self.broker_pid: int | None = None

    def start(self, name: str, argv: list[str], env: Mapping[str, str], log: Path) -> Proc:
        """Start ``argv`` in the repository with ``env``, its output (both streams) in
        ``log``."""
        log.parent.mkdir(parents=True, exist_ok=True)
        marker = uuid.uuid4().hex  # inherited by its children, found again by ``stop``
        with open(log, "w") as fh:
            popen = subprocess.Popen(argv, env={**env, MARKER: marker}, stdout=fh,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=REPO, start_new_session=True)
        proc = Proc(name, popen, log, f"{MARKER}={marker}\0".encode())
        self.procs.append(proc)
        self.started.append(proc)
        return proc

    def stop(self, proc: Proc, grace: float = 20.0, reap_grace: float = 10.0) -> int | None:
        """SIGTERM the process group, then SIGKILL what is left, then (after ``reap_grace``)
        the process's descendants outside its group; the exit code."""
        p = proc.popen
        stop_group(p, grace)  # the JVM and Python workers of `geops app`
        reap(proc.marker, reap_grace)  # PySpark's daemon and workers, in a group of their own
        if proc in self.procs:
            self.procs.remove(proc)
        return p.returncode

    def kill9(self, proc: Proc) -> None:
        """``kill -9`` a process's whole group, and its descendants outside the group, as a
        crash would: no shutdown hook runs."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.popen.pid, signal.SIGKILL)
        proc.popen.wait()
        reap(proc.marker, grace=0.0)
        if proc in self.procs:
            self.procs.remove(proc)

    def start_broker(self, state: Path) -> str:
        """A local broker keeping its data under ``state``; its address."""
        info, _ = broker.start(state, port=0)
        self.broker_state, self.broker_pid = state, info.pid
        return info.address

    def check_broker(self) -> None:
        """BenchFailed, pointing at its log, when the broker this benchmark started is gone:
        every client would otherwise retry up to the outage limit before anything failed."""
        if self.broker_state is not None and broker.status(self.broker_state) is None:
            raise BenchFailed(f"the broker (pid {self.broker_pid}) exited; see "
                              f"{broker.log_file(self.broker_state)}")

    def stop_all(self) -> None:
        """Every process still registered, newest first, then the broker."""
        for proc in reversed(list(self.procs)):
            with contextlib.suppress(Exception):
                self.stop(proc)
        if self.broker_state is not None:
            with contextlib.suppress(Exception):
                broker.stop(self.broker_state)
            self.broker_state = self.broker_pid = None
