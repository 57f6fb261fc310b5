"""The environment of a benchmark of the running app: a broker (its own or a given one), a
work directory, and every app deployed and process started in them, all stopped on the way
out."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.harness.deployment import AppOptions, Session
from bench.harness.processes import Processes
from bench.harness.publisher import Log
from geops.workload import Workload


@dataclass(frozen=True, kw_only=True)
class BenchEnv:
    """What every benchmark of the running app chooses: the app, the broker (own or given)
    and its client settings, the work directory, and the command recorded in the results."""

    app: AppOptions = field(default_factory=AppOptions)
    bootstrap_servers: str | None = None
    kafka_properties: Mapping[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    keep_workdir: bool = False
    command: tuple[str, ...] = ()

    @property
    def monitor_interval(self) -> float:
        """Seconds between the monitor's lag samples."""
        return 1.0


class Bench:
    """The broker (own or given), the work directory and every process; a context manager
    that stops everything on the way out, also on Ctrl-C or failure.

    ``spec``: the spec of a benchmark, built on a BenchEnv."""

    def __init__(self, spec: BenchEnv, log: Log):
        self.spec, self.log = spec, log
        self.procs = Processes()
        self.sessions: list[Session] = []
        self._tmp = spec.workdir is None
        self.workdir = Path(spec.workdir or tempfile.mkdtemp(prefix="geops-bench-live-"))

    def __enter__(self) -> Bench:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.spec.bootstrap_servers:
            self.address = self.spec.bootstrap_servers
            self.log(f"using the broker at {self.address}")
        else:
            self.address = self.procs.start_broker(self.workdir / "broker-state")
            self.log(f"local broker on {self.address} (work dir {self.workdir})")
        return self

    def __exit__(self, *exc: object) -> None:
        for s in self.sessions:
            with contextlib.suppress(Exception):
                s.close(delete_topics=bool(self.spec.bootstrap_servers))
        self.procs.stop_all()
        if self._tmp and not self.spec.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.log("everything the benchmark started is stopped")

    def session(self, label: str, workload: Workload, trigger: str | None = None,
                memory: bool = False, app: AppOptions | None = None,
                loads: bool = False) -> Session:
        """A new session of ``app`` (default: the spec's), with ``trigger`` if given; its
        monitor keeps the processes' memory (``memory``) and the partition loads (``loads``)."""
        app = app or self.spec.app
        if trigger is not None:
            app = AppOptions(**{**app.__dict__, "trigger": trigger})
        fences = None if workload.detect is None else (workload.detect,
                                                       np.round(workload.distance_m, 1))
        s = Session(self.procs, self.address, self.workdir, label, workload.subscriptions, app,
                    self.spec.kafka_properties, self.log,
                    monitor_interval=self.spec.monitor_interval,
                    memory=memory, loads=loads, fences=fences)
        self.sessions.append(s)
        return s

    def end(self, s: Session) -> None:
        s.close(delete_topics=True)
        self.sessions.remove(s)
