"""A Spark streaming data source over confluent-kafka (the JVM Kafka connector is not available).

Offsets are a JSON map ``{"<partition>": next offset}``. ``latestOffset`` plans true end offsets
(``kafkaio.offsets.EndOffsets``, which copes with the embedded broker's ListOffsets answer) and
honours a per-trigger record limit; ``partitions`` gives one input partition per Kafka partition
range; ``read`` consumes exactly ``[start, end)`` on the executor. Progress lives in the Spark
checkpoint, so a restarted query reads each offset range again exactly as planned.

Use: ``spark.dataSource.register(KafkaSource)`` then
``spark.readStream.format("geops-kafka").option("topic", ...).option("kafka", json.dumps(conf))``
with optional ``maxRecordsPerTrigger``, ``startingOffsets`` (earliest | latest) and
``initialOffsetsPath`` (a file in the checkpoint that pins where a new query starts).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

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


# One consumer per (bootstrap config, topic) per Python worker process, reused across tasks:
# creating and connecting a consumer costs far more than reading a small range. A short fetch
# wait matters: with 50 ms, reading 2,000 records after a re-assign took ~55 ms instead of ~10.
_CONSUMERS: dict[str, Any] = {}
_CONSUMERS_LOCK = threading.Lock()
READ_CONSUMER = {"enable.partition.eof": True, "fetch.wait.max.ms": 5}


def _pooled_consumer(conf: dict[str, str]) -> Any:
    from kafkaio.clients import consumer

    key = json.dumps(conf, sort_keys=True)
    with _CONSUMERS_LOCK:
        c = _CONSUMERS.get(key)
        if c is None:
            c = consumer(conf, **READ_CONSUMER)
            _CONSUMERS[key] = c
    return c


def iter_range(conf: dict[str, str], part: KafkaRange, timeout: float = 60.0
               ) -> Iterator[tuple[int, int, bytes | None, bytes | None, int]]:
    """Exactly the records of ``part`` as (partition, offset, key, value, timestamp ms).

    Fails loudly if Kafka stalls; offsets in the range that hold no record (compaction,
    transaction markers) are skipped once the partition's end-of-log is reached.
    """
    import time

    from confluent_kafka import KafkaError, TopicPartition

    c = _pooled_consumer(conf)
    c.assign([TopicPartition(part.topic, part.partition, part.start)])
    pos = part.start
    deadline = time.monotonic() + timeout
    try:
        while pos < part.end:
            msgs = c.consume(min(10_000, part.end - pos), timeout=0.5)
            if msgs:
                deadline = time.monotonic() + timeout
            elif time.monotonic() > deadline:
                raise RuntimeError(f"Kafka stalled reading {part!r} at offset {pos}")
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= part.end:
                            pos = part.end
                        continue
                    raise RuntimeError(f"reading {part!r}: {err.str()}")
                if m.offset() >= part.end:
                    pos = part.end
                    break
                yield part.partition, m.offset(), m.key(), m.value(), m.timestamp()[1]
                pos = m.offset() + 1
    finally:
        c.unassign()


def read_range(conf: dict[str, str], part: KafkaRange) -> Iterator[pa.RecordBatch]:
    """The records of ``part`` as Arrow batches in the source's schema."""
    cols: dict[str, list] = {name: [] for name in ARROW_SCHEMA.names}
    for partition, offset, key, value, ts in iter_range(conf, part):
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
    """One range per partition that has records between two offsets of this source."""
    return [KafkaRange(topic, int(p), start.get(p, 0), e)
            for p, e in sorted(end.items(), key=lambda kv: int(kv[0]))
            if e > start.get(p, 0)]


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
        self._probe: Any = None
        self.latest: dict[str, int] = {}

    def _ends(self) -> dict[str, int]:
        from kafkaio.offsets import EndOffsets

        if self._probe is None:
            self._probe = EndOffsets(self.conf)
        return {str(p): end for p, end in self._probe(self.topic).items()}

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
        ends = self._ends()
        self.latest = ends
        start = {p: start.get(p, 0) for p in ends}  # partitions added since: from offset 0
        if isinstance(limit, ReadMaxRows):
            return plan_limit(start, ends, limit.max_rows)
        return ends

    def reportLatestOffset(self) -> dict | None:
        return self.latest or None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return ranges(self.topic, start, end)

    def read(self, partition: KafkaRange) -> Iterator[pa.RecordBatch]:
        return read_range(self.conf, partition)

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
