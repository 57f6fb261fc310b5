"""The static side of the join: where each static partition lives and how it reaches the join.

Both modes key records (``app.records.StaticPartition``) by worker and partition them with
``by_worker``, so the static records and the stream items of worker w meet in the w-th task of
one co-partitioned, narrow union. Which mode keeps partitions resident: ``app.joins``.

- **STAL** keeps each partition in Spark's cache on its owner (partitioned by the
  assignment), so only stream items cross the network per batch. The join task also keeps
  the built index in its process (``app.tasks``), keyed by (static version, residency
  epoch), so an index is built once per residency. A new assignment re-partitions the cached
  data: only partitions whose owner changed move.
- **STRL** keeps the partitions at home (cached by partition id) and ships every one of them
  through the shuffle to the worker that joins it, every batch, where its index is rebuilt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark import RDD, SparkContext, StorageLevel

from app.joins import JOIN_MODES
from app.records import StaticPartition
from geops.strategies import Strategy
from schemas.assignment import moves_between


def by_worker(worker: int) -> int:
    """Partition function of every worker-keyed RDD (the same object keeps them co-partitioned)."""
    return worker


@dataclass(frozen=True)
class Move:
    """What a rebalance cost the static side."""

    epoch: int
    partitions: list[int]
    bytes: int
    duration_ms: float


class StaticSide:
    """Static partitions of one strategy placed for a given join mode."""

    def __init__(self, sc: SparkContext, strategy: Strategy, join: str, workers: int,
                 assignment: list[int], epoch: int, version: int = 1):
        self.sc = sc
        self.join = join
        self.resident = JOIN_MODES[join].resident
        self.workers = workers
        self.version = version
        self.partitions = strategy.num_partitions
        self.payloads = [strategy.partition_payload(p) for p in range(self.partitions)]
        self.assignment = list(assignment)
        self.since = [epoch] * self.partitions  # epoch each partition became resident
        self.base_seq = [0] * self.partitions   # last subscription change in each payload
        self.rdd: RDD | None = None
        self._place()

    def _place(self) -> None:
        """Cache the payloads: on their owners (STAL) or at home (STRL)."""
        if self.resident:
            records = [(self.assignment[p], StaticPartition(p, self.payloads[p])) for p in
                       range(self.partitions)]
            self.rdd = self._cache(self.sc.parallelize(records, max(1, self.workers))
                                   .partitionBy(self.workers, by_worker))
        else:
            home = [(p, self.payloads[p]) for p in range(self.partitions)]
            self.rdd = self._cache(self.sc.parallelize(home, max(1, self.workers)))

    def rebase(self, payloads: dict[int, bytes], seq: int) -> None:
        """Fold subscription changes into the cached payloads (``seq``: the newest change
        they include). Resident indexes that applied the changes stay; owners do not change."""
        if not payloads:
            return
        for pid, data in payloads.items():
            self.payloads[pid] = data
            self.base_seq[pid] = seq
        old = self.rdd
        self._place()
        if old is not None:
            old.unpersist()

    @property
    def total_bytes(self) -> int:
        return sum(len(p) for p in self.payloads)

    def residency(self) -> tuple[tuple[int, int], ...]:
        """Per partition, the key of its current residency: (static version, epoch)."""
        return tuple((self.version, e) for e in self.since)

    def _cache(self, rdd: RDD) -> RDD:
        rdd = rdd.persist(StorageLevel.MEMORY_ONLY)
        rdd.count()  # materialise now, so moving is timed here and not in the next batch
        return rdd

    def apply(self, assignment: list[int], epoch: int) -> Move:
        """Adopt a new assignment; in STAL move the partitions whose owner changed."""
        moved = [p for p, _, _ in moves_between(self.assignment, assignment)]
        t0 = time.perf_counter()
        if self.resident and moved:
            owners = list(assignment)
            old = self.rdd
            self.rdd = self._cache(old.map(lambda kv: (owners[kv[1].partition], kv[1]))
                                   .partitionBy(self.workers, by_worker))
            old.unpersist()
        for p in moved:
            self.since[p] = epoch
        self.assignment = list(assignment)
        shipped = sum(len(self.payloads[p]) for p in moved) if self.resident else 0
        return Move(epoch, moved, shipped, (time.perf_counter() - t0) * 1000)

    def for_batch(self) -> RDD:
        """Worker-keyed static records for this batch's join, under the current assignment."""
        if self.resident:
            return self.rdd
        owners = list(self.assignment)
        return (self.rdd.map(lambda kv: (owners[kv[0]], StaticPartition(kv[0], kv[1])))
                .partitionBy(self.workers, by_worker))

    def close(self) -> None:
        if self.rdd is not None:
            self.rdd.unpersist()
