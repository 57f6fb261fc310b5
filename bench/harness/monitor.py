"""What a benchmark follows while it offers a live stream: the app's batches, moves and
commands, the lag every second, and the memory of the processes it started."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

import config
from bench.harness.publisher import now_ms
from kafkaio.clients import consumer
from kafkaio.dump import decoded_records
from kafkaio.errors import KafkaUnavailable
from kafkaio.offsets import EndOffsets


def lag_of(topic_end: Mapping[int, int], batch_end: Mapping[str | int, int]) -> int:
    """Records of the topic the app has not processed: end offsets minus the newest end offset
    each partition was reported at (BatchSummary.source_end_offsets, keys partition numbers as
    strings: a micro-batch's names every partition, a real-time task's its own)."""
    done = {int(p): int(o) for p, o in batch_end.items()}
    return sum(max(end - done.get(int(p), 0), 0) for p, end in topic_end.items())


@dataclass
class Sample:
    time_ms: int
    lag: int | None
    topic_end: int | None


@dataclass
class MonitorData:
    samples: list[Sample] = field(default_factory=list)
    batches: list[dict] = field(default_factory=list)
    moves: list[dict] = field(default_factory=list)
    commands: list[dict] = field(default_factory=list)
    memory: list[dict] = field(default_factory=list)
    loads: list[tuple[int, int, int]] = field(default_factory=list)  # (time, partition, ns)


class Monitor(threading.Thread):
    """Follows the metrics and control topics of the app from their end as of now, and every
    ``interval`` seconds samples the lag (publications topic end offsets minus the latest
    BatchSummary.source_end_offsets); with ``memory`` set, calls it every ``memory_every`` s
    and keeps the rows; with ``loads`` set, keeps every PartitionLoad's time, partition and
    processing_ns."""

    def __init__(self, cfg: config.Config, app_id: str, interval: float = 1.0,
                 memory: Callable[[], dict] | None = None, memory_every: float = 10.0,
                 loads: bool = False):
        super().__init__(daemon=True, name="bench-live-monitor")
        self.cfg, self.app_id, self.interval = cfg, app_id, interval
        self.memory, self.memory_every = memory, memory_every
        self.loads = loads
        self.data = MonitorData()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.batch_end: dict[str, int] = {}
        conf = cfg.kafka_client()
        self.probe = EndOffsets(conf)
        self.pubs = cfg.topic("publications")
        follow = [cfg.topic("metrics"), cfg.topic("control")]
        self.consumer = consumer(conf)
        assign = []
        for t in follow:
            for p, end in self.probe(t).items():
                assign.append(TopicPartition(t, p, end))
        self.consumer.assign(assign)
        self.ready = threading.Event()

    def latest_lag(self) -> int | None:
        with self.lock:
            return self.data.samples[-1].lag if self.data.samples else None

    def batches_with_records(self, epoch: int = 0) -> int:
        """Batches reported with records, under assignment ``epoch`` or a later one."""
        with self.lock:
            return sum(1 for b in self.data.batches if b["records"] and b["epoch"] >= epoch)

    def run(self) -> None:
        next_sample = time.monotonic()
        next_memory = time.monotonic()
        try:
            while not self.stopping.is_set():
                for name, rec in decoded_records(self.consumer.consume(500, timeout=0.05)):
                    if rec.get("app_id", self.app_id) not in (self.app_id, ""):
                        continue
                    with self.lock:
                        if name == "BatchSummary":
                            # when a read_committed reader got it: with exactly-once
                            # delivery, when the batch's transaction (its matches too)
                            # became visible
                            rec["seen_ms"] = now_ms()
                            self.data.batches.append(rec)
                            if rec.get("source_end_offsets"):
                                self.batch_end.update(rec["source_end_offsets"])
                        elif name == "MoveReport":
                            self.data.moves.append(rec)
                        elif name == "RebalanceCommand":
                            self.data.commands.append(rec)
                        elif name == "PartitionLoad" and self.loads:
                            self.data.loads.append((rec["time"], rec["partition"],
                                                    rec["processing_ns"]))
                now = time.monotonic()
                if now >= next_sample:
                    next_sample = now + self.interval
                    try:
                        ends = self.probe(self.pubs)
                    except KafkaUnavailable:
                        ends = None
                    with self.lock:
                        lag = (lag_of(ends, self.batch_end)
                               if ends is not None and self.batch_end else None)
                        self.data.samples.append(Sample(
                            now_ms(), lag, None if ends is None else sum(ends.values())))
                    self.ready.set()
                if self.memory is not None and now >= next_memory:
                    next_memory = now + self.memory_every
                    row = self.memory()
                    with self.lock:
                        self.data.memory.append(row)
        except BaseException as exc:
            self.error = exc
            self.ready.set()
        finally:
            with contextlib.suppress(Exception):
                self.consumer.close()
            with contextlib.suppress(Exception):
                self.probe.close()

    def close(self) -> None:
        self.stopping.set()
        self.join(10)
