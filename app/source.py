"""A Spark streaming data source over confluent-kafka (the JVM Kafka connector is not available).

Offsets are a JSON map ``{"<partition>": next offset}``. ``latestOffset`` plans end offsets known
to exist (``kafkaio.offsets.EndOffsets``: never waits for the newest one, copes with the embedded
broker's ListOffsets answer) and honours a per-trigger record limit; when the broker does not
answer, the trigger plans an empty batch and the next one asks again, up to the outage limit.
``partitions`` gives one input partition per Kafka partition range; ``read`` consumes exactly
``[start, end)`` on the executor, waiting out outages and detecting records that no longer exist
(data loss). Progress lives in the Spark checkpoint, so a restarted query reads each offset range
again exactly as planned.

Use: ``spark.dataSource.register(KafkaSource)`` then
``spark.readStream.format("geops-kafka").option("topic", ...).option("kafka", json.dumps(conf))``
with optional ``maxRecordsPerTrigger``, ``startingOffsets`` (earliest | latest),
``initialOffsetsPath`` (a file in the checkpoint that pins where a new query starts),
``outageLimit`` (seconds) and ``onDataLoss`` (fail | continue).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from kafkaio.retry import DEFAULT_OUTAGE_LIMIT

SCHEMA = ("topic string, partition int, offset long, key binary, value binary, "
          "timestamp long")
ARROW_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()),
                          ("offset", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
                          ("timestamp", pa.int64())])
ROWS_PER_ARROW_BATCH = 10_000


class KafkaRange(InputPartition):
    """Records ``[start, end)`` of one Kafka partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int):
        self.topic, self.partition, self.start, self.end = topic, partition, start, end

    def __repr__(self) -> str:
        return f"KafkaRange({self.topic}[{self.partition}] {self.start}..{self.end})"


def plan_limit(start: dict[str, int], ends: dict[str, int], budget: int) -> dict[str, int]:
    """End offsets that read exactly ``min(budget, backlog)`` records, shared in proportion to
    each partition's backlog (largest remainders get the rounding), never past ``ends``."""
    backlog = {p: max(ends[p] - start.get(p, 0), 0) for p in ends}
    total = sum(backlog.values())
    if total <= budget:
        return dict(ends)
    share = {p: backlog[p] * budget // total for p in backlog}
    rest = budget - sum(share.values())
    for p in sorted(backlog, key=lambda q: (-(backlog[q] * budget % total), q))[:rest]:
        share[p] += 1
    return {p: start.get(p, 0) + share[p] for p in ends}


@dataclass(frozen=True)
class ReadPolicy:
    """How reading rides out trouble: how long an outage may last, and what data loss does.

    ``on_data_loss`` follows the Spark Kafka source's ``failOnDataLoss``: ``fail`` stops the
    query with a message naming the offsets; ``continue`` skips what no longer exists and
    records each skipped range (log and dead-letter topic).
    """

    outage_limit: float = DEFAULT_OUTAGE_LIMIT
    on_data_loss: str = "fail"
    stall_check: float = 2.0  # seconds without records before checking the range still exists


@dataclass(frozen=True)
class LostRange:
    """Offsets ``[start, end)`` of a partition that no longer exist on the broker."""

    topic: str
    partition: int
    start: int
    end: int
    reason: str


# One consumer per (bootstrap config, topic) per Python worker process, reused across tasks:
# creating and connecting a consumer costs far more than reading a small range. A short fetch
# wait matters: with 50 ms, reading 2,000 records after a re-assign took ~55 ms instead of ~10.
# ``auto.offset.reset=error``: a start offset that no longer exists is data loss, never a silent
# jump (the broker answers OFFSET_OUT_OF_RANGE, and ``_check_range`` names what is gone).
_CONSUMERS: dict[str, Any] = {}
_CONSUMERS_LOCK = threading.Lock()
READ_CONSUMER = {"enable.partition.eof": True, "fetch.wait.max.ms": 5,
                 "auto.offset.reset": "error"}


def _pooled_consumer(conf: dict[str, str]) -> Any:
    from kafkaio.clients import consumer

    key = json.dumps(conf, sort_keys=True)
    with _CONSUMERS_LOCK:
        c = _CONSUMERS.get(key)
        if c is None:
            c = consumer(conf, **READ_CONSUMER)
            _CONSUMERS[key] = c
    return c


def _check_range(conf: dict[str, str], part: KafkaRange, pos: int) -> LostRange | None:
    """Whether the records from ``pos`` on are gone, when reading them stalls.

    The range was planned from offsets known to exist. If the broker now says the log starts
    after ``pos`` (retention, truncation) or ends at or before ``pos`` (topic deleted and
    recreated, broker restarted without its data), those records are lost. A broker that does
    not answer the check is an outage, not a loss (None).
    """
    from kafkaio.clients import KafkaUnavailable
    from kafkaio.offsets import EndOffsets

    probe = EndOffsets(conf, timeout=5.0)
    try:
        low, end = probe.listed(part.topic, [part.partition])[part.partition]
    except KafkaUnavailable:
        return None
    finally:
        probe.close()
    if low > pos:
        return LostRange(part.topic, part.partition, pos, min(low, part.end),
                         f"the log now starts at {low}")
    if end <= pos:
        return LostRange(part.topic, part.partition, pos, part.end,
                         f"the log now ends at {end}")
    return None


def data_loss_message(lost: LostRange) -> str:
    return (f"data loss: {lost.topic}[{lost.partition}] offsets {lost.start}..{lost.end} that "
            f"the query must read no longer exist ({lost.reason}): the topic was deleted, "
            f"recreated or truncated, or the broker lost it")


def iter_range(conf: dict[str, str], part: KafkaRange, policy: ReadPolicy = ReadPolicy(),
               lost: list[LostRange] | None = None,
               ) -> Iterator[tuple[int, int, bytes | None, bytes | None, int]]:
    """Exactly the records of ``part`` as (partition, offset, key, value, timestamp ms).

    A broker that stops answering is waited for with back-off up to ``policy.outage_limit``
    (then ``KafkaOutage``). Offsets in the range that hold no record (compaction, transaction
    markers) are skipped once the end of the log is reached. Records that no longer exist raise
    ``DataLoss``, or with ``on_data_loss=continue`` are skipped and appended to ``lost``.
    """
    import time

    from confluent_kafka import KafkaError, TopicPartition

    from kafkaio.retry import DataLoss, Outage

    c = _pooled_consumer(conf)
    c.assign([TopicPartition(part.topic, part.partition, part.start)])
    pos = part.start
    outage = Outage(conf.get("bootstrap.servers", "?"), policy.outage_limit)
    quiet_since = time.monotonic()
    try:
        while pos < part.end:
            msgs = c.consume(min(10_000, part.end - pos), timeout=0.5)
            stalled = False
            if msgs:
                outage.ok()
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= policy.stall_check:
                stalled = True
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= part.end:
                            pos = part.end
                        continue
                    if err.code() in (KafkaError._AUTO_OFFSET_RESET,
                                      KafkaError.OFFSET_OUT_OF_RANGE):
                        stalled = True
                        continue
                    if err.fatal() or not err.retriable():
                        raise RuntimeError(f"reading {part!r}: {err.str()}")
                    continue
                if m.offset() >= part.end:
                    pos = part.end
                    break
                yield part.partition, m.offset(), m.key(), m.value(), m.timestamp()[1]
                pos = m.offset() + 1
            if not stalled or pos >= part.end:
                continue
            quiet_since = time.monotonic()
            gone = _check_range(conf, part, pos)
            if gone is None:
                outage.failed(f"reading {part!r} at offset {pos}", sleep=False)
                continue
            if policy.on_data_loss != "continue":
                raise DataLoss(data_loss_message(gone))
            logging.getLogger("geops.app.source").warning(
                "%s; skipping them (--on-data-loss continue)", data_loss_message(gone))
            if lost is not None:
                lost.append(gone)
            pos = gone.end
            if pos < part.end:
                c.assign([TopicPartition(part.topic, part.partition, pos)])
    finally:
        c.unassign()


def read_range(conf: dict[str, str], part: KafkaRange, policy: ReadPolicy = ReadPolicy()
               ) -> Iterator[pa.RecordBatch]:
    """The records of ``part`` as Arrow batches in the source's schema."""
    cols: dict[str, list] = {name: [] for name in ARROW_SCHEMA.names}
    for partition, offset, key, value, ts in iter_range(conf, part, policy):
        cols["topic"].append(part.topic)
        cols["partition"].append(partition)
        cols["offset"].append(offset)
        cols["key"].append(key)
        cols["value"].append(value)
        cols["timestamp"].append(ts)
        if len(cols["offset"]) >= ROWS_PER_ARROW_BATCH:
            yield pa.RecordBatch.from_pydict(cols, schema=ARROW_SCHEMA)
            cols = {name: [] for name in ARROW_SCHEMA.names}
    if cols["offset"]:
        yield pa.RecordBatch.from_pydict(cols, schema=ARROW_SCHEMA)


def ranges(topic: str, start: dict[str, int], end: dict[str, int]) -> list[KafkaRange]:
    """One range per partition that has records between two offsets of this source.

    An end below its start marks a partition that was reset (``on_data_loss=continue`` planned
    past a topic that came back shorter): its range is the new log from offset 0.
    """
    out = []
    for p, e in sorted(end.items(), key=lambda kv: int(kv[0])):
        s = start.get(p, 0)
        if e < s:
            s = 0
        if e > s:
            out.append(KafkaRange(topic, int(p), s, e))
    return out


def load_initial_offsets(path: str) -> dict[str, int] | None:
    """The initial offsets a query saved, or None if it has not started yet."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def _write_atomically(path: str, text: str) -> None:
    import os

    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


class KafkaStreamReader(DataSourceStreamReader):
    """Plans and reads offset ranges of one topic. Clients are created lazily (it is pickled)."""

    def __init__(self, options: dict[str, str]):
        options = {k.lower(): v for k, v in options.items()}  # Spark options ignore case
        self.topic = options["topic"]
        self.conf: dict[str, str] = json.loads(options.get("kafka", "{}"))
        self.max_records = int(options.get("maxrecordspertrigger", "0") or 0)
        self.starting = options.get("startingoffsets", "earliest")
        if self.starting not in ("earliest", "latest"):
            raise ValueError(f"startingOffsets must be earliest or latest, got {self.starting!r}")
        self.initial_path = options.get("initialoffsetspath")
        self.policy = ReadPolicy(
            float(options.get("outagelimit", DEFAULT_OUTAGE_LIMIT)),
            options.get("ondataloss", "fail"))
        self._probe: Any = None
        self._outage: Any = None
        self.latest: dict[str, int] = {}

    def _ends(self) -> dict[str, int]:
        """End offsets known to exist, waiting out an outage (used where a value is needed)."""
        from kafkaio.offsets import EndOffsets
        from kafkaio.retry import Outage, with_retry

        if self._probe is None:
            self._probe = EndOffsets(self.conf, timeout=5.0)
            self._outage = Outage(self.conf.get("bootstrap.servers", "?"),
                                  self.policy.outage_limit)
        ends = with_retry(lambda: self._probe(self.topic), self._outage,
                          f"end offsets of {self.topic}")
        return {str(p): end for p, end in ends.items()}

    def _ends_now(self) -> dict[str, int] | None:
        """End offsets known to exist, or None when the broker does not answer right now
        (counted towards the outage limit, which raises ``KafkaOutage`` once exceeded)."""
        from kafkaio.clients import KafkaUnavailable

        if self._probe is None:
            return self._ends()
        try:
            ends = self._probe(self.topic)
        except KafkaUnavailable as exc:
            self._outage.failed(f"planning a batch of {self.topic}: {exc}", sleep=False)
            return None
        self._outage.ok()
        return {str(p): end for p, end in ends.items()}

    def initialOffset(self) -> dict:
        """Where a new query starts; with ``initialOffsetsPath`` it is decided once and kept,
        so a query restarted before its first batch committed starts at the same offsets."""
        if self.initial_path:
            saved = load_initial_offsets(self.initial_path)
            if saved is not None:
                return saved
        ends = self._ends()
        offsets = dict(ends) if self.starting == "latest" else {p: 0 for p in ends}
        if self.initial_path:
            _write_atomically(self.initial_path, json.dumps(offsets))
        return offsets

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records > 0 else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The next batch's end: offsets known to exist, never waiting on the broker for long.

        When the broker does not answer, the batch is empty (the end is the start) and the
        next trigger asks again. A partition whose end fell below the start lost its records:
        ``DataLoss``, or with ``on_data_loss=continue`` its new log is read from offset 0.
        """
        from kafkaio.retry import DataLoss

        ends = self._ends_now()
        if ends is None:
            return dict(start)
        self.latest = ends
        start = {p: start.get(p, 0) for p in ends}  # partitions added since: from offset 0
        reset = {p for p in ends if ends[p] < start[p]}
        if reset:
            what = ", ".join(f"{self.topic}[{p}] ends at {ends[p]} but the query has read to "
                             f"{start[p]}" for p in sorted(reset, key=int))
            if self.policy.on_data_loss != "continue":
                raise DataLoss(f"data loss: {what}: the topic was deleted, recreated or "
                               f"truncated, or the broker lost it (the embedded broker keeps "
                               f"topics in memory only)")
            logging.getLogger("geops.app.source").warning(
                "data loss: %s; reading the new log from offset 0 (--on-data-loss continue)",
                what)
            start = {p: 0 if p in reset else o for p, o in start.items()}
        if isinstance(limit, ReadMaxRows):
            return plan_limit(start, ends, limit.max_rows)
        return ends

    def reportLatestOffset(self) -> dict | None:
        return self.latest or None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return ranges(self.topic, start, end)

    def read(self, partition: KafkaRange) -> Iterator[pa.RecordBatch]:
        return read_range(self.conf, partition, self.policy)

    def commit(self, end: dict) -> None:
        """Positions are kept in the Spark checkpoint; nothing to commit to Kafka."""

    def stop(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None


class KafkaSource(DataSource):
    """``format("geops-kafka")``: records of one Kafka topic with their coordinates."""

    @classmethod
    def name(cls) -> str:
        return "geops-kafka"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(dict(self.options))
