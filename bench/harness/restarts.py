"""What restart studies share: a stream of publications, the first answer a reader gets, the
phases of an app's start from its log, and a run on a broker of its own."""

from __future__ import annotations

import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from bench.harness.csv_tables import columns, write_csv
from bench.harness.machine import describe
from kafkaio import broker
from kafkaio.clients import consumer
from kafkaio.sender import Sender
from schemas import codec

ROOT = Path(__file__).resolve().parents[2]
# (column, the log line that ends the phase); seconds from the process start
PHASES = (("spark_s", r"snapshot .* (matches|does not match)|no snapshot of the static side"),
          ("set_s", r"subscriptions (from the snapshot|\(\d+ records read)"),
          ("static_s", r"static data: "),
          ("warm_s", r"warmed up in "),
          ("query_s", r"streaming from "))
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def phases(log: str, started: float,
           table: tuple[tuple[str, str], ...] = PHASES) -> dict[str, float]:
    """Seconds from ``started`` (epoch) to the first log line of each phase of ``table``."""
    out = {}
    for name, pattern in table:
        for line in log.splitlines():
            stamp = _STAMP.match(line)
            if stamp and re.search(pattern, line):
                at = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                out[name] = round(at - started, 2)
                break
    return out


class Stream(threading.Thread):
    """Publications at ``rate`` per second, round the workload's, until stopped."""

    def __init__(self, cfg, records: list[dict], rate: float):
        super().__init__(daemon=True)
        self.cfg, self.records, self.rate = cfg, records, rate
        self.done = threading.Event()

    def run(self) -> None:
        c = codec()
        sender = Sender(self.cfg.kafka_client(), rate=self.rate)
        i = 0
        while not self.done.is_set():
            rec = dict(self.records[i % len(self.records)], id=1_000_000_000 + i)
            rec["event_time"] = int(time.time() * 1000)
            sender.send(self.cfg.topic("publications"), c.encode("Publication", rec),
                        key=str(i).encode())
            i += 1
        sender.close()


def first_answer(cfg, proc: subprocess.Popen, started: float, timeout: float) -> float:
    """Seconds from ``started`` to the first Match record after the matches topic's end as
    of the call that a consumer receives."""
    from confluent_kafka import TopicPartition

    topic = cfg.topic("matches")
    c = consumer(cfg.kafka_client(), group_id=f"restart-{time.time_ns()}")
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, c.get_watermark_offsets(
            TopicPartition(topic, p), timeout=10)[1]) for p in parts])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = c.poll(0.05)
            if msg is not None and not msg.error() and msg.value():
                return time.time() - started
            if proc.poll() is not None:
                raise RuntimeError(f"the app ended with {proc.returncode} before answering")
        raise RuntimeError(f"no answer within {timeout:.0f} s")
    finally:
        c.close()


def on_own_broker(prefix: str, out: Path, run: Callable[[str, Path], list[dict]]
                  ) -> list[dict]:
    """``run(address, work directory)`` on a broker of its own in a new work directory; its
    rows written to ``out``/runs.csv.gz, the machine and the work directory printed."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    info, _ = broker.start(work / "broker", port=0)
    try:
        rows = run(info.address, work)
    finally:
        broker.stop(work / "broker")
    write_csv(out / "runs.csv.gz", rows, sorted(columns(rows)))
    print(f"\n{describe()}\nwork directory {work}")
    return rows
