"""What the chaos run keeps running and its faults disturb: the three-node broker, the Spark
cluster, the app (exactly-once), its standby (``geops app --standby``) when the run has one,
the distributor and the producer, each started (again) the way a supervisor would."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import config
from bench.chaos.cluster import SparkCluster, free_port
from bench.harness.errors import BenchFailed
from bench.harness.processes import GEOPS, Proc, Processes
from config.exitcodes import EXIT_REPLACED
from kafkaio import broker

APP_READY = "ready: the query has started"
STANDBY_READY = "standby: ready to take over"
TOOK_LEASE = "took the lease of app"
HOLDS_LEASE = "holding the lease of app"
TAKEOVER_TIMEOUT_S = 120.0
# each app process of a run with a standby: at most two executors of one core, so that the
# active app and its standby each have one on every worker
APP_SPARK_CONF = {"spark.cores.max": "2", "spark.executor.cores": "1"}


def wait_for_line(proc: Proc, line: str, what: str, timeout: float) -> float:
    """Seconds until ``line`` is in ``proc``'s log; BenchFailed when it exits or times out."""
    t0 = time.monotonic()
    while line not in proc.log.read_text(errors="replace"):
        if proc.popen.poll() is not None:
            raise BenchFailed(f"{proc.log.stem} exited with {proc.popen.returncode} before "
                              f"{what}; see {proc.log}")
        if time.monotonic() - t0 > timeout:
            raise BenchFailed(f"{proc.log.stem}: not {what} within {timeout:.0f} s; "
                              f"see {proc.log}")
        time.sleep(0.2)
    return time.monotonic() - t0


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
    with_standby: bool = False
    app: Proc | None = None
    standby: Proc | None = None
    ports: dict[int, int] = field(default_factory=dict)  # app process pid -> its driver port
    distributor: Proc | None = None
    producer: Proc | None = None
    runs: dict[str, int] = field(default_factory=dict)

    @property
    def checkpoint(self) -> Path:
        return self.dir / "checkpoint"

    def _log(self, name: str) -> Path:
        self.runs[name] = self.runs.get(name, 0) + 1
        return self.dir / f"{name}-{self.runs[name]}.log"

    def start_app(self, standby: bool = False) -> Proc:
        """`geops app` in exactly-once mode on the Spark cluster, on its checkpoint; with
        ``standby``, as the standby (``--standby``) of the app. In a run with a standby each
        app process has a driver port of its own (to tell its executors apart) and at most
        ``APP_SPARK_CONF``'s executors."""
        env = self.env
        port = free_port()
        if self.with_standby:
            conf = self.dir / f"spark-{port}.toml"
            conf.write_text("[spark.conf]\n" + "".join(
                f'"{k}" = "{v}"\n' for k, v in {**APP_SPARK_CONF,
                                                 "spark.driver.port": str(port)}.items()))
            env = {**env, "GEOPS_CONFIG": str(conf)}
        proc = self.procs.start("app", [
            *GEOPS, "app", "--master", self.cluster.master, "--workers", "2",
            "--delivery", "exactly-once", "--checkpoint", str(self.checkpoint),
            *(["--standby"] if standby else []), *self.app_flags], env, self._log("app"))
        self.ports[proc.popen.pid] = port
        if standby:
            self.standby = proc
        else:
            self.app = proc
        return proc

    def driver_port(self, proc: Proc) -> int | None:
        """The driver port of an app process of a run with a standby (None without one)."""
        return self.ports.get(proc.popen.pid) if self.with_standby else None

    def wait_standby_ready(self, timeout: float = 300.0) -> float:
        """Seconds until the standby's log says it is ready to take over."""
        return wait_for_line(self.standby, STANDBY_READY, "ready to take over", timeout)

    def take_over(self) -> tuple[Proc, float]:
        """After the active app's driver died: the standby becomes the app once its log says it
        took the lease. (the process, the seconds waited)"""
        taker, self.standby = self.standby, None
        waited = wait_for_line(taker, TOOK_LEASE, "taking the lease", TAKEOVER_TIMEOUT_S)
        self.app = taker
        return taker, waited

    def handed_over(self, next_standby: bool = True) -> str | None:
        """When the standby took the lease and the app stopped, or will (exit code 7: a broker
        fault kept its heartbeats from Kafka for the lease time): the standby becomes the app
        and the stopped app is started again as the next standby, as after a driver kill; a
        line saying so (``next_standby`` false: none is started, as while the run drains). None
        when nothing was handed over."""
        if self.standby is None or (
                self.app.popen.poll() != EXIT_REPLACED
                and TOOK_LEASE not in self.standby.log.read_text(errors="replace")):
            return None
        replaced = self.app
        self.procs.stop(replaced, grace=5)
        taker, _ = self.take_over()
        note = (f"{replaced.log.stem} replaced: {taker.log.stem} (standby) took the lease and "
                "answers")
        if not next_standby:
            return note
        self.start_app(standby=True)
        return f"{note}, {self.standby.log.stem} started as the next standby"

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
        wait_for_line(self.app, APP_READY, "ready", timeout)

    def check_alive(self) -> None:
        """BenchFailed naming a process that exited by itself (no fault stops one for good)."""
        for proc in (self.app, self.standby, self.distributor, self.producer,
                     *self.cluster.workers,
                     self.cluster.master_proc):
            if proc is not None and proc.popen.poll() is not None:
                raise BenchFailed(f"{proc.name} exited with {proc.popen.returncode}; "
                                  f"see {proc.log}")

    def broker_info(self) -> broker.BrokerInfo:
        info = broker.status(self.broker_state)
        if info is None:
            raise BenchFailed(f"the broker is gone; see {broker.log_file(self.broker_state)}")
        return info
