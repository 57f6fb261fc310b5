"""`geops bench scale`: the app with 10k .. 1M subscriptions.

Per run (strategy x number of subscriptions, STAL, W workers in ``local[W]``) on a broker of its
own, with topics of a fresh prefix:

1. ``geops subscribe --file subscriptions.avro`` and ``geops publish --file publications.avro``
   (``--publish-times`` times, event time from the file) of a workload written by
   ``geops generate --seed S --subscriptions N``: the publications are a **backlog** written
   before the app starts, so the app runs at its capacity (``--max-records-per-trigger``
   records a batch) and throughput is what it processed, not what was offered;
2. ``geops app`` starts (time 0 = the launch of its process); the time to its first batch is
   the ``end_time`` of its first BatchSummary minus the launch; its log gives the static
   build time and bytes (``static data: ...`` line);
3. after ``--move-after`` batches one RebalanceCommand (epoch 1) moves every fourth partition
   to the next worker (as Fig. 8 does); the MoveReport gives ``duration_ms`` and ``bytes``;
4. once every publication was processed the app is stopped; the metrics topic gives the
   throughput (records / busy time of the batches after the first, the move's batch left out)
   and the cost per candidate pair (batch time / candidates, and the join tasks'
   ``processing_ns`` / candidates);
5. a thread samples every process of the app's tree each second (VmRSS, VmHWM) by role: the
   driver's Python (and the `geops app` wrapper), the JVM, the Python workers.

A run that fails (the app exits, no batch within ``--first-batch-timeout``) is recorded with
its reason (the app's last error line); with ``--retry-driver-memory`` it is run once more with
that driver heap. Rows are appended to ``runs.csv`` after every run, so results exist early.

What the logs and metrics say is read by ``calc``, memory and load are sampled by ``memory``,
and ``report`` draws the table and plots.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness.batches import dedupe_batches
from bench.harness.csv_tables import append_csv
from bench.harness.deployment import session_env, unique_prefix
from bench.harness.errors import BenchFailed
from bench.harness.processes import GEOPS, REPO, Processes
from bench.harness.publisher import now_ms
from bench.scale.calc import (
    batch_rows,
    failure_reason,
    forced_assignment,
    parse_app_log,
    phases,
    summarise,
    to_float,
)
from bench.scale.memory import MemorySampler, UptimeLog

Log = Callable[[str], None]


@dataclass(frozen=True)
class ScaleSpec:
    out: Path
    workdir: Path
    sizes: tuple[int, ...] = (10_000, 100_000, 300_000, 1_000_000)
    strategies: tuple[str, ...] = ("sPIS", "RIsPS")
    join: str = "STAL"
    workers: int = 2
    partitions: int = 16
    publications: int = 20_000
    publish_times: int = 2
    seed: int = 9
    trigger: str = "100ms"
    max_records: int = 2_000
    move_after: int = 3
    max_batches: int = 0                 # stop after this many batches with records (0: all)
    driver_memory: str = "4g"
    retry_driver_memory: str | None = "8g"
    first_batch_timeout: float = 600.0
    run_timeout: float = 900.0
    reference: int = 10_000
    memory_limit_mb: float = 10_240.0    # stop a run whose app tree's RSS exceeds this


def _run_cli(argv: list[str], env: Mapping[str, str], log_path: Path, timeout: float) -> float:
    t0 = time.monotonic()
    with open(log_path, "w") as fh:
        p = subprocess.run([*GEOPS, *argv], env=dict(env), stdout=fh, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, cwd=REPO, timeout=timeout)
    if p.returncode != 0:
        raise BenchFailed(f"geops {' '.join(argv[:3])} exited with {p.returncode}; see {log_path}")
    return time.monotonic() - t0


def workload_dir(spec: ScaleSpec, n: int, log: Log) -> Path:
    d = spec.workdir / "workloads" / f"n{n}-s{spec.seed}-p{spec.publications}"
    if (d / "subscriptions.avro").exists() and (d / "publications.avro").exists():
        return d
    log(f"generating {n:,} subscriptions and {spec.publications:,} publications "
        f"(seed {spec.seed}) in {d}")
    d.parent.mkdir(parents=True, exist_ok=True)
    t = _run_cli(["generate", "--out", str(d), "--seed", str(spec.seed), "--subscriptions",
                  str(n), "--publications", str(spec.publications)], os.environ,
                 d.parent / f"generate-n{n}.log", 3600)
    log(f"generated in {t:.0f} s")
    return d


class Run:
    """One (strategy, subscriptions, driver memory) run on the broker at ``address``."""

    def __init__(self, spec: ScaleSpec, procs: Processes, address: str, strategy: str, n: int,
                 driver_memory: str, log: Log):
        self.spec, self.procs, self.strategy, self.n = spec, procs, strategy, n
        self.driver_memory, self.log = driver_memory, log
        self.prefix = unique_prefix(f"scale-{strategy}-{n}")
        self.dir = spec.workdir / self.prefix
        self.dir.mkdir(parents=True, exist_ok=True)
        self.env = session_env(os.environ, address, self.dir, self.prefix, {})
        import config
        self.cfg = config.load(environ=self.env)

    def app_argv(self) -> list[str]:
        s = self.spec
        return ["app", "--master", f"local[{s.workers}]", "--workers", str(s.workers),
                "--strategy", self.strategy, "--join", s.join, "--partitions", str(s.partitions),
                "--trigger", s.trigger, "--max-records-per-trigger", str(s.max_records),
                "--driver-memory", self.driver_memory,
                "--checkpoint", str(self.dir / "checkpoint")]

    def execute(self, wl: Path) -> dict[str, Any]:
        from kafkaio.topics import create_topics
        s = self.spec
        row: dict[str, Any] = {"strategy": self.strategy, "join": s.join, "workers": s.workers,
                               "partitions": s.partitions, "subscriptions": self.n,
                               "driver_memory": self.driver_memory, "seed": s.seed,
                               "prefix": self.prefix, "status": "failed"}
        create_topics(self.cfg)
        row["subscribe_s"] = round(_run_cli(["subscribe", "--file", str(wl / "subscriptions.avro")],
                                            self.env, self.dir / "subscribe.log", 1800), 1)
        self.log(f"{self.prefix}: {self.n:,} subscriptions loaded in {row['subscribe_s']:.0f} s")
        for i in range(s.publish_times):
            _run_cli(["publish", "--file", str(wl / "publications.avro")], self.env,
                     self.dir / f"publish-{i}.log", 600)
        total = s.publications * s.publish_times
        row["published"] = total
        self.log(f"{self.prefix}: backlog of {total:,} publications written; starting the app "
                 f"(driver memory {self.driver_memory})")
        launch_ms = now_ms()
        row["launch_ms"] = launch_ms
        app = self.procs.start("app", [*GEOPS, *self.app_argv()], self.env, self.dir / "app.log")
        sampler = MemorySampler(app.popen.pid, limit_mb=s.memory_limit_mb)
        sampler.start()
        data: dict[str, list[dict]] = {}
        try:
            data = self._follow(app, launch_ms, total, row, sampler)
        finally:
            sampler.close()
            code = self.procs.stop(app, grace=60)
            row["app_exit"] = code
            row.update(sampler.peaks.row())
            append_csv(s.out / "memory.csv.gz",
                        [{"prefix": self.prefix, "strategy": self.strategy,
                          "subscriptions": self.n, "t_s": (m.pop("time_ms") - launch_ms) / 1000,
                          **m} for m in sampler.samples])
        text = (self.dir / "app.log").read_text(errors="replace")
        row.update(parse_app_log(text))
        if row.get("failure"):
            row["reason"] = failure_reason(text)
            with contextlib.suppress(ValueError):  # what it did before it stopped
                row.update(summarise(data.get("BatchSummary", []),
                                     data.get("PartitionLoad", []),
                                     data.get("MoveReport", []), launch_ms))
            row.update(phases(text, row.get("first_batch_s")))
            return row
        row.update(summarise(data.get("BatchSummary", []), data.get("PartitionLoad", []),
                             data.get("MoveReport", []), launch_ms))
        row.update(phases(text, row["first_batch_s"]))
        append_csv(s.out / "batches.csv.gz", batch_rows(
            data.get("BatchSummary", []), data.get("PartitionLoad", []), launch_ms,
            {"prefix": self.prefix, "strategy": self.strategy, "subscriptions": self.n}))
        row["status"] = "ok"
        return row

    def _follow(self, app: Any, launch_ms: int, total: int, row: dict[str, Any],
                sampler: MemorySampler | None = None) -> dict[str, list[dict]]:
        """Follow the metrics topic until every publication was processed (and the move
        reported); send the move after ``move_after`` batches with records."""
        from confluent_kafka import TopicPartition

        from kafkaio.clients import consumer
        from kafkaio.dump import decoded_records
        from kafkaio.sender import Sender
        from schemas import codec
        from schemas.assignment import moves_between
        s = self.spec
        dec = codec()
        c = consumer(self.cfg.kafka_client())
        c.assign([TopicPartition(self.cfg.topic("metrics"), 0, 0)])
        data: dict[str, list[dict]] = {}
        t0 = time.monotonic()
        moved_sent = False
        first_seen = False
        try:
            while True:
                if app.popen.poll() is not None:
                    row["failure"] = f"the app exited with {app.popen.returncode}"
                    self.log(f"{self.prefix}: {row['failure']}; see {app.log}")
                    return data
                if sampler is not None and sampler.over is not None:
                    row["failure"] = (f"stopped by the benchmark: the app's processes held "
                                      f"{sampler.over:,.0f} MB, over the limit of "
                                      f"{s.memory_limit_mb:,.0f} MB, "
                                      f"{(now_ms() - launch_ms) / 1000:.0f} s after the "
                                      "launch")
                    self.log(f"{self.prefix}: {row['failure']}")
                    return data
                el = time.monotonic() - t0
                if not first_seen and el > s.first_batch_timeout:
                    row["failure"] = f"no batch within {s.first_batch_timeout:.0f} s"
                    self.log(f"{self.prefix}: {row['failure']}; see {app.log}")
                    return data
                if el > s.run_timeout:
                    row["failure"] = f"not done within {s.run_timeout:.0f} s"
                    self.log(f"{self.prefix}: {row['failure']}; see {app.log}")
                    return data
                for name, rec in decoded_records(c.consume(200, timeout=0.5)):
                    data.setdefault(name, []).append(rec)
                    if name == "BatchSummary" and rec["records"] and not first_seen:
                        first_seen = True
                        self.log(f"{self.prefix}: first batch {rec['end_time'] - launch_ms:,} ms "
                                 f"after the launch ({rec['records']:,} records, "
                                 f"{rec['duration_ms']:,} ms)")
                    elif name == "MoveReport":
                        self.log(f"{self.prefix}: moved {len(rec['partitions_moved'])} partitions, "
                                 f"{rec['bytes'] / 1e6:.1f} MB in {rec['duration_ms']:,} ms")
                batches = [b for b in dedupe_batches(data.get("BatchSummary", [])) if b["records"]]
                if not moved_sent and len(batches) >= s.move_after:
                    old, new = forced_assignment(batches[0]["partitions"], batches[0]["workers"])
                    sender = Sender(self.cfg.kafka_client())
                    sender.send(self.cfg.topic("control"), dec.encode("RebalanceCommand", {
                        "epoch": 1, "assignment": new,
                        "moves": [{"partition": p, "from_worker": a, "to_worker": b}
                                  for p, a, b in moves_between(old, new)],
                        "mldc_before": 0.0, "mldc_predicted": 0.0, "metric": "LB",
                        "reason": "forced by geops bench scale", "time": now_ms(),
                        "app_id": ""}), key=b"geops")
                    sender.flush()
                    moved_sent = True
                    self.log(f"{self.prefix}: move commanded after batch "
                             f"{batches[-1]['batch_id']}")
                done = sum(b["records"] for b in batches)
                enough = done >= total or 0 < s.max_batches <= len(batches)
                if enough and (data.get("MoveReport") or not moved_sent):
                    self.log(f"{self.prefix}: {done:,} publications in {len(batches)} batches")
                    # the last batch's PartitionLoad records follow its summary closely
                    end = time.monotonic() + 3
                    while time.monotonic() < end:
                        for name, rec in decoded_records(c.consume(200, timeout=0.5)):
                            data.setdefault(name, []).append(rec)
                    return data
        finally:
            c.close()

    def delete_topics(self) -> None:
        from kafkaio.topics import drop_topics
        drop_topics(self.cfg, timeout=60)

def run_scale(spec: ScaleSpec, log: Log = print) -> list[dict[str, Any]]:
    """Every run of ``spec`` (sizes ascending, each strategy), rows appended to
    ``out/runs.csv`` as they finish; the uptime log beside it. Returns the rows."""
    spec.out.mkdir(parents=True, exist_ok=True)
    spec.workdir.mkdir(parents=True, exist_ok=True)
    procs = Processes()
    uptime = UptimeLog(spec.out / "uptime.csv")
    uptime.start()
    rows: list[dict[str, Any]] = []
    try:
        for attempt in range(3):  # another process may take the free port first
            try:
                address = procs.start_broker(spec.workdir / "broker")
                break
            except Exception as exc:  # BrokerError: the port was taken meanwhile
                if attempt == 2:
                    raise BenchFailed(f"the broker did not start: {exc}") from None
                log(f"broker: {exc}; trying another port")
        log(f"broker at {address}")
        for n in sorted(spec.sizes):
            wl = workload_dir(spec, n, log)
            for strategy in spec.strategies:
                memories = [spec.driver_memory]
                if spec.retry_driver_memory and spec.retry_driver_memory != spec.driver_memory:
                    memories.append(spec.retry_driver_memory)
                for attempt, mem in enumerate(memories):
                    run = Run(spec, procs, address, strategy, n, mem, log)
                    t0 = time.time()
                    try:
                        row = run.execute(wl)
                    except (BenchFailed, subprocess.TimeoutExpired) as exc:
                        row = {"strategy": strategy, "join": spec.join, "subscriptions": n,
                               "driver_memory": mem, "prefix": run.prefix, "status": "failed",
                               "failure": str(exc)}
                    finally:
                        run.delete_topics()
                    t1 = time.time()
                    row.update(attempt=attempt, started=time.strftime(
                        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), wall_s=round(t1 - t0, 1),
                        load1_mean=uptime.mean_load(t0, t1))
                    rows.append(row)
                    append_csv(spec.out / "runs.csv", [row])
                    log(format_row(row))
                    if row["status"] == "ok" or "stopped by the benchmark" in str(
                            row.get("failure")):  # a larger heap would not help that
                        break
    finally:
        procs.stop_all()
        uptime.close()
    return rows


def format_row(r: Mapping[str, Any]) -> str:
    if r.get("status") != "ok":
        return (f"{r['strategy']} {int(r['subscriptions']):,}: FAILED with driver memory "
                f"{r.get('driver_memory')}: {r.get('failure')} - {r.get('reason', '')}")

    def f(k: str, fmt: str) -> str:
        v = to_float(r.get(k))
        return "-" if v is None else format(v, fmt)
    return (f"{r['strategy']} {int(r['subscriptions']):,}: first batch "
            f"{f('first_batch_s', '.1f')} s "
            f"(static build {f('static_build_s', '.1f')} s, {f('bytes_per_subscription', '.0f')} "
            f"B/sub), {f('throughput_busy', ',.0f')} pub/s busy, "
            f"{f('batch_us_per_candidate', '.2f')} us/candidate (join "
            f"{f('join_us_per_candidate', '.2f')}), move {f('move_bytes', ',.0f')} B in "
            f"{f('move_ms', ',.0f')} ms, peak driver py {f('driver_python_hwm_mb', ',.0f')} "
            f"MB, JVM {f('jvm_hwm_mb', ',.0f')} MB, workers "
            f"{f('python_workers_rss_peak_mb', ',.0f')} MB")
