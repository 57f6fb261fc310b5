"""What the chaos run keeps running and its faults disturb: the three-node broker, the Spark
cluster, the app (exactly-once), the distributor and the producer, each started (again) the way
a supervisor would."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import config
from bench.chaos.cluster import SparkCluster
from bench.harness.errors import BenchFailed
from bench.harness.processes import GEOPS, Proc, Processes
from kafkaio import broker

APP_READY = "ready: the query has started"


@dataclass
class Stack:
    """The processes of one chaos run, their environment and where they keep their state."""

    procs: Processes
    dir: Path
    broker_state: Path
    env: dict[str, str]
    cfg: config.Config
    cluster: SparkCluster
    rate: float
    base_file: Path
    app_flags: list[str] = field(default_factory=list)
    app: Proc | None = None
    distributor: Proc | None = None
    producer: Proc | None = None
    runs: dict[str, int] = field(default_factory=dict)

    @property
    def checkpoint(self) -> Path:
        return self.dir / "checkpoint"

    def _log(self, name: str) -> Path:
        self.runs[name] = self.runs.get(name, 0) + 1
        return self.dir / f"{name}-{self.runs[name]}.log"

    def start_app(self) -> Proc:
        """`geops app` in exactly-once mode on the Spark cluster, on its checkpoint."""
        self.app = self.procs.start("app", [
            *GEOPS, "app", "--master", self.cluster.master, "--workers", "2",
            "--delivery", "exactly-once", "--checkpoint", str(self.checkpoint),
            *self.app_flags], self.env, self._log("app"))
        return self.app

    def start_distributor(self) -> Proc:
        self.distributor = self.procs.start(
            "distributor", [*GEOPS, "distributor"], self.env, self._log("distributor"))
        return self.distributor

    def start_producer(self) -> Proc:
        self.producer = self.procs.start(
            "producer", [*GEOPS[:-2], "-m", "bench.chaos.producer", str(self.base_file),
                         "--rate", str(self.rate)], self.env, self._log("producer"))
        return self.producer

    def wait_app_ready(self, timeout: float = 300.0) -> None:
        """Until the app's log says its query takes publications."""
        deadline = time.monotonic() + timeout
        while APP_READY not in self.app.log.read_text(errors="replace"):
            if self.app.popen.poll() is not None:
                raise BenchFailed(f"the app exited with {self.app.popen.returncode} while "
                                  f"starting; see {self.app.log}")
            if time.monotonic() > deadline:
                raise BenchFailed(f"the app was not ready within {timeout:.0f} s; "
                                  f"see {self.app.log}")
            time.sleep(0.5)

    def check_alive(self) -> None:
        """BenchFailed naming a process that exited by itself (no fault stops one for good)."""
        for proc in (self.app, self.distributor, self.producer, *self.cluster.workers,
                     self.cluster.master_proc):
            if proc is not None and proc.popen.poll() is not None:
                raise BenchFailed(f"{proc.name} exited with {proc.popen.returncode}; "
                                  f"see {proc.log}")

    def broker_info(self) -> broker.BrokerInfo:
        info = broker.status(self.broker_state)
        if info is None:
            raise BenchFailed(f"the broker is gone; see {broker.log_file(self.broker_state)}")
        return info
