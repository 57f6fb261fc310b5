"""One app of a benchmark on topics of its own: its options and environment, the
subscriptions loaded, the app (and the distributor) started through
``bench.harness.processes``, the monitor following them."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import config
from bench.harness.encoding import match_event_time
from bench.harness.errors import BenchFailed
from bench.harness.monitor import Monitor, Sample
from bench.harness.processes import GEOPS, Proc, Processes
from bench.harness.procfs import (
    cpu_seconds,
    descendants,
    memory_kb,
    process_parents,
    tree_bytes,
    tree_memory,
)
from bench.harness.publisher import Log, Publisher, now_ms
from config import TOPICS
from kafkaio.offsets import EndOffsets, read_to_end
from kafkaio.sender import Sender, produce_records
from kafkaio.topics import create_topics, drop_topics
from schemas import codec
from schemas.assignment import command_fields
from schemas.codec import HEADER_LEN
from schemas.records import subscription_records


@dataclass(frozen=True)
class AppOptions:
    strategy: str = "sPIS"
    join: str = "STAL"
    workers: int = 2
    partitions: int = 64
    partitioner: str = "kdbtree"
    trigger: str = "0s"  # the app's default
    master: str | None = None
    delivery: str | None = None  # the app's --delivery; None: its configured default
    mode: str | None = None      # the app's --mode; None: its configured default

    def argv(self, checkpoint: Path) -> list[str]:
        return [*GEOPS, "app", "--master", self.master or f"local[{self.workers}]",
                "--workers", str(self.workers), "--strategy", self.strategy, "--join", self.join,
                "--partitions", str(self.partitions), "--partitioner", self.partitioner,
                "--trigger", self.trigger, "--checkpoint", str(checkpoint),
                *(["--delivery", self.delivery] if self.delivery else []),
                *(["--mode", self.mode] if self.mode else [])]


def session_env(base: Mapping[str, str], address: str, state: Path, prefix: str,
                kafka_properties: Mapping[str, str]) -> dict[str, str]:
    """Environment of every process of a session: its broker, state dir, topics and app id."""
    env = {k: v for k, v in base.items()
           if not (k.startswith("GEOPS_") and k not in ("GEOPS_CONFIG",))}
    env.update({"GEOPS_BOOTSTRAP_SERVERS": address, "GEOPS_STATE_DIR": str(state),
                "GEOPS_APP_ID": prefix, "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable,
                "GEOPS_SPARK_UI": "off"})  # as in the runs the results were recorded with
    defaults = config.load(environ={})
    for t in TOPICS:
        env[f"GEOPS_{t.upper()}_TOPIC"] = f"{prefix}.{defaults.topic(t)}"
    for key, value in kafka_properties.items():
        env["GEOPS_KAFKA_" + key.upper().replace(".", "_")] = value
    return env


def unique_prefix(label: str) -> str:
    return f"bench-live-{label}-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}"



class Session:
    """Topics with a fresh prefix, the subscriptions loaded, the app (and optionally the
    distributor) running, the monitor following them."""

    def __init__(self, procs: Processes, address: str, workdir: Path, label: str,
                 subscriptions: Any, app: AppOptions, kafka_properties: Mapping[str, str],
                 log: Log, monitor_interval: float = 1.0,
                 memory: bool = False, memory_every: float = 10.0, loads: bool = False,
                 fences: tuple[Any, Any] | None = None):
        self.procs, self.log, self.app_opts = procs, log, app
        self.prefix = unique_prefix(label)
        self.dir = workdir / self.prefix
        self.dir.mkdir(parents=True, exist_ok=True)
        self.env = session_env(os.environ, address, self.dir, self.prefix, kafka_properties)
        self.cfg = config.load(environ=self.env)
        self.app: Proc | None = None
        self.distributor: Proc | None = None
        create_topics(self.cfg)
        # ``fences``: each subscription's detect kinds and distance (a moving-object workload)
        produce_records(self.cfg.kafka_client(), self.cfg.topic("subscriptions"), "Subscription",
                        subscription_records(subscriptions, *(fences or ())))
        log(f"{self.prefix}: topics created, {len(subscriptions):,} subscriptions loaded")
        self.monitor = Monitor(self.cfg, self.prefix, monitor_interval,
                               self.memory_row if memory else None, memory_every, loads)
        self.monitor.start()

    # processes
    def start_app(self, timeout: float = 240.0) -> None:
        self.app = self.procs.start("app", self.app_opts.argv(self.dir / "checkpoint"), self.env,
                                    self.dir / "app.log")
        self.log(f"app started (trigger {self.app_opts.trigger}, log {self.app.log}); "
                 "waiting for its query")
        self._wait_log(self.app, "streaming from", timeout)
        self.log("the app's query runs")

    def start_distributor(self, mode: str = "dynamic") -> None:
        """`geops distributor --mode MODE --metric LB` (the other settings: the defaults)."""
        self.distributor = self.procs.start(
            "distributor", [*GEOPS, "distributor", "--mode", mode, "--metric", "LB"],
            self.env, self.dir / "distributor.log")

    def command(self, epoch: int, owners: Sequence[Sequence[int]], reason: str) -> None:
        """Write a RebalanceCommand giving each partition ``owners`` (as the distributor
        would); the app applies it before its next batch."""
        assignment, replicas = command_fields(owners)
        sender = Sender(self.cfg.kafka_client())
        try:
            sender.send(self.cfg.topic("control"), codec().encode("RebalanceCommand", {
                "epoch": epoch, "assignment": assignment, "moves": [], "mldc_before": 0.0,
                "mldc_predicted": 0.0, "metric": "LB", "reason": reason, "time": now_ms(),
                "app_id": self.prefix, "replicas": replicas}), key=self.prefix.encode())
        finally:
            sender.close(30)

    def wait_distributor(self, timeout: float = 60.0) -> None:
        assert self.distributor is not None
        self._wait_log(self.distributor, "following", timeout)

    def _wait_log(self, proc: Proc, needle: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if proc.popen.poll() is not None:
                raise BenchFailed(f"{proc.name} exited with {proc.popen.returncode} while "
                                  f"starting; see {proc.log}")
            with contextlib.suppress(OSError):
                if needle in proc.log.read_text(errors="replace"):
                    return
            if time.monotonic() > deadline:
                raise BenchFailed(f"{proc.name} did not start within {timeout:.0f} s; "
                                  f"see {proc.log}")
            time.sleep(0.5)

    def check_alive(self) -> None:
        self.procs.check_broker()
        for proc in (self.app, self.distributor):
            if proc is not None and proc.popen.poll() is not None:
                raise BenchFailed(f"{proc.name} exited with {proc.popen.returncode}; "
                                  f"see {proc.log}")
        if self.monitor.error is not None:
            raise BenchFailed(f"monitor failed: {self.monitor.error!r}")

    # waiting on the app
    def warm_up(self, publisher: Publisher, rate: float, batches: int = 3,
                timeout: float = 240.0, epoch: int = 0) -> None:
        """Offer ``rate`` in 2 s chunks until the app reported ``batches`` batches with
        records under assignment ``epoch`` or later (the first one carries Spark's warm-up,
        or the move), then drain."""
        deadline = time.monotonic() + timeout
        while self.monitor.batches_with_records(epoch) < batches:
            self.check_alive()
            if time.monotonic() > deadline:
                raise BenchFailed(f"the app reported no batch within {timeout:.0f} s of "
                                  f"warm-up; see {self.app.log if self.app else '-'}")
            publisher.offer(rate, 2.0, publisher.new_base())
        self.drain()
        self.log(f"warmed up ({self.monitor.batches_with_records(epoch)} batches"
                 + (f" of epoch {epoch} or later)" if epoch else ")"))

    def drain(self, timeout: float = 300.0) -> float:
        """Wait until the app processed everything written; the seconds it took."""
        t0 = time.monotonic()
        seen = len(self.monitor.data.samples)
        while True:
            self.check_alive()
            with self.monitor.lock:
                fresh = self.monitor.data.samples[seen:]
            if fresh and fresh[-1].lag == 0:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise BenchFailed(f"the app did not catch up within {timeout:.0f} s (lag "
                                  f"{fresh[-1].lag if fresh else '?'})")
            time.sleep(0.25)

    def samples_between(self, t0_ms: int, t1_ms: int) -> list[Sample]:
        with self.monitor.lock:
            return [s for s in self.monitor.data.samples if t0_ms <= s.time_ms <= t1_ms]

    def batches_between(self, t0_ms: int, t1_ms: int) -> list[dict]:
        with self.monitor.lock:
            return [b for b in self.monitor.data.batches if t0_ms <= b["end_time"] <= t1_ms]

    def matches_end(self) -> dict[int, int]:
        probe = EndOffsets(self.cfg.kafka_client())
        try:
            return probe(self.cfg.topic("matches"))
        finally:
            probe.close()

    def read_matches(self, start: Mapping[int, int], id_lo: int, id_hi: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(publication id, event time, Kafka timestamp) of the Match records from ``start``
        whose publication id is in [id_lo, id_hi)."""
        ids, ev, ts = [], [], []
        for msg in read_to_end(self.cfg.kafka_client(), self.cfg.topic("matches"), start):
            key = msg.key()
            value = msg.value()
            if key is None or value is None:
                continue
            try:
                pid = int(key)
            except ValueError:
                continue
            if not id_lo <= pid < id_hi:
                continue
            ids.append(pid)
            ev.append(match_event_time(value, HEADER_LEN))
            ts.append(msg.timestamp()[1])
        return (np.array(ids, np.int64), np.array(ev, np.int64), np.array(ts, np.int64))

    # memory of every process
    def memory_row(self) -> dict:
        """RSS in MB per role: the app's JVM, its Python workers, its driver's Python (with the
        `geops app` wrapper), the broker and the distributor."""
        parents = process_parents()
        roles: dict[str, int] = {}
        trees = [(self.app, "app-driver-python"), (self.distributor, "distributor")]
        for proc, default in trees:
            if proc is None or proc.popen.poll() is not None:
                continue
            for _, r, kb, _ in tree_memory(proc.popen.pid, default, parents):
                roles[r] = roles.get(r, 0) + kb
        if self.procs.broker_pid is not None:
            with contextlib.suppress(OSError):
                roles["broker"] = memory_kb(
                    Path(f"/proc/{self.procs.broker_pid}/status").read_text())[0]
        sample = self.monitor.data.samples[-1] if self.monitor.data.samples else None
        disk = {}
        if self.procs.broker_state is not None:  # what the broker keeps on disk (its logs)
            disk["broker_disk_mb"] = round(tree_bytes(self.procs.broker_state) / 2**20, 1)
        return {"time_ms": now_ms(), "lag": sample.lag if sample else None,
                **{f"{k}_mb": round(v / 1024, 1) for k, v in sorted(roles.items())}, **disk}

    # CPU time
    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system, with reaped children) used so far by the app's process
        tree and by the broker."""
        out = {"app": 0.0, "broker": 0.0}
        if self.app is not None and self.app.popen.poll() is None:
            for pid in descendants(self.app.popen.pid, process_parents()):
                out["app"] += cpu_seconds(pid)
        if self.procs.broker_pid is not None:
            out["broker"] = cpu_seconds(self.procs.broker_pid)
        return out

    def close(self, delete_topics: bool) -> None:
        self.monitor.close()
        for proc in (self.distributor, self.app):
            if proc is not None:
                code = self.procs.stop(proc)
                self.log(f"{proc.name} stopped (exit code {code})")
        if delete_topics:
            drop_topics(self.cfg)
