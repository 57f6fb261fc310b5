"""When answers came: a reader of the matches topic (read committed, from its end as of now)
keeping, per poll that returned Match records, when it got them and the earliest event time
among them; and the answer gaps computed from that (pure)."""

from __future__ import annotations

import bisect
import contextlib
import threading
from dataclasses import dataclass

from confluent_kafka import TopicPartition

import config
from bench.harness.publisher import now_ms
from kafkaio.clients import consumer
from kafkaio.dump import decoded_records
from kafkaio.offsets import EndOffsets


@dataclass(frozen=True)
class Arrival:
    """Match records a read_committed reader got at once: when, the earliest publication event
    time (when the producer sent it) among them, and how many."""

    time_ms: int
    first_event_ms: int
    count: int


class AnswerWatcher(threading.Thread):
    """Follows the matches topic; ``arrivals`` grows by one per poll that got Match records.
    Under exactly-once a batch's matches become visible when its transaction commits, so an
    arrival is when the answers reached a reader, not when a task computed them."""

    def __init__(self, cfg: config.Config):
        super().__init__(daemon=True, name="chaos-answer-watcher")
        self.arrivals: list[Arrival] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        conf = cfg.kafka_client()
        topic = cfg.topic("matches")
        probe = EndOffsets(conf)
        try:
            ends = probe(topic)
        finally:
            probe.close()
        self.consumer = consumer(conf)
        self.consumer.assign([TopicPartition(topic, p, end) for p, end in ends.items()])

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                events = [rec["event_time"] for name, rec in
                          decoded_records(self.consumer.consume(2000, timeout=0.1))
                          if name == "Match"]
                if events:
                    self.arrivals.append(Arrival(now_ms(), min(events), len(events)))
        except BaseException as exc:
            self.error = exc
        finally:
            with contextlib.suppress(Exception):
                self.consumer.close()

    def close(self) -> None:
        self.stopping.set()
        self.join(10)


def waiting_gaps(arrivals: list[Arrival]) -> list[tuple[int, int]]:
    """(start, end) in ms of every stretch without an answer while publications were waiting:
    between two arrivals a < b, from a, or from the earliest event time of the publications
    answered at b or later when that is after a (nothing was waiting before it), to b. Every
    publication gets a Match record, so those answered at b or later are exactly the ones
    still unanswered after a."""
    out = []
    suffix_min = [0] * len(arrivals)
    low = None
    for i in range(len(arrivals) - 1, -1, -1):
        e = arrivals[i].first_event_ms
        low = e if low is None else min(low, e)
        suffix_min[i] = low
    for i in range(1, len(arrivals)):
        start = max(arrivals[i - 1].time_ms, suffix_min[i])
        if start < arrivals[i].time_ms:
            out.append((start, arrivals[i].time_ms))
    return out


def answer_gap_ms(gaps: list[tuple[int, int]], start_ms: int, until_ms: float) -> int | None:
    """The longest of ``gaps`` (sorted by end) that ended after ``start_ms`` and before
    ``until_ms``: a stretch that began before the fault counts whole, one that lasted into the
    next fault is that fault's. None without one."""
    i = bisect.bisect_right([end for _, end in gaps], start_ms)
    within = [end - begin for begin, end in gaps[i:] if end < until_ms]
    return max(within, default=None)
