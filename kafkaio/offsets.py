"""Exact end offsets, and reading a topic to its end, on any broker including the embedded one.

The embedded broker (Tansu 0.6.0) answers ListOffsets(latest) with the base offset of the last
record batch instead of the log-end offset, so a reader that trusts it never reads the tail of
a finished stream. The high watermark carried by Fetch responses is right. ``EndOffsets`` asks
ListOffsets first (cheap and exact on Apache Kafka), then fetches from that offset until librdkafka
reports partition EOF, whose offset is the true end. Only the last record batch is read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from kafkaio.clients import KafkaUnavailable, consumer, topic_partitions


class EndOffsets:
    """Finds true end offsets of topic partitions; keep one per caller and reuse it."""

    def __init__(self, client_conf: Mapping[str, str], timeout: float = 30.0):
        self.timeout = timeout
        self._consumer = consumer(client_conf, **{"enable.partition.eof": True,
                                                  "fetch.wait.max.ms": 1})

    def partitions(self, topic: str) -> list[int]:
        return topic_partitions(self._consumer, topic, self.timeout)

    def __call__(self, topic: str, partitions: Sequence[int] | None = None) -> dict[int, int]:
        """{partition: offset after its last record} for the given (default: all) partitions."""
        parts = list(self.partitions(topic) if partitions is None else partitions)
        if not parts:
            return {}
        c = self._consumer
        listed = {}
        for p in parts:
            try:
                listed[p] = c.get_watermark_offsets(TopicPartition(topic, p),
                                                    timeout=self.timeout)[1]
            except Exception as exc:  # KafkaException on timeout / unknown partition
                raise KafkaUnavailable(f"cannot read offsets of {topic}[{p}]: {exc}") from None
        c.assign([TopicPartition(topic, p, max(listed[p], 0)) for p in parts])
        ends: dict[int, int] = {}
        deadline = time.monotonic() + self.timeout
        try:
            while len(ends) < len(parts):
                if time.monotonic() > deadline:
                    missing = sorted(set(parts) - set(ends))
                    raise KafkaUnavailable(f"no end-of-partition answer for {topic}{missing} "
                                           f"within {self.timeout:.0f} s")
                # consume() waits out its timeout unless 10,000 messages come: keep it short,
                # it is the floor of every call (a micro-batch asks once per trigger).
                for msg in c.consume(10000, timeout=0.005):
                    err = msg.error()
                    if err is None:
                        continue
                    if err.code() == KafkaError._PARTITION_EOF:
                        ends[msg.partition()] = msg.offset()
                    elif err.fatal() or not err.retriable():
                        raise KafkaUnavailable(f"reading {topic}: {err.str()}")
        finally:
            c.unassign()
        return ends

    def close(self) -> None:
        self._consumer.close()


def read_to_end(
    client_conf: Mapping[str, str], topic: str, start: Mapping[int, int] | None = None,
    timeout: float = 30.0,
) -> Iterator[Message]:
    """Every record of ``topic`` from ``start`` (default: the beginning) to the end as of now.

    Returns exactly the records that existed when the call began, in offset order per partition.
    """
    probe = EndOffsets(client_conf, timeout)
    try:
        ends = probe(topic)
    finally:
        probe.close()
    begin = {p: (start or {}).get(p, OFFSET_BEGINNING) for p in ends}
    todo = {p for p, end in ends.items() if end > 0 and (begin[p] < 0 or begin[p] < end)}
    if not todo:
        return
    # EOF events finish a partition whose last offsets hold no record (compaction, markers).
    c: Consumer = consumer(client_conf, **{"enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, begin[p]) for p in sorted(todo)])
        deadline = time.monotonic() + timeout
        while todo:
            msgs = c.consume(10000, timeout=0.2)
            if msgs:
                deadline = time.monotonic() + timeout
            elif time.monotonic() > deadline:
                raise KafkaUnavailable(f"reading {topic} stalled before its end: partitions "
                                       f"{sorted(todo)} not finished within {timeout:.0f} s")
            for msg in msgs:
                p = msg.partition()
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    raise KafkaUnavailable(f"reading {topic}: {err.str()}")
                if p not in todo:
                    continue
                if err is None and msg.offset() < ends[p]:
                    yield msg
                if msg.offset() + (0 if err else 1) >= ends[p]:
                    todo.discard(p)
                    c.incremental_unassign([TopicPartition(topic, p)])
    finally:
        c.close()
