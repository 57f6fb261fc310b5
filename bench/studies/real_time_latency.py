"""Per-record latency of a Kafka -> process -> Kafka path: Spark's real-time mode against
long-running tasks that each run their own Kafka clients.

A paced producer writes ``--rate`` records a second, spread over the input topic's partitions;
each record carries its sequence number and its send time (microseconds, wall clock). A reader
consumes the output topic (``read_committed``) and records, per output record, the record's
Kafka timestamp (set by the producer that wrote it, so: when the sink produced it) and the time
the reader received it. The latency of a record is its output timestamp minus its send time
("out ts", 1 ms resolution) and the reader's receive time minus its send time ("visible": what
a consumer downstream sees; under transactions, after the commit). The first ``--warmup``
seconds of sending are left out.

Probes (``--probes``):

- ``rtm-jvm``: real-time mode (``trigger(realTime=...)``, output mode update), Kafka source ->
  ``select`` -> Kafka sink, all in the JVM.
- ``rtm-foreach``: real-time mode, a Python ``ForeachWriter`` producing each row at once with a
  confluent_kafka producer.
- ``rtm-arrow`` / ``rtm-udf``: real-time mode, ``mapInArrow`` / a Python UDF copying the value
  -> Kafka sink, with ``spark.sql.streaming.realTimeMode.allowlistCheck`` off.
- ``lrt``: one Spark job of ``--workers`` tasks that live as long as the probe; each task runs a
  confluent_kafka consumer assigned its share of the input partitions and a producer, and
  produces each output record at once.
- ``lrt-eos``: the same with a transactional producer per task (``transactional.id`` per task),
  the consumed offsets sent into the transaction, a commit every ``--commit-ms``.

``--fail-after S`` makes the first attempt of task 0 raise once, S seconds into sending (for
``rtm-foreach`` and the ``lrt`` probes); ``--restart`` stops each real-time query halfway and
starts it again on its checkpoint. ``--conf k=v`` sets Spark SQL settings, ``--source k=v``
the Kafka source's options, ``--sink-linger`` the sinks' ``linger.ms``.

Usage: ``python -m bench.studies.real_time_latency [--rate 1000] [--duration 25]
[--probes rtm-jvm,rtm-foreach,lrt] [--cores 3] [--epoch "5 seconds"] [--raw FILE.csv.gz]
[--out FILE.md]``. Starts and stops its own broker; takes about a minute per probe.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import os
import re
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROBES = ("rtm-jvm", "rtm-foreach", "rtm-arrow", "rtm-udf", "lrt", "lrt-eos")
HEAD = struct.Struct(">qq")          # sequence number, send time (µs since the epoch)
PAD = b"x" * 48                      # a 64-byte value in all
DRAIN_S = 15.0                       # how long the reader waits for the last records


def now_us() -> int:
    """Wall-clock time in microseconds (comparable across processes on one machine)."""
    return time.time_ns() // 1000


@dataclass
class Out:
    """One output record as the reader saw it."""

    seq: int
    partition: int
    send_us: int
    ts_ms: int
    recv_us: int


@dataclass
class Result:
    """What one probe measured."""

    probe: str
    settings: str
    sent: int = 0
    records: list[Out] = field(default_factory=list)
    window: tuple[float, float] = (0.0, 0.0)   # measured send window, s since the epoch
    load: str = ""
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- load and reader


def produce_paced(address: str, topic: str, partitions: int, rate: float, seconds: float,
                  stop: threading.Event) -> tuple[int, float, float]:
    """Send ``rate`` records a second for ``seconds`` round-robin over ``partitions``.

    Returns (records sent, start, end) with times in seconds since the epoch.
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": address, "linger.ms": 0, "acks": "all"})
    start = time.time()
    n = 0
    while not stop.is_set():
        due = start + n / rate
        if due - start >= seconds:
            break
        wait = due - time.time()
        if wait > 0:
            time.sleep(wait)
        producer.produce(topic, HEAD.pack(n, now_us()) + PAD, partition=n % partitions)
        producer.poll(0)
        n += 1
    producer.flush(10)
    return n, start, time.time()


class Reader(threading.Thread):
    """Consumes the output topic from its start and keeps one ``Out`` per record."""

    def __init__(self, address: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import TopicPartition

        from kafkaio.clients import consumer

        self.consumer = consumer({"bootstrap.servers": address}, f"r-{uuid.uuid4()}",
                                 **{"fetch.wait.max.ms": 5})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.records: list[Out] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            msg = self.consumer.poll(0.05)   # returns as soon as one record is there
            if msg is None or msg.error():
                continue
            recv = now_us()
            seq, sent = HEAD.unpack_from(msg.value())
            self.records.append(Out(seq, msg.partition(), sent, msg.timestamp()[1], recv))
        self.consumer.close()

    def count_since(self, seq0: int) -> int:
        """Records received whose sequence number is at least ``seq0``."""
        return sum(1 for r in self.records if r.seq >= seq0)


# ---------------------------------------------------------------- real-time mode


def copy_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow's function: each batch's value column, unchanged."""
    import pyarrow as pa

    for b in batches:
        yield pa.RecordBatch.from_arrays([b.column("value")], names=["value"])


class KafkaRowWriter:
    """A ``ForeachWriter`` producing each row at once with a confluent_kafka producer; with
    ``fail_at`` (seconds since the epoch) the first attempt of partition 0 raises once then."""

    def __init__(self, address: str, topic: str, linger_ms: int, fail_at: float | None,
                 marker: str) -> None:
        self.address, self.topic, self.linger_ms = address, topic, linger_ms
        self.fail_at, self.marker = fail_at, marker
        self.producer: Any = None
        self.partition = 0

    def open(self, partition_id: int, epoch_id: int) -> bool:
        from confluent_kafka import Producer

        self.partition = partition_id
        self.producer = Producer({"bootstrap.servers": self.address,
                                  "linger.ms": self.linger_ms})
        return True

    def process(self, row: Any) -> None:
        if (self.fail_at is not None and self.partition == 0 and time.time() >= self.fail_at
                and not os.path.exists(self.marker)):
            Path(self.marker).touch()
            raise RuntimeError("a planned failure of the writer")
        self.producer.produce(self.topic, bytes(row.value), partition=row.partition)
        self.producer.poll(0)

    def close(self, error: Any) -> None:
        if self.producer is not None:
            self.producer.flush(10)


def start_rtm(spark: Any, probe: str, address: str, topics: tuple[str, str], ckpt: str,
              args: argparse.Namespace, marker: str) -> Any:
    """Start ``probe``'s real-time query; returns the StreamingQuery."""
    from pyspark.sql.functions import udf

    src_in, out = topics
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", address)
              .option("subscribe", src_in).option("startingOffsets", "earliest"))
    for k, v in args.source:
        reader = reader.option(k, v)
    df = reader.load()

    def to_kafka(frame: Any) -> Any:
        return (frame.writeStream.format("kafka").option("kafka.bootstrap.servers", address)
                .option("topic", out).option("kafka.linger.ms", str(args.sink_linger))
                .option("checkpointLocation", ckpt).outputMode("update")
                .trigger(realTime=args.epoch).start())

    if probe == "rtm-jvm":
        return to_kafka(df.select("value", "partition"))
    if probe == "rtm-arrow":
        return to_kafka(df.select("value", "partition").mapInArrow(copy_batches, "value binary"))
    if probe == "rtm-udf":
        @udf("binary")
        def py_copy(v: bytes) -> bytes:
            return v
        return to_kafka(df.select(py_copy("value").alias("value"), "partition"))
    if probe == "rtm-foreach":
        fail_at = time.time() + args.warmup + args.fail_after if args.fail_after else None
        writer = KafkaRowWriter(address, out, args.sink_linger, fail_at, marker)
        return (df.select("value", "partition").writeStream.foreach(writer)
                .option("checkpointLocation", ckpt).outputMode("update")
                .trigger(realTime=args.epoch).start())
    raise ValueError(probe)


# ---------------------------------------------------------------- long-running tasks


def task_loop(index: int, spec: dict[str, Any]) -> Iterator[str]:
    """The body of one long-running task: consume its share of the input partitions, produce
    each record at once (in a transaction committed every ``commit_ms`` when ``eos``), until
    ``spec['stop_file']`` exists. Yields one line of counts at its end."""
    from confluent_kafka import KafkaException, Producer, TopicPartition
    from pyspark import TaskContext

    from kafkaio.clients import consumer as make_consumer

    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx else 0
    mine = [p for p in range(spec["partitions"]) if p % spec["workers"] == index]
    consumer = make_consumer({"bootstrap.servers": spec["address"]}, spec["group"],
                             **{"fetch.wait.max.ms": spec["fetch_wait"]})
    committed = consumer.committed([TopicPartition(spec["in"], p) for p in mine], timeout=10)
    consumer.assign([TopicPartition(spec["in"], tp.partition,
                                    tp.offset if tp.offset >= 0 else 0) for tp in committed])
    conf = {"bootstrap.servers": spec["address"], "linger.ms": spec["linger"]}
    if spec["eos"]:
        conf["transactional.id"] = f"{spec['group']}-{index}"
    producer = Producer(conf)
    if spec["eos"]:
        producer.init_transactions(30)
        producer.begin_transaction()
    positions: dict[int, int] = {}
    last_commit = time.monotonic()
    done = commits = 0
    fail_at = spec.get("fail_at")
    try:
        while not os.path.exists(spec["stop_file"]):
            msg = consumer.poll(0.05)   # returns as soon as one record is there
            if msg is not None and not msg.error():
                producer.produce(spec["out"], msg.value(), partition=msg.partition())
                positions[msg.partition()] = msg.offset() + 1
                done += 1
            producer.poll(0)
            if (fail_at is not None and index == 0 and attempt == 0
                    and time.time() >= fail_at):
                raise RuntimeError("a planned failure of the task")
            if time.monotonic() - last_commit >= spec["commit_ms"] / 1000 and positions:
                offsets = [TopicPartition(spec["in"], p, o) for p, o in positions.items()]
                if spec["eos"]:
                    producer.send_offsets_to_transaction(
                        offsets, consumer.consumer_group_metadata(), 10)
                    producer.commit_transaction(10)
                    producer.begin_transaction()
                else:
                    consumer.commit(offsets=offsets, asynchronous=True)
                commits += 1
                last_commit = time.monotonic()
        if spec["eos"]:
            producer.commit_transaction(10)
        else:
            producer.flush(10)
    except KafkaException:
        raise
    finally:
        consumer.close()
    yield f"task {index} attempt {attempt}: {done} records, {commits} commits"


def run_tasks(sc: Any, spec: dict[str, Any]) -> tuple[threading.Thread, list[Any]]:
    """Start the long-running job in a background thread; returns it and a box for its
    result (the tasks' lines, or the exception)."""
    box: list[Any] = []
    workers = spec["workers"]

    def job() -> None:
        sc.setJobGroup(spec["group"], "long-running tasks", interruptOnCancel=True)
        try:
            box.append(sc.parallelize(range(workers), workers)
                       .mapPartitionsWithIndex(lambda i, _: task_loop(i, spec)).collect())
        except Exception as exc:  # the job failed: kept for the report
            box.append(exc)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    return thread, box


def other_job_waits(sc: Any, timeout: float = 8.0) -> str:
    """Whether a small job of 2 tasks runs while the long-running tasks hold their slots."""
    box: list[float] = []

    def job() -> None:
        sc.setJobGroup("probe-other", "a small job beside the long-running tasks")
        t0 = time.monotonic()
        sc.parallelize(range(4), 2).count()
        box.append(time.monotonic() - t0)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    thread.join(timeout)
    if box:
        return f"a 2-task job beside them ran in {box[0] * 1000:.0f} ms"
    sc.cancelJobGroup("probe-other")
    return f"a 2-task job beside them had not run after {timeout:.0f} s (cancelled)"


# ---------------------------------------------------------------- a probe's run


def measure(address: str, probe: str, args: argparse.Namespace, work: Path,
            start: Callable[[tuple[str, str]], Callable[[], list[str]]]) -> Result:
    """Create fresh topics, start the probe (``start`` returns its stop function), send the
    paced load, read the output and stop the probe."""
    from confluent_kafka.admin import AdminClient, NewTopic

    tag = uuid.uuid4().hex[:6]
    topics = (f"{probe}-in-{tag}", f"{probe}-out-{tag}")
    admin = AdminClient({"bootstrap.servers": address})
    for fut in admin.create_topics([NewTopic(t, args.partitions, 1) for t in topics]).values():
        fut.result()
    result = Result(probe, settings_of(probe, args))
    reader = Reader(address, topics[1], args.partitions)
    reader.start()
    try:
        stop_probe = start(topics)
    except Exception as exc:  # refused at start (an allowlist, a setting): kept for the report
        reader.stop.set()
        reader.join()
        result.notes.append("refused: " + str(getattr(exc, "desc", None) or exc)
                            .splitlines()[0][:200])
        return result
    stop = threading.Event()
    box: list[tuple[int, float, float]] = []
    sender = threading.Thread(target=lambda: box.append(produce_paced(
        address, topics[0], args.partitions, args.rate, args.warmup + args.duration, stop)),
        daemon=True)
    sender.start()
    if args.restart and probe.startswith("rtm"):
        time.sleep(args.warmup + args.duration / 2)
        result.notes += stop_probe()
        t0 = time.time()
        stop_probe = start(topics)
        result.notes.append(f"restarted on its checkpoint in {time.time() - t0:.1f} s")
    sender.join()
    sent, t_start, t_end = box[0]
    result.sent = sent - int(args.warmup * args.rate)
    result.window = (t_start + args.warmup, t_end)
    seq0 = int(args.warmup * args.rate)
    deadline = time.monotonic() + DRAIN_S
    while time.monotonic() < deadline and reader.count_since(seq0) < result.sent:
        time.sleep(0.2)
    result.load = load_average()
    result.notes += stop_probe()
    reader.stop.set()
    reader.join()
    result.records = [r for r in reader.records if r.seq >= seq0]
    return result


def settings_of(probe: str, args: argparse.Namespace) -> str:
    """The settings that apply to ``probe``, as one line."""
    parts = [f"local[{args.cores}]", f"{args.partitions} partitions"]
    if probe.startswith("rtm"):
        parts.append(f"epoch {args.epoch}")
        parts += [f"{k}={v}" for k, v in args.source]
        parts += [f"{k}={v}" for k, v in args.conf + args.spark_conf]
    else:
        parts += [f"{args.workers} tasks", f"fetch.wait.max.ms={args.fetch_wait}"]
        if probe == "lrt-eos":
            parts.append(f"commit every {args.commit_ms:g} ms")
    parts.append(f"linger.ms={args.sink_linger}")
    return ", ".join(parts)


def load_average() -> str:
    """The 1-minute load average."""
    return f"{os.getloadavg()[0]:.2f}"


# ---------------------------------------------------------------- figures


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(result: Result) -> dict[str, Any]:
    """p50/p99/max of both latencies, throughput, missing and duplicate counts."""
    out_ts = [r.ts_ms - r.send_us / 1000 for r in result.records]
    seen = [(r.recv_us - r.send_us) / 1000 for r in result.records]
    seqs = {r.seq for r in result.records}
    span = result.window[1] - result.window[0]
    return {"probe": result.probe, "settings": result.settings, "load": result.load,
            "sent": result.sent, "out": len(result.records),
            "missing": max(result.sent - len(seqs), 0),
            "duplicates": len(result.records) - len(seqs),
            "rate": len(seqs) / span if span > 0 else float("nan"),
            "p50": percentile(out_ts, 0.5), "p99": percentile(out_ts, 0.99),
            "max": max(out_ts, default=float("nan")),
            "seen_p50": percentile(seen, 0.5), "seen_p99": percentile(seen, 0.99),
            "seen_max": max(seen, default=float("nan")), "notes": "; ".join(result.notes)}


HEADER = ["probe", "settings", "load", "sent", "missing", "dup", "out/s", "p50 ms", "p99 ms",
          "max ms", "visible p50", "visible p99", "visible max", "notes"]


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The markdown table of the probes' summaries."""
    def ms(v: float) -> str:
        return "-" if v != v else f"{v:,.1f}"

    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for s in rows:
        cells = [s["probe"], s["settings"], s["load"], f"{s['sent']:,}", f"{s['missing']:,}",
                 f"{s['duplicates']:,}", ms(s["rate"]), ms(s["p50"]), ms(s["p99"]),
                 ms(s["max"]), ms(s["seen_p50"]), ms(s["seen_p99"]), ms(s["seen_max"]),
                 s["notes"].replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_raw(path: Path, results: list[Result]) -> None:
    """Every measured record of every probe, gzip-compressed CSV: its send time (s after the
    probe's first), its latency to the output timestamp and to the reader (ms)."""
    with gzip.open(path, "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["probe", "seq", "partition", "send_s", "out_ms", "visible_ms"])
        for res in results:
            t0 = min((r.send_us for r in res.records), default=0)
            for r in res.records:
                w.writerow([res.probe, r.seq, r.partition, f"{(r.send_us - t0) / 1e6:.3f}",
                            f"{r.ts_ms - r.send_us / 1000:.1f}",
                            f"{(r.recv_us - r.send_us) / 1000:.1f}"])


# ---------------------------------------------------------------- main


def _pairs(values: list[str]) -> list[tuple[str, str]]:
    out = []
    for v in values:
        key, sep, val = v.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"expected key=value, got {v!r}")
        out.append((key, val))
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m bench.studies.real_time_latency",
                                description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--rate", type=float, default=1000.0, help="records a second (1000)")
    p.add_argument("--duration", type=float, default=25.0, help="measured seconds (25)")
    p.add_argument("--warmup", type=float, default=5.0, help="seconds left out first (5)")
    p.add_argument("--probes", default="rtm-jvm,rtm-foreach,lrt",
                   help=f"comma-separated, of {', '.join(PROBES)}")
    p.add_argument("--partitions", type=int, default=2, help="input partitions (2)")
    p.add_argument("--cores", type=int, default=3, help="Spark's local[N] (3)")
    p.add_argument("--max-failures", type=int, default=1,
                   help="task attempts, local[N,F] (1: a failed task fails the job)")
    p.add_argument("--epoch", default="5 seconds", help="real-time trigger's duration")
    p.add_argument("--conf", action="append", default=[], metavar="K=V",
                   help="a Spark SQL setting for the real-time probes")
    p.add_argument("--spark-conf", action="append", default=[], metavar="K=V",
                   help="a setting of the SparkSession, given when it is built")
    p.add_argument("--source", action="append", default=[], metavar="K=V",
                   help="a Kafka source option for the real-time probes")
    p.add_argument("--sink-linger", type=int, default=0, help="sinks' linger.ms (0)")
    p.add_argument("--workers", type=int, default=2, help="long-running tasks (2)")
    p.add_argument("--fetch-wait", type=int, default=5,
                   help="long-running tasks' consumer fetch.wait.max.ms (5)")
    p.add_argument("--commit-ms", type=float, default=100.0,
                   help="lrt: offset commit / lrt-eos: transaction interval (100)")
    p.add_argument("--fail-after", type=float, default=0.0,
                   help="task 0's first attempt raises once this many seconds in (0: never)")
    p.add_argument("--restart", action="store_true",
                   help="stop each real-time query halfway and start it on its checkpoint")
    p.add_argument("--other-job", action="store_true",
                   help="lrt: run a small job beside the long-running tasks")
    p.add_argument("--raw", type=Path, help="write every record's times to this .csv.gz")
    p.add_argument("--out", type=Path, help="also append the table to this markdown file")
    args = p.parse_args(argv)
    args.conf = _pairs(args.conf)
    args.source = _pairs(args.source)
    args.spark_conf = _pairs(args.spark_conf)
    args.probes = [x.strip() for x in args.probes.split(",") if x.strip()]
    unknown = set(args.probes) - set(PROBES)
    if unknown:
        p.error(f"unknown probes: {', '.join(sorted(unknown))}")
    return args


def spark_session(args: argparse.Namespace) -> Any:
    """A local SparkSession with the pinned Kafka connector."""
    from pyspark.sql import SparkSession

    from app.read.source import connector_jars

    master = (f"local[{args.cores},{args.max_failures}]" if args.max_failures > 1
              else f"local[{args.cores}]")
    spark = (SparkSession.builder.master(master).appName("geops-real-time-latency")
             .config("spark.jars", ",".join(connector_jars()))
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", str(args.partitions)))
    for k, v in args.spark_conf:
        spark = spark.config(k, v)
    spark = spark.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _query_stopper(query: Any) -> Callable[[], list[str]]:
    def stop() -> list[str]:
        notes = []
        failure = query.exception()
        if failure is not None:
            text = str(getattr(failure, "desc", None) or failure)
            found = re.search(r"(\w+(?:Exception|Error)[^\n]{0,160})", text)
            notes.append("query failed: " + (found.group(1) if found else text[:160]))
        with contextlib.suppress(Exception):
            query.stop()
        return notes
    return stop


def run_probe(spark: Any, address: str, probe: str, args: argparse.Namespace,
              work: Path) -> Result:
    """One probe from topic creation to its stop."""
    ckpt = str(work / f"ckpt-{uuid.uuid4().hex[:6]}")
    marker = str(work / f"failed-{uuid.uuid4().hex[:6]}")
    if probe.startswith("rtm"):
        with contextlib.suppress(Exception):
            spark.conf.unset("spark.sql.streaming.realTimeMode.allowlistCheck")
        if probe in ("rtm-arrow", "rtm-udf"):
            spark.conf.set("spark.sql.streaming.realTimeMode.allowlistCheck", "false")
        for k, v in args.conf:
            spark.conf.set(k, v)

        def start(topics: tuple[str, str]) -> Callable[[], list[str]]:
            query = start_rtm(spark, probe, address, topics, ckpt, args, marker)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 30 and query.isActive and not query.status.get(
                    "isTriggerActive", True):
                time.sleep(0.1)
            time.sleep(2.0)   # the first epoch's tasks start
            return _query_stopper(query)
        return measure(address, probe, args, work, start)

    sc = spark.sparkContext

    def start_tasks(topics: tuple[str, str]) -> Callable[[], list[str]]:
        stop_file = str(work / f"stop-{uuid.uuid4().hex[:6]}")
        spec = {"address": address, "in": topics[0], "out": topics[1],
                "partitions": args.partitions, "workers": args.workers,
                "group": f"lrt-{uuid.uuid4().hex[:6]}", "fetch_wait": args.fetch_wait,
                "linger": args.sink_linger, "eos": probe == "lrt-eos",
                "commit_ms": args.commit_ms, "stop_file": stop_file,
                "fail_at": (time.time() + 2.0 + args.warmup + args.fail_after
                            if args.fail_after else None)}
        t0 = time.monotonic()
        thread, box = run_tasks(sc, spec)
        time.sleep(2.0)   # the tasks start their clients
        notes = [f"job submitted; tasks assumed up after {time.monotonic() - t0:.1f} s"]
        if args.other_job:
            notes.append(other_job_waits(sc))

        def stop() -> list[str]:
            Path(stop_file).touch()
            thread.join(30)
            if not box:
                sc.cancelJobGroup(spec["group"])
                return [*notes, "tasks did not stop; cancelled"]
            if isinstance(box[0], Exception):
                return [*notes, "job failed: " + str(box[0]).splitlines()[0][:160]]
            return [*notes, *box[0]]
        return stop
    return measure(address, probe, args, work, start_tasks)


def main(argv: list[str] | None = None) -> None:
    """Run the chosen probes on a local broker and print the table."""
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from kafkaio import broker

    work = Path(tempfile.mkdtemp(prefix="geops-rtl-"))
    info, _ = broker.start(work / "broker", port=0)
    results: list[Result] = []
    try:
        spark = spark_session(args)
        for probe in args.probes:
            print(f"{probe}: running (load {load_average()})", flush=True)
            res = run_probe(spark, info.address, probe, args, work)
            results.append(res)
            print("\n".join(table([summary(res)])[2:]), flush=True)
        spark.stop()
    finally:
        broker.stop(work / "broker")
    lines = table([summary(r) for r in results])
    print("\n".join(lines))
    if args.out:
        with args.out.open("a") as fh:
            fh.write("\n".join(lines) + "\n")
    if args.raw:
        write_raw(args.raw, results)


if __name__ == "__main__":
    main()
