"""Following the running service on Kafka for the dashboard: read back, then period by period.

On connecting, the metrics, status and control topics are read back for the history (from the
offsets of ``now - history``, at most ``BACKFILL_LIMIT`` records a partition; the control topic
from its beginning, so every rebalance and the epoch in force are known), and further back on
the metrics topic until a ``PartitionLayout`` of the app turns up (the app writes one at start
and every 30 s while it runs batches); the publications topic's end offsets at up to 120 of the
past period ends give those periods their input rate and lag. Then one consumer follows those
three topics and the matches and publications topics from their ends, and the events topic
when it exists (its records only counted: the events-per-second series); every period its
records become a ``dashboard.periods.Period`` folded into the ``View``, and the view is
published.

Consumers read with librdkafka's defaults (``isolation.level=read_committed``). Kafka that
cannot be reached, a topic that does not exist yet, a broker that stops answering: each is a
``View.problem`` (a banner on the page) and is retried every period; nothing here ends the
process but ``stop``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from config import Config
from dashboard.periods import Period, collect
from dashboard.points import publication_points
from dashboard.state import View
from kafkaio.clients import check_reachable, consumer
from kafkaio.dump import decoded_messages
from kafkaio.errors import KafkaUnavailable, TopicMissing
from kafkaio.offsets import EndOffsets, read_between

log = logging.getLogger("geops.dashboard")

# Records a partition read back at most: the history's records, bounded.
BACKFILL_LIMIT = {"metrics": 200_000, "status": 20_000, "control": 20_000}
LAYOUT_CHUNK = 5_000        # records read at a time further back for a PartitionLayout
LAYOUT_SCAN_LIMIT = 200_000  # ... and at most this many
POINTS_PER_PERIOD = 2_000   # publications decoded for the map each period (the rest: counted)
READ_BACK_OUTAGE_S = 10.0   # how long reading back waits for a broker that does not answer
END_TIMEOUT_S = 2.0         # ListOffsets of the publications topic: no answer is an outage
# consumer errors worth a banner (others, such as a connection the broker closed when idle,
# librdkafka mends by itself)
SERIOUS = (KafkaError._ALL_BROKERS_DOWN, KafkaError.UNKNOWN_TOPIC_OR_PART,
           KafkaError._UNKNOWN_TOPIC, KafkaError.TOPIC_AUTHORIZATION_FAILED)


@dataclass(frozen=True)
class Topics:
    """The configured names of the topics the dashboard reads."""

    metrics: str
    status: str
    control: str
    matches: str
    publications: str
    events: str

    @classmethod
    def of(cls, cfg: Config) -> Topics:
        return cls(*(cfg.topic(t) for t in ("metrics", "status", "control", "matches",
                                            "publications", "events")))

    def kinds(self) -> dict[str, str]:
        """Topic name -> the kind ``View.replay`` knows it by."""
        return {self.metrics: "metrics", self.status: "status", self.control: "control"}


class EndWatcher:
    """The publications topic's end offsets, asked in a thread of its own every quarter second,
    so that a broker that does not answer delays no period; ``latest`` says what it knows."""

    def __init__(self, client_conf: Mapping[str, str], topic: str, max_age: float):
        self.topic = topic
        self.max_age = max_age
        self._conf = dict(client_conf)
        self._ends: tuple[float, dict[int, int]] | None = None
        self._problem: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dashboard-ends", daemon=True)

    def start(self) -> EndWatcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        probe = EndOffsets(self._conf, timeout=END_TIMEOUT_S)
        try:
            while not self._stop.is_set():
                try:
                    self._ends = (time.monotonic(), probe(self.topic))
                    self._problem = None
                except KafkaUnavailable as exc:
                    self._problem = str(exc)
                self._stop.wait(0.25)
        finally:
            probe.close()

    def latest(self) -> tuple[dict[int, int] | None, str | None]:
        """(end offsets no older than ``max_age`` or None, the last problem or None)."""
        got = self._ends
        fresh = got is not None and time.monotonic() - got[0] <= self.max_age
        return (dict(got[1]) if fresh and got is not None else None), self._problem

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(END_TIMEOUT_S + 5)


def _decoded(msgs: Iterator[Any], kind: str, key: bytes | None
             ) -> Iterator[tuple[int, str, str, dict]]:
    """(timestamp ms, kind, schema name, record) of the decodable records among ``msgs``;
    ``key``: only records with that key or none."""
    kept = (m for m in msgs if key is None or not m.key() or m.key() == key)
    for msg, name, record in decoded_messages(kept):
        yield msg.timestamp()[1], kind, name, record


class Feed:
    """Reads the service's topics into ``view`` and calls ``publish(view)`` every period until
    ``run``'s stop event is set."""

    def __init__(self, cfg: Config, view: View, publish: Callable[[View], None],
                 clock: Callable[[], float] = time.monotonic):
        self.conf = cfg.kafka_client()
        self.servers = self.conf.get("bootstrap.servers", "?")
        self.topics = Topics.of(cfg)
        self.view = view
        self.publish = publish
        self.clock = clock
        self.app_key = view.app_id.encode()
        self._consumer: Any = None
        self._watcher: EndWatcher | None = None
        self._events = False  # the events topic exists and is followed

    # -- connecting and reading back -----------------------------------------------------

    def _connect(self) -> None:
        """Read back the history into the view and start following; KafkaUnavailable when
        Kafka cannot be read (yet)."""
        check_reachable(self.conf, timeout=5.0)
        t = self.topics
        probe = EndOffsets(self.conf, timeout=5.0)
        try:
            for topic in (t.metrics, t.status, t.control, t.matches, t.publications):
                probe.partitions(topic)  # TopicMissing names the topic and what to do
            ends = {topic: probe(topic) for topic in (t.metrics, t.status, t.control,
                                                      t.matches, t.publications)}
            events = self._events_ends(probe)
        finally:
            probe.close()
        now_ms = int(time.time() * 1000)
        since_ms = now_ms - int(self.view.history_s * 1000)
        starts = self._starts(ends, since_ms)
        timed: list[tuple[int, str, str, dict]] = []
        for topic, kind in t.kinds().items():
            key = self.app_key if kind == "status" else None
            timed += _decoded(read_between(self.conf, topic, starts[topic], ends[topic],
                                           READ_BACK_OUTAGE_S), kind, key)
        if not any(n == "PartitionLayout" and r.get("app_id") == self.view.app_id
                   for _, kind, n, r in timed if kind == "metrics"):
            timed += self._older_layout(starts[t.metrics])
        past = self._past_ends(ends[t.publications], self.view.replay_ends(timed, now_ms))
        self.view.replay(timed, now_ms, past)
        followed = {**ends, t.events: events} if events is not None else ends
        c = consumer(self.conf)
        c.assign([TopicPartition(topic, p, followed[topic][p]) for topic in followed
                  for p in followed[topic]])
        self._consumer = c
        self._events = events is not None
        self.view.follower.resume(ends[t.publications])
        self._watcher = EndWatcher(self.conf, t.publications,
                                   max_age=2 * self.view.period_s + END_TIMEOUT_S).start()
        log.info("reading %s from %d records back; following", ", ".join(t.kinds()),
                 len(timed))

    def _events_ends(self, probe: EndOffsets) -> dict[int, int] | None:
        """The events topic's end offsets, or None when it cannot be read: it does not exist
        (an app without moving objects may run without it) or this principal may not read it
        (ACLs set before the topic was); the dashboard then has no events series."""
        try:
            probe.partitions(self.topics.events)
            return probe(self.topics.events)
        except TopicMissing:
            log.info("topic %s does not exist: no events series", self.topics.events)
        except KafkaUnavailable as exc:  # the required topics answered: not an outage
            log.warning("no events series: %s", exc)
        return None

    def _starts(self, ends: Mapping[str, Mapping[int, int]], since_ms: int
                ) -> dict[str, dict[int, int]]:
        """Where reading back starts on each partition of metrics, status and control."""
        c = consumer(self.conf)
        try:
            out: dict[str, dict[int, int]] = {}
            for topic, kind in self.topics.kinds().items():
                limit = BACKFILL_LIMIT[kind]
                if kind == "control":
                    found = {p: 0 for p in ends[topic]}
                else:
                    asked = [TopicPartition(topic, p, since_ms) for p in ends[topic]]
                    try:
                        answer = c.offsets_for_times(asked, timeout=5.0)
                    except Exception as exc:  # KafkaException: no answer in time
                        raise KafkaUnavailable(f"cannot find the offsets of {topic} "
                                               f"{self.view.history_s:.0f} s ago: {exc}"
                                               ) from None
                    found = {tp.partition: tp.offset if tp.offset >= 0 else ends[topic][
                        tp.partition] for tp in answer}
                out[topic] = {p: max(found.get(p, 0), end - limit, 0)
                              for p, end in ends[topic].items()}
            return out
        finally:
            c.close()

    def _past_ends(self, now_ends: Mapping[int, int], times: list[int]
                   ) -> dict[int, dict[int, int]]:
        """The publications topic's end offsets at each of ``times`` (ms): the offset of the
        first record written at or after the time, or the end now when none was (Kafka answers
        -1 for that; a broker that answers 0 is told apart by the time of the newest record)."""
        topic = self.topics.publications
        newest = {p: -1 for p in now_ends}  # timestamp of each partition's newest record
        for msg in read_between(self.conf, topic, {p: e - 1 for p, e in now_ends.items() if e},
                                {p: e for p, e in now_ends.items() if e}, READ_BACK_OUTAGE_S):
            newest[msg.partition()] = msg.timestamp()[1]
        out: dict[int, dict[int, int]] = {}
        c = consumer(self.conf)
        try:
            for t_ms in times:
                try:
                    answer = c.offsets_for_times(
                        [TopicPartition(topic, p, t_ms) for p in now_ends], timeout=5.0)
                except Exception:  # KafkaException: no answer; the past stays without
                    break
                out[t_ms] = {tp.partition: now_ends[tp.partition]
                             if tp.offset < 0 or t_ms > newest[tp.partition] else tp.offset
                             for tp in answer}
        finally:
            c.close()
        return out

    def _older_layout(self, start: Mapping[int, int]) -> list[tuple[int, str, str, dict]]:
        """The newest PartitionLayout of the app before ``start`` on the metrics topic, read
        back chunk by chunk (none: empty)."""
        best: list[tuple[int, str, str, dict]] = []
        for p, high in start.items():
            scanned = 0
            while high > 0 and scanned < LAYOUT_SCAN_LIMIT:
                low = max(0, high - LAYOUT_CHUNK)
                layouts = [t for t in _decoded(
                    read_between(self.conf, self.topics.metrics, {p: low}, {p: high},
                                 READ_BACK_OUTAGE_S), "metrics", None)
                    if t[2] == "PartitionLayout" and t[3].get("app_id") == self.view.app_id]
                if layouts:
                    newest = max(layouts, key=lambda t: t[3]["time"])
                    if not best or newest[3]["time"] > best[0][3]["time"]:
                        best = [newest]
                    break
                scanned += high - low
                high = low
        return best

    # -- following ------------------------------------------------------------------------

    def _period(self, began: float, deadline: float) -> None:
        """Collect until ``deadline`` and fold the period that began at ``began``."""
        t = self.topics
        got = collect(self._consumer, deadline, self.clock, raw_topics={t.publications},
                      raw_cap=POINTS_PER_PERIOD, keys={t.status: self.app_key},
                      counted={t.events})
        assert self._watcher is not None
        topic_end, problem = self._watcher.latest()
        self.view.step(Period(self.clock() - began, topic_end, got.records[t.metrics],
                              got.named(t.matches, "Match"), int(time.time() * 1000),
                              got.seen[t.events] if self._events else None),
                       got.named(t.status, "DistributorStatus"),
                       got.named(t.control, "RebalanceCommand"),
                       publication_points(got.raw[t.publications]),
                       got.seen[t.publications])
        serious = [e for e in got.errors if e.fatal() or e.code() in SERIOUS]
        if problem is None and serious:
            problem = f"Kafka at {self.servers}: {serious[-1].str()}"
        self.view.kafka_problem(problem)

    def _next_boundary(self) -> float:
        """The clock's time of the next multiple of the period on the wall clock."""
        period = self.view.period_s
        wall = time.time()
        return self.clock() + (period - wall % period or period)

    def run(self, stop: threading.Event) -> None:
        """Connect (again and again while Kafka cannot be read), then one period after
        another, publishing the view after each, until ``stop`` is set."""
        try:
            while not stop.is_set():
                began = self.clock()
                deadline = self._next_boundary()
                if self._consumer is None:
                    try:
                        self._connect()
                        self.view.kafka_problem(None)
                    except KafkaUnavailable as exc:
                        self._close()
                        self.view.kafka_problem(str(exc))
                        self.view.tick(int(time.time() * 1000))
                        self.publish(self.view)
                        stop.wait(max(0.0, deadline - self.clock()))
                        continue
                    self.publish(self.view)
                    continue
                try:
                    self._period(began, deadline)
                except Exception as exc:  # anything unforeseen: shown, logged, not fatal
                    log.exception("dashboard period failed")
                    self.view.kafka_problem(f"reading Kafka failed: {exc}")
                self.publish(self.view)
        finally:
            self._close()

    def _close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
