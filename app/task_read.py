"""Reading a small batch's publications inside the tasks that join them.

A micro-batch read through Spark's connector is a stage of its own: the read tasks decode and
route the records and hand each join task its items through a shuffle. For a small batch that
stage, with the driver's planning of it and the join tasks' shuffle read, was about half of
what the batch cost (~300 ms before, ~140 ms in one stage; ``docs/results/live/costs``).
Below ``app.one_stage_records`` records the app skips it: every join task reads the batch's
offset ranges itself (they are in Spark's offset log, written before the batch runs), decodes
and routes them all and keeps the items of its own worker. Each record is then decoded and
routed once per worker instead of once, which is why large batches keep the two stages.

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


def read_rows(ranges: BatchRanges) -> list[Record]:
    """The records of ``ranges``, as ``app.tasks.decode_route`` takes them."""
    key = tuple(sorted(ranges.kafka_conf.items()))
    reader = _READERS.get(key)
    if reader is None:
        reader = _READERS[key] = RangeReader(ranges.kafka_conf, exact=True)
    return [Record(m.topic(), m.partition(), m.offset(), m.key(), m.value())
            for m in read_between(ranges.kafka_conf, ranges.topic, ranges.start, ranges.end,
                                  ranges.outage_limit, reuse=reader)]
