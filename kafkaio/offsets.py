"""End offsets of topic partitions, and reading a topic (or offset ranges of it) to an end.

``EndOffsets`` asks ListOffsets, which on Apache Kafka is the log-end offset (for a
``read_committed`` client, the last stable offset: records of open transactions are not yet
readable). ``read_between`` reads exact offset ranges with a consumer that reports the end of
each partition, so a range whose last offsets hold no record (compaction, transaction markers)
still finishes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from kafkaio.clients import consumer, topic_partitions
from kafkaio.errors import DataLoss, KafkaUnavailable
from kafkaio.retry import DEFAULT_OUTAGE_LIMIT, Outage, with_retry

# How long a read's fetch may wait at the end of a partition before the broker answers empty:
# Apache Kafka answers as soon as a record is there, so this only bounds an idle wait.
FETCH_WAIT_MS = 50
# ListOffsets is asked again after a retriable error (NOT_LEADER_OR_FOLLOWER, ...), waiting up
# to this long in between, until the probe's timeout
LEADER_WAIT_S = 0.5
NO_LEADER_YET = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)


class EndOffsets:
    """End offsets of topic partitions (ListOffsets); keep one and reuse it: it holds a
    connected consumer. ``timeout`` bounds each request to the broker."""

    def __init__(self, client_conf: Mapping[str, str], timeout: float = 30.0):
        self.timeout = timeout
        self._conf = client_conf
        self._consumer = consumer(client_conf, **{"enable.partition.eof": False})

    def partitions(self, topic: str) -> list[int]:
        return topic_partitions(self._consumer, topic, self.timeout, self._conf)

    def listed(self, topic: str, partitions: Sequence[int]) -> dict[int, tuple[int, int]]:
        """{partition: (low, high)} as ListOffsets says."""
        self._consumer.poll(0)  # its queued log lines go to logging now, not all at close
        out = {}
        for p in partitions:
            deadline = time.monotonic() + self.timeout
            attempt = 0
            while True:
                try:
                    out[p] = self._consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                                  timeout=self.timeout)
                    break
                except KafkaException as exc:  # timeout, unknown partition, moved leader
                    err = exc.args[0] if exc.args else None
                    # a leader that moved (a node that died) or is not elected yet (a topic
                    # just created, which on a busy machine takes seconds) is found again by
                    # the client's next metadata request
                    attempt += 1
                    # librdkafka does not flag these retriable when ListOffsets returns them
                    if (isinstance(err, KafkaError)
                            and (err.retriable() or err.code() in NO_LEADER_YET)
                            and time.monotonic() < deadline):
                        time.sleep(min(0.1 * attempt, LEADER_WAIT_S))
                        continue
                    raise KafkaUnavailable(f"cannot read offsets of {topic}[{p}]: {exc}") from None
        return out

    def __call__(self, topic: str, partitions: Sequence[int] | None = None) -> dict[int, int]:
        """{partition: end offset} for the given (default: all) partitions."""
        parts = list(self.partitions(topic) if partitions is None else partitions)
        return {p: max(high, 0) for p, (_, high) in self.listed(topic, parts).items()}

    def close(self) -> None:
        self._consumer.close()


def read_to_end(
    client_conf: Mapping[str, str], topic: str, start: Mapping[int, int] | None = None,
    outage_limit: float = DEFAULT_OUTAGE_LIMIT,
) -> Iterator[Message]:
    """Every record of ``topic`` from ``start`` (default: the beginning) to its end as of now.

    Returns the records up to end offsets taken when the call began (``EndOffsets``), in offset
    order per partition; records written meanwhile are left for the caller's next read. A
    broker that stops answering is waited for, up to ``outage_limit`` (then ``KafkaOutage``).
    """
    outage = Outage(client_conf.get("bootstrap.servers", "?"), outage_limit)
    probe = EndOffsets(client_conf, timeout=10.0)
    try:
        ends = with_retry(lambda: probe(topic), outage, f"end offsets of {topic}")
    finally:
        probe.close()
    yield from read_between(client_conf, topic, start or {}, ends, outage_limit)


def reader_consumer(client_conf: Mapping[str, str], exact: bool = False) -> Consumer:
    """A consumer as ``read_between`` reads with; ``exact``: one that reports a start offset
    the log no longer holds instead of starting over at its beginning."""
    return consumer(client_conf, **{"enable.partition.eof": True,
                                    "fetch.wait.max.ms": FETCH_WAIT_MS,
                                    **({"auto.offset.reset": "error"} if exact else {})})


class RangeReader:
    """A consumer ``read_between`` reuses from call to call (``reuse``), for a caller that reads
    every batch: a new consumer costs a connection and a metadata round trip each time."""

    def __init__(self, client_conf: Mapping[str, str], exact: bool = False):
        self.conf = dict(client_conf)
        self.exact = exact  # read ranges that must exist whole (``read_between``'s ``exact``)
        self.consumer = reader_consumer(self.conf, exact)

    def close(self) -> None:
        self.consumer.close()


def _check_end(c: Consumer, topic: str, partition: int, end: int) -> None:
    """``DataLoss`` when ``topic[partition]`` now ends below ``end`` (asked of the broker: an
    end-of-partition event can also be a stale one, of an earlier read of the same consumer)."""
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10.0)
    except KafkaException:
        return  # not answered: the read goes on, within the outage limit
    if high < end:
        raise DataLoss(f"{topic}[{partition}] now ends at {high}, below offset {end} that the "
                       f"batch reads to")


def read_between(
    client_conf: Mapping[str, str], topic: str, start: Mapping[int, int],
    ends: Mapping[int, int], outage_limit: float = DEFAULT_OUTAGE_LIMIT,
    reuse: RangeReader | None = None,
) -> Iterator[Message]:
    """The records of ``topic`` from ``start`` (a partition missing: its beginning) up to, not
    including, ``ends``, in offset order per partition.

    Offsets that hold no record (compaction, markers) are skipped once a record or the end of
    the log at or past the end is seen. A broker that stops answering is waited for, up to
    ``outage_limit``. ``reuse``: a ``RangeReader`` to read with (assigned here, unassigned
    after) instead of a new consumer. With a ``RangeReader`` made ``exact`` the ranges must
    exist whole: a start the log no longer holds, or a log that now ends below a range's end
    (the topic was deleted and created again, or truncated), raises ``DataLoss``.
    """
    exact = reuse is not None and reuse.exact
    outage = Outage(client_conf.get("bootstrap.servers", "?"), outage_limit)
    begin = {p: start.get(p, OFFSET_BEGINNING) for p in ends}
    todo = {p for p, end in ends.items() if end > 0 and (begin[p] < 0 or begin[p] < end)}
    if not todo:
        return
    # EOF events finish a partition whose last offsets hold no record (compaction, markers).

    def reader(at: Mapping[int, int]) -> Consumer:
        c = reader_consumer(client_conf) if reuse is None else reuse.consumer
        c.assign([TopicPartition(topic, p, at[p]) for p in sorted(todo)])
        return c

    def done(c: Consumer) -> None:
        if reuse is not None and c is reuse.consumer:
            c.unassign()
        else:
            c.close()

    # consume(n) waits out its timeout unless n messages come: ask for what is still expected
    # (an upper bound where offsets hold no record), so a short read is not a 0.2 s one.
    left = {p: ends[p] - max(begin[p], 0) for p in todo}
    pos = dict(begin)
    c = reader(pos)
    try:
        while todo:
            want = max(1, min(10000, sum(left[p] for p in todo)))
            msgs = c.consume(want, timeout=0.2)
            if msgs:
                outage.ok()
            else:
                outage.failed(f"reading {topic} partitions {sorted(todo)} to their end",
                              sleep=False)
            for msg in msgs:
                p = msg.partition()
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    if exact and err.code() == KafkaError._AUTO_OFFSET_RESET:
                        raise DataLoss(f"{topic}[{p}] no longer holds offset {pos.get(p)} "
                                       f"that the batch starts at: {err.str()}")
                    if err.fatal() or not err.retriable():
                        raise KafkaUnavailable(f"reading {topic}: {err.str()}")
                    continue
                if p not in todo:
                    continue
                if err is None and pos[p] <= msg.offset() < ends[p]:  # not a stale fetch
                    left[p] = ends[p] - msg.offset() - 1
                    pos[p] = msg.offset() + 1
                    yield msg
                if exact and err is not None and msg.offset() < ends[p]:
                    _check_end(c, topic, p, ends[p])  # the end of the log, or a stale one
                    continue
                if msg.offset() + (0 if err else 1) >= ends[p]:
                    todo.discard(p)
                    c.incremental_unassign([TopicPartition(topic, p)])
    finally:
        done(c)
