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

A hot partition may have several owners (replicas, ``schemas.assignment``). In STAL every
owner holds its own copy: a new owner gets one shipped once (from an owner that drops the
partition when there is one, as a move would, else from a current one), an owner that is no
longer one drops it; in STRL the partition is shipped to each of its owners every batch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark import RDD, SparkContext, StorageLevel

from app.joins import JOIN_MODES
from app.records import StaticPartition
from geops.strategies import Strategy
from schemas.assignment import Owners


def by_worker(worker: int) -> int:
    """Partition function of every worker-keyed RDD (the same object keeps them co-partitioned)."""
    return worker


@dataclass(frozen=True)
class Move:
    """What a rebalance cost the static side: ``partitions`` that reached a worker that did
    not hold them (moved or replicated), the ``bytes`` shipped for them (STAL), and how long
    it took; ``dropped``: (partition, worker) copies given up."""

    epoch: int
    partitions: list[int]
    bytes: int
    duration_ms: float
    dropped: list[tuple[int, int]] = field(default_factory=list)


def shipping_plan(old: Sequence[Owners], new: Sequence[Owners]
                  ) -> dict[tuple[int, int], list[int]]:
    """(partition, worker holding it now) -> the new owners it ships a copy to.

    Each new owner of a partition gets one copy, from an old owner that gives the partition up
    when there is one (so a plain move ships from the old owner to the new), else from the
    partition's first old owner that keeps it.
    """
    plan: dict[tuple[int, int], list[int]] = {}
    for p, (was, now) in enumerate(zip(old, new, strict=True)):
        gained = [w for w in now if w not in was]
        if not gained:
            continue
        leaving = [w for w in was if w not in now]
        sources = leaving or [was[0]]
        for i, w in enumerate(gained):
            plan.setdefault((p, sources[i % len(sources)]), []).append(w)
    return plan


class StaticSide:
    """Static partitions of one strategy placed for a given join mode."""

    def __init__(self, sc: SparkContext, strategy: Strategy, join: str, workers: int,
                 owners: Sequence[Owners], epoch: int, version: int = 1):
        self.sc = sc
        self.join = join
        self.resident = JOIN_MODES[join].resident
        self.workers = workers
        self.version = version
        self.partitions = strategy.num_partitions
        self.payloads = [strategy.partition_payload(p) for p in range(self.partitions)]
        self.owners: list[Owners] = [tuple(o) for o in owners]
        # epoch since which each (partition, owner) holds the partition
        self.since = {(p, w): epoch for p, o in enumerate(self.owners) for w in o}
        self.base_seq = [0] * self.partitions   # last subscription change in each payload
        self.rdd: RDD | None = None
        self._place()

    @property
    def assignment(self) -> list[int]:
        """The primary owner of each partition."""
        return [o[0] for o in self.owners]

    def _place(self) -> None:
        """Cache the payloads: on their owners (STAL) or at home (STRL)."""
        if self.resident:
            records = [(w, StaticPartition(p, self.payloads[p])) for p in
                       range(self.partitions) for w in self.owners[p]]
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

    def residency(self) -> dict[tuple[int, int], tuple[int, int]]:
        """Per (partition, owner), the key of its current residency: (static version, epoch)."""
        return {held: (self.version, e) for held, e in self.since.items()}

    def _cache(self, rdd: RDD) -> RDD:
        rdd = rdd.persist(StorageLevel.MEMORY_ONLY)
        rdd.count()  # materialise now, so moving is timed here and not in the next batch
        return rdd

    def apply(self, owners: Sequence[Owners], epoch: int) -> Move:
        """Adopt new owners; in STAL ship each partition to the owners that do not hold it
        yet (a move, or a new replica) and drop it where it has no owner any more."""
        new = [tuple(o) for o in owners]
        gained = [(p, w) for p, o in enumerate(new) for w in o if w not in self.owners[p]]
        dropped = [(p, w) for p, o in enumerate(self.owners) for w in o if w not in new[p]]
        t0 = time.perf_counter()
        if self.resident and (gained or dropped):
            plan = shipping_plan(self.owners, new)
            keep = [frozenset(o) for o in new]

            def targets(kv: tuple[int, StaticPartition]) -> list[tuple[int, StaticPartition]]:
                worker, part = kv
                to = [worker] if worker in keep[part.partition] else []
                return [(w, part) for w in to + plan.get((part.partition, worker), [])]

            old = self.rdd
            self.rdd = self._cache(old.flatMap(targets).partitionBy(self.workers, by_worker))
            old.unpersist()
        for held in dropped:
            del self.since[held]
        for held in gained:
            self.since[held] = epoch
        self.owners = new
        shipped = sum(len(self.payloads[p]) for p, _ in gained) if self.resident else 0
        moved = sorted({p for p, _ in gained})
        return Move(epoch, moved, shipped, (time.perf_counter() - t0) * 1000, dropped)

    def for_batch(self) -> RDD:
        """Worker-keyed static records for this batch's join, under the current owners."""
        if self.resident:
            return self.rdd
        owners = list(self.owners)
        return (self.rdd.flatMap(lambda kv: [(w, StaticPartition(kv[0], kv[1]))
                                             for w in owners[kv[0]]])
                .partitionBy(self.workers, by_worker))

    def close(self) -> None:
        if self.rdd is not None:
            self.rdd.unpersist()
