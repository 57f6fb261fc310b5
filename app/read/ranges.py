"""Reading a batch's publications in the app's own tasks: a small one inside the tasks that
join it, a large one in read tasks before them.

A micro-batch read through Spark's connector is a stage of its own: the read tasks decode and
route the records and hand each join task its items through a shuffle. For a small batch that
stage, with the driver's planning of it and the join tasks' shuffle read, was about half of
what the batch cost (``docs/results/live/costs``).
Below ``app.one_stage_records`` records the app skips it: every join task reads the batch's
offset ranges itself (they are in Spark's offset log, written before the batch runs), decodes
them all and routes them to its own worker's partitions (``app.batch.tasks.decode_route``). Each
record is then read and decoded once per worker instead of once (cheap next to the join),
which with two workers still cost less than the read stage and its shuffle at every batch size
measured;
the bound caps what one task holds at once, and a larger batch keeps the two stages.

A large batch's read stage reads the same way (``app.large_batch_read`` direct): one read task
per core, each a slice of every partition's range (``BatchRanges.split``), decodes and routes
its records once and hands them to the join tasks through the shuffle. Spark's connector would
fetch the same records in the JVM and hand them to Python as pickled rows, one object each.

The reads use one consumer per Python worker process, kept from batch to batch; they read
committed records only, as the connector does, and a range the log no longer holds whole is
``DataLoss`` (the app's ``--on-data-loss fail``; with ``continue`` every batch takes the
connector, which skips such ranges).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kafkaio.offsets import RangeReader, read_between

# One consumer per Python worker process: a new one costs a connection and a metadata round
# trip, more than reading a small batch.
_READERS: dict[tuple[tuple[str, str], ...], RangeReader] = {}


class Record(NamedTuple):
    """One Kafka record of the publications topic, as the read of a batch hands it on."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class BatchRanges:
    """A micro-batch's offset ranges of the publications topic, as Spark planned them."""

    topic: str
    start: dict[int, int]   # partition -> first offset (a partition missing: its beginning)
    end: dict[int, int]     # partition -> offset after the last
    kafka_conf: dict[str, str]
    outage_limit: float

    @property
    def records(self) -> int:
        """Offsets in the ranges: an upper bound of the records (markers hold none)."""
        return sum(max(0, e - self.start.get(p, 0)) for p, e in self.end.items())

    def split(self, pieces: int) -> list[BatchRanges]:
        """The ranges cut into at most ``pieces`` parts of about as many offsets each, every
        partition's range into consecutive slices (one a part); a partition whose start Spark
        did not record (its log's beginning) stays whole in the first part. Parts that would
        hold nothing are left out."""
        parts: list[tuple[dict[int, int], dict[int, int]]] = [({}, {}) for _ in range(pieces)]
        for p, end in self.end.items():
            if p not in self.start:
                parts[0][1][p] = end
                continue
            first = self.start[p]
            cuts = [first + (end - first) * i // pieces for i in range(pieces + 1)]
            for (start, ends), lo, hi in zip(parts, cuts[:-1], cuts[1:], strict=True):
                if hi > lo:
                    start[p], ends[p] = lo, hi
        return [BatchRanges(self.topic, start, ends, self.kafka_conf, self.outage_limit)
                for start, ends in parts if ends]


def read_rows(ranges: BatchRanges) -> list[Record]:
    """The records of ``ranges``, as ``app.batch.tasks.decode_route`` takes them."""
    key = tuple(sorted(ranges.kafka_conf.items()))
    reader = _READERS.get(key)
    if reader is None:
        reader = _READERS[key] = RangeReader(ranges.kafka_conf, exact=True)
    return [Record(m.topic(), m.partition(), m.offset(), m.key(), m.value())
            for m in read_between(ranges.kafka_conf, ranges.topic, ranges.start, ranges.end,
                                  ranges.outage_limit, reuse=reader)]
