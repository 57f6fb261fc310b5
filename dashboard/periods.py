"""The running service's figures per period, from its records on Kafka, without Kafka.

`geops stats --follow` prints them as a line per period, `geops dashboard` plots them:
  input rate   growth of the publications topic's end offsets / period
  output rate  publications the app processed: BatchSummary records of the period / period
  lag          the topic's end offsets minus the end offsets of the app's last completed batch
  p50/p99      latency from event time to match of the period's Match records (when none came:
               the median of the batches' p50s and the largest of their p99s)
  MLDC         of per-worker processing time (the LB load of the PartitionLoad records)
  epoch        the assignment epoch of the app's latest batch
  events       geofence events written to the events topic / period (counted, not decoded;
               None when the topic is not followed)
``collect`` gathers a period's records from a consumer of several topics.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distributor.mldc import mldc
from schemas import codec
from schemas.errors import DecodeError


@dataclass
class Period:
    """What one period observed."""

    seconds: float                          # its length
    topic_end: Mapping[int, int] | None     # publications topic end offsets at its end, if read
    metrics: Sequence[tuple[str, dict]] = ()  # (schema name, record) from the metrics topic
    matches: Sequence[dict] = ()            # Match records that arrived in it
    time_ms: int = 0                        # wall-clock time of its end
    events: int | None = None               # records on the events topic (None: not followed)


@dataclass
class Row:
    """The figures of one period; None where the value is unknown."""

    time_ms: int
    input_rate: float | None
    output_rate: float
    lag: int | None
    batches: int
    p50_ms: float | None
    p99_ms: float | None
    latency_from_batches: bool  # no Match record: the batches' own latency figures
    mldc: float | None
    epoch: int | None
    matches: int = 0
    worker_loads_ns: tuple[float, ...] | None = None  # processing time per worker (no load: None)
    events: int | None = None         # geofence events of the period (None: not followed)
    events_rate: float | None = None  # ... per second


@dataclass
class Follower:
    """Turns the records of successive periods into rows; keeps what outlives a period (the
    topic's previous end, the app's last batch end offsets, its epoch and worker count)."""

    app_id: str
    topic_end: Mapping[int, int] | None = None  # the end offsets when following began
    _unsampled_s: float = 0.0                   # time since topic_end was last read
    batch_end: dict[str, int] = field(default_factory=dict)
    epoch: int | None = None
    workers: int | None = None

    def step(self, period: Period) -> Row:
        app = self.app_id
        summaries = [r for n, r in period.metrics if n == "BatchSummary" and r["app_id"] == app]
        loads = [r for n, r in period.metrics if n == "PartitionLoad" and r["app_id"] == app]
        for s in summaries:
            self.epoch, self.workers = s["epoch"], s["workers"]
            if s.get("source_end_offsets"):
                self.batch_end.update(s["source_end_offsets"])
        if not summaries and loads:
            self.epoch = loads[-1]["epoch"]
        seconds = max(period.seconds, 1e-9)
        self._unsampled_s += period.seconds
        input_rate = lag = None
        if period.topic_end is not None:
            if self.topic_end is not None:
                grown = sum(period.topic_end.values()) - sum(
                    self.topic_end.get(p, 0) for p in period.topic_end)
                input_rate = max(grown, 0) / max(self._unsampled_s, 1e-9)
            self.topic_end, self._unsampled_s = dict(period.topic_end), 0.0
            if self.batch_end:
                lag = sum(max(end - self.batch_end.get(str(p), 0), 0)
                          for p, end in period.topic_end.items())
        matches = [m for m in period.matches if m.get("app_id", "") in (app, "")]
        p50, p99, from_batches = latency(matches, summaries)
        per_worker = self._worker_loads(loads)
        return Row(time_ms=period.time_ms, input_rate=input_rate,
                   output_rate=sum(s["records"] for s in summaries) / seconds, lag=lag,
                   batches=len(summaries), p50_ms=p50, p99_ms=p99,
                   latency_from_batches=from_batches,
                   mldc=None if per_worker is None else mldc(list(per_worker)),
                   epoch=self.epoch, matches=len(matches), worker_loads_ns=per_worker,
                   events=period.events,
                   events_rate=None if period.events is None else period.events / seconds)

    def resume(self, topic_end: Mapping[int, int] | None) -> None:
        """Measure the next input rate from ``topic_end``, read now: after periods whose time
        must not count (history read back, which has no topic ends)."""
        self.topic_end = None if topic_end is None else dict(topic_end)
        self._unsampled_s = 0.0

    def _worker_loads(self, loads: list[dict]) -> tuple[float, ...] | None:
        if not loads:
            return None
        workers = max(self.workers or 0, 1 + max(r["worker"] for r in loads))
        per_worker = [0.0] * workers
        for r in loads:
            per_worker[r["worker"]] += r["processing_ns"]
        return tuple(per_worker)


def latency(matches: Sequence[dict], summaries: Sequence[dict]
            ) -> tuple[float | None, float | None, bool]:
    """(p50, p99, from the batches' figures) of event time -> match time in ms."""
    if matches:
        ms = np.fromiter((m["match_time"] - m["event_time"] for m in matches), float,
                         len(matches))
        p50, p99 = np.percentile(ms, [50, 99])
        return float(p50), float(p99), False
    p50s = [s["latency_p50_ms"] for s in summaries if s.get("latency_p50_ms") is not None]
    p99s = [s["latency_p99_ms"] for s in summaries if s.get("latency_p99_ms") is not None]
    if not p50s and not p99s:
        return None, None, False
    return (statistics.median(p50s) if p50s else None, max(p99s) if p99s else None, True)


@dataclass
class Collected:
    """The records a consumer delivered in one period, by topic."""

    records: dict[str, list[tuple[str, dict[str, Any]]]] = field(
        default_factory=lambda: defaultdict(list))  # decoded: (schema name, record)
    raw: dict[str, list[bytes]] = field(default_factory=lambda: defaultdict(list))
    seen: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # raw, kept or not
    errors: list[Any] = field(default_factory=list)  # the consumer's error events (KafkaError)

    def named(self, topic: str, name: str) -> list[dict[str, Any]]:
        """The records of one schema from one topic, in arrival order."""
        return [r for n, r in self.records.get(topic, ()) if n == name]


def collect(c: Any, deadline: float, clock: Callable[[], float],
            raw_topics: Collection[str] = (), raw_cap: int = 0,
            keys: Mapping[str, bytes] | None = None,
            counted: Collection[str] = ()) -> Collected:
    """Records that a consumer ``c`` (already assigned) delivers until ``deadline``.

    Records of ``raw_topics`` are kept undecoded, at most ``raw_cap`` per topic (the rest are
    consumed and dropped), for a bulk decoder; every other record is decoded by the codec, and
    undecodable ones and tombstones are skipped. Records of ``counted`` topics are only counted
    (``seen``): a topic whose rate is all that is shown. ``keys``: for these topics only
    records with that key (or none) are kept, e.g. the status topic's records of one app.
    """
    dec = codec()
    got = Collected()
    while (left := deadline - clock()) > 0:
        for msg in c.consume(1000, timeout=min(left, 0.2)):
            err = msg.error()
            if err is not None:
                got.errors.append(err)
                continue
            value, topic = msg.value(), msg.topic()
            if value is None or (keys and topic in keys and msg.key()
                                 and msg.key() != keys[topic]):
                continue
            if topic in counted:
                got.seen[topic] += 1
                continue
            if topic in raw_topics:
                got.seen[topic] += 1
                if len(got.raw[topic]) < raw_cap:
                    got.raw[topic].append(value)
                continue
            try:
                got.records[topic].append(dec.decode(value))
            except DecodeError:
                continue
    return got
