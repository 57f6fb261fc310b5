"""End offsets that are right while producers write, and reading a topic to its end.

Three measured facts shape this module (embedded broker, Tansu 0.6.0):

- ListOffsets(latest) answers the base offset of the last record batch, not the log-end offset,
  so a reader that trusts it never reads the tail of a finished stream. Exact on Apache Kafka.
- The high watermark carried by Fetch responses is right, and librdkafka keeps the newest one
  (``get_watermark_offsets(cached=True)``).
- A fetch near the end of a large partition can take seconds (erratically: the same offset 5 s
  without an answer, then 0.6 s; 0.02 s thirty thousand records earlier), and librdkafka's
  partition-EOF is an event sent only when a fetch comes back empty at the end of the log. An
  end-offset probe that fetched the tail and waited for EOF therefore timed out under a
  concurrent producer (every call, after a few seconds at 20,000 records/s), which killed the
  app's query.

So ``EndOffsets`` never fetches records: its consumer is parked at an offset far beyond any end,
where every fetch comes back empty at once and carries the high watermark; librdkafka refetches
about every ``fetch.wait.max.ms``, so the cached watermark follows the log within ~0.1 s without
a record crossing the wire. A call returns the higher of ListOffsets and that watermark: offsets
known to exist, never waiting for the newest one. On Apache Kafka the parked fetch is answered
OFFSET_OUT_OF_RANGE; the probe then takes ListOffsets, which is exact there.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from kafkaio.clients import KafkaUnavailable, consumer, topic_partitions
from kafkaio.retry import DEFAULT_OUTAGE_LIMIT, Outage, with_retry

PARKED = 2**62  # an offset no partition reaches
# fetch.wait.max.ms of a reader, shortest first. The embedded broker stops looking for records
# when a fetch's wait runs out and answers empty, and deep in a long partition written in small
# batches the search takes longer than a short wait: every fetch came back empty (at 300,000
# records in batches of 16, nothing within 15 s at 5 ms; 0.01-0.3 s at 50-500 ms). A short wait
# keeps small reads fast, so a reader starts short and waits longer once it gets nothing for
# ``ESCALATE_AFTER`` seconds (``docs/architecture.md``, end offsets on a live topic).
FETCH_WAITS_MS = (5, 500, 5000)
ESCALATE_AFTER = 1.0
# seconds a partition's fetch answers may stand still before ListOffsets checks that the
# broker still answers (a paused broker leaves the cache as it was)
RELIST_EVERY = 1.0
_OUT_OF_RANGE = (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)


class EndOffsets:
    """End offsets of topic partitions that are known to exist; keep one and reuse it.

    ``timeout`` bounds each request to the broker (metadata, ListOffsets); ``answer_wait`` how
    long the first call for a partition waits for its first fetch answer (later calls answer
    from the cache at once). ``answered`` holds the partitions of the last call whose end is
    exact as of the last fetch (or as of ListOffsets on a broker where that is exact).
    """

    def __init__(self, client_conf: Mapping[str, str], timeout: float = 30.0,
                 answer_wait: float = 2.0):
        self.timeout = timeout
        self.answer_wait = answer_wait
        self.answered: set[int] = set()
        self._consumer = consumer(client_conf, **{"fetch.wait.max.ms": 50,
                                                  "auto.offset.reset": "error",
                                                  "enable.partition.eof": False})
        self._parked: set[tuple[str, int]] = set()
        self._listed_exact: set[tuple[str, int]] = set()  # the broker refused the parked fetch
        # per (topic, partition): the cached end last seen, and since when it has not moved
        self._moved: dict[tuple[str, int], tuple[int, float]] = {}

    def partitions(self, topic: str) -> list[int]:
        return topic_partitions(self._consumer, topic, self.timeout)

    def listed(self, topic: str, partitions: Sequence[int]) -> dict[int, tuple[int, int]]:
        """{partition: (low, high)} as ListOffsets says (high is a lower bound on Tansu)."""
        out = {}
        for p in partitions:
            try:
                out[p] = self._consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                              timeout=self.timeout)
            except Exception as exc:  # KafkaException on timeout / unknown partition
                raise KafkaUnavailable(f"cannot read offsets of {topic}[{p}]: {exc}") from None
        return out

    def _serve(self, topic: str) -> None:
        """Handle the parked consumer's events: an out-of-range answer means ListOffsets is
        the broker's exact answer; other errors are retried by librdkafka."""
        for msg in self._consumer.consume(1000, timeout=0):
            err = msg.error()
            if err is not None and err.code() in _OUT_OF_RANGE and msg.topic() == topic:
                self._listed_exact.add((topic, msg.partition()))

    def __call__(self, topic: str, partitions: Sequence[int] | None = None) -> dict[int, int]:
        """{partition: an end offset known to exist} for the given (default: all) partitions.

        Exact when nobody writes; while producers write, about one fetch interval behind.
        """
        parts = list(self.partitions(topic) if partitions is None else partitions)
        if not parts:
            return {}
        new = [TopicPartition(topic, p, PARKED) for p in parts if (topic, p) not in self._parked]
        if new:
            self._consumer.incremental_assign(new)
            self._parked.update((topic, tp.partition) for tp in new)
        self._serve(topic)
        cached = {p: self._cached(topic, p) for p in parts}
        # ListOffsets waits behind the parked fetch on the same connection (on the embedded
        # broker ~200 ms while producers write: most of a saturated app's planning time): ask
        # it only where the cache cannot answer, or has not moved for RELIST_EVERY, as a check
        # that the broker still answers (a paused broker leaves the cache as it was). A fetch
        # answer that moved the end is that proof already.
        now = time.monotonic()
        ask = [p for p in parts if cached[p] < 0 or self._still(topic, p, cached[p], now)]
        listed = self.listed(topic, ask)
        for p in ask:
            self._moved[(topic, p)] = (cached[p], now)
        ends = {p: max(listed[p][1] if p in listed else 0, cached[p], 0) for p in parts}
        deadline = time.monotonic() + self.answer_wait
        while True:
            self._serve(topic)
            answered = set()
            for p in parts:
                if (topic, p) in self._listed_exact:
                    answered.add(p)
                    continue
                high = self._cached(topic, p)
                if high >= 0:
                    ends[p] = max(ends[p], high)
                    answered.add(p)
            if len(answered) == len(parts) or time.monotonic() >= deadline:
                break
            time.sleep(0.005)
        self.answered = answered
        return ends

    def _still(self, topic: str, p: int, cached: int, now: float) -> bool:
        """Whether partition ``p``'s cached end has not moved for RELIST_EVERY (it is noted
        when it has)."""
        seen = self._moved.get((topic, p))
        if seen is None or seen[0] != cached:
            self._moved[(topic, p)] = (cached, now)
            return seen is None
        return now - seen[1] >= RELIST_EVERY

    def _cached(self, topic: str, p: int) -> int:
        """The high watermark of the newest fetch answer for a partition (or < 0: none)."""
        if (topic, p) in self._listed_exact:
            return -1
        return self._consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1]

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
    probe = EndOffsets(client_conf, timeout=10.0, answer_wait=10.0)
    try:
        ends = with_retry(lambda: probe(topic), outage, f"end offsets of {topic}")
    finally:
        probe.close()
    yield from read_between(client_conf, topic, start or {}, ends, outage_limit)


def reader_consumer(client_conf: Mapping[str, str], level: int = 0) -> Consumer:
    """A consumer as ``read_between`` reads with (``level``: how long fetches wait)."""
    return consumer(client_conf, **{"enable.partition.eof": True,
                                    "fetch.wait.max.ms": FETCH_WAITS_MS[level]})


class RangeReader:
    """A consumer ``read_between`` reuses from call to call (``reuse``), for a caller that reads
    every batch: a new consumer costs a connection and a metadata round trip each time. It keeps
    the fetch wait that last found records: on the embedded broker a partition written in many
    small batches (a burst of subscription changes) answers short fetches empty, and starting
    every read again at the shortest wait cost each later batch ``ESCALATE_AFTER`` (measured:
    1.03 s per batch after a burst of 300,000 changes, against 6 ms before it)."""

    def __init__(self, client_conf: Mapping[str, str]):
        self.conf = dict(client_conf)
        self.level = 0
        self.consumer = reader_consumer(self.conf, 0)

    def escalate(self) -> None:
        """Read with the next longer fetch wait from now on."""
        self.consumer.close()
        self.level += 1
        self.consumer = reader_consumer(self.conf, self.level)

    def close(self) -> None:
        self.consumer.close()


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
    after) instead of a new consumer; a longer fetch wait found needed stays with it.
    """
    outage = Outage(client_conf.get("bootstrap.servers", "?"), outage_limit)
    begin = {p: start.get(p, OFFSET_BEGINNING) for p in ends}
    todo = {p for p, end in ends.items() if end > 0 and (begin[p] < 0 or begin[p] < end)}
    if not todo:
        return
    # EOF events finish a partition whose last offsets hold no record (compaction, markers).
    level = 0 if reuse is None else reuse.level

    def reader(at: Mapping[int, int]) -> Consumer:
        c = reader_consumer(client_conf, level) if reuse is None else reuse.consumer
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
    quiet_since = time.monotonic()
    try:
        while todo:
            want = max(1, min(10000, sum(left[p] for p in todo)))
            msgs = c.consume(want, timeout=0.2)
            if msgs:
                outage.ok()
                quiet_since = time.monotonic()
            else:
                outage.failed(f"reading {topic} partitions {sorted(todo)} to their end",
                              sleep=False)
                if (time.monotonic() - quiet_since >= ESCALATE_AFTER
                        and level + 1 < len(FETCH_WAITS_MS)):
                    level += 1  # the broker may need longer to find the records: wait longer
                    done(c)
                    if reuse is not None:
                        reuse.escalate()
                    c = reader(pos)
                    quiet_since = time.monotonic()
            for msg in msgs:
                p = msg.partition()
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    if err.fatal() or not err.retriable():
                        raise KafkaUnavailable(f"reading {topic}: {err.str()}")
                    continue
                if p not in todo:
                    continue
                if err is None and pos[p] <= msg.offset() < ends[p]:  # not a stale fetch
                    left[p] = ends[p] - msg.offset() - 1
                    pos[p] = msg.offset() + 1
                    yield msg
                if msg.offset() + (0 if err else 1) >= ends[p]:
                    todo.discard(p)
                    c.incremental_unassign([TopicPartition(topic, p)])
    finally:
        done(c)
