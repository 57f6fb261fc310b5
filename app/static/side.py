"""The static side of the join: where each static partition lives and how it reaches the join.

Both modes key records (``app.records.StaticPartition``) by worker and partition them with
``by_worker``, so the static records and the stream items of worker w meet in the w-th task of
one co-partitioned, narrow union. Which mode keeps partitions resident: ``app.joins``.

- **STAL** keeps each partition in Spark's cache on its owner (partitioned by the
  assignment), so only stream items cross the network per batch. The join task also keeps
  the built index in its process (``app.batch.tasks``), keyed by (static version, residency
  epoch), so an index is built once per residency. A new assignment re-partitions the cached
  data: only partitions whose owner changed move.
- **STRL** keeps the partitions at home (cached by partition id) and ships every one of them
  through the shuffle to the worker that joins it, every batch, where its index is rebuilt.

Either way the partitions are built on the executors from the subscriptions topic
(``app.static.build``): their data never passes through the driver.

A hot partition may have several owners (replicas, ``schemas.assignment``). In STAL every
owner holds its own copy: a new owner gets one shipped once (from an owner that drops the
partition when there is one, as a move would, else from a current one), an owner that is no
longer one drops it; in STRL the partition is shipped to each of its owners every batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from pyspark import RDD, SparkContext, StorageLevel

from app.joins import JOIN_MODES
from app.records import StaticPartition
from app.static.build import BuildSpec, build_payloads, sizes_of
from geops.strategies.churn import fold_deltas
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
    """Static partitions of one strategy placed for a given join mode.

    The partitions' data is built on the executors from the subscriptions topic
    (``app.static.build``) and stays there; the driver keeps their sizes only.
    """

    def __init__(self, sc: SparkContext, spec: BuildSpec, join: str, workers: int,
                 owners: Sequence[Owners], epoch: int, version: int = 1,
                 build: Callable[..., RDD] = build_payloads,
                 sizes: np.ndarray | None = None):
        """``build``: what makes the payloads (``build_payloads``, or a snapshot's reader);
        ``sizes``: their bytes per partition when known (a snapshot's), else measured by a job."""
        self.sc = sc
        self.spec = spec
        self._builder = build  # ``build_payloads``; tests give one that needs no broker
        self.join = join
        self.resident = JOIN_MODES[join].resident
        self.workers = workers
        self._keyed_by = self._key_function(workers)
        self.version = version
        self.partitions = spec.num_partitions
        self.owners: list[Owners] = [tuple(o) for o in owners]
        # epoch since which each (partition, owner) holds the partition
        self.since = {(p, w): epoch for p, o in enumerate(self.owners) for w in o}
        self.base_seq = [0] * self.partitions   # last subscription change in each payload
        self._replaced: list[RDD] = []  # cached payloads a fold replaced, until it has run
        t0 = time.perf_counter()
        self.rdd: RDD = self._cache(self._build())
        # payload bytes per partition
        self.sizes = (sizes_of(self.rdd, self.partitions) if sizes is None
                      else np.asarray(sizes, np.int64).copy())
        self.build_s = time.perf_counter() - t0

    def _key_function(self, workers: int) -> Callable[[int], int]:
        """How the cached records are partitioned: by owner (STAL), by partition id (STRL)."""
        return by_worker if self.resident else (lambda pid: pid % workers)

    @property
    def assignment(self) -> list[int]:
        """The primary owner of each partition."""
        return [o[0] for o in self.owners]

    def _build(self) -> RDD:
        """The payloads, built on the executors: on their owners (STAL) or at home (STRL)."""
        owners = list(self.owners)
        targets = (lambda pid: owners[pid]) if self.resident else (lambda pid: (pid,))
        return self._builder(self.sc, self.spec, self.workers, targets, self._keyed_by)

    def rebase(self, deltas: dict[int, tuple], seq: int) -> None:
        """Fold subscription changes into the cached payloads where they live (``seq``: the
        newest change they include; only the deltas travel). Resident indexes that applied
        the changes stay; owners do not change.

        Lazily: the next batch's job folds them on the executors, beside reading the stream,
        and its join tasks report the new sizes (``measured``); a job of its own held up the
        batch by ~0.5 s. The payloads replaced are dropped once that job has run."""
        if not deltas:
            return

        def fold(kv):
            part = kv[1]
            if part.partition not in deltas:
                return kv
            return kv[0], StaticPartition(part.partition,
                                          fold_deltas(part.payload, deltas[part.partition]))

        # map, then a shuffle to the same places: the cache holds a shuffle's output, not a
        # Python RDD (see ``app.static.build.build_payloads``)
        self._replaced.append(self.rdd)
        self.rdd = (self.rdd.map(fold).partitionBy(self.workers, self._keyed_by)
                    .persist(StorageLevel.MEMORY_ONLY))
        for pid in deltas:
            self.base_seq[pid] = seq

    def measured(self, sizes: Mapping[int, int]) -> None:
        """After a batch's job: the payload sizes its join tasks were given. The payloads that
        job has replaced (by a fold) are cached anew now, so the old ones are dropped."""
        for pid, size in sizes.items():
            self.sizes[pid] = size
        self._drop_replaced()

    def _drop_replaced(self) -> None:
        while self._replaced:
            self._replaced.pop().unpersist()

    @property
    def total_bytes(self) -> int:
        return int(self.sizes.sum())

    def residency(self) -> dict[tuple[int, int], tuple[int, int]]:
        """Per (partition, owner), the key of its current residency: (static version, epoch)."""
        return {held: (self.version, e) for held, e in self.since.items()}

    def _cache(self, rdd: RDD) -> RDD:
        rdd = rdd.persist(StorageLevel.MEMORY_ONLY)
        rdd.count()  # materialise now, so moving is timed here and not in the next batch
        return rdd

    def apply(self, owners: Sequence[Owners], epoch: int, workers: int | None = None) -> Move:
        """Adopt new owners; in STAL ship each partition to the owners that do not hold it
        yet (a move, or a new replica) and drop it where it has no owner any more.

        ``workers``: a new number of workers (executors lost or back); the owners fit it."""
        new = [tuple(o) for o in owners]
        gained = [(p, w) for p, o in enumerate(new) for w in o if w not in self.owners[p]]
        dropped = [(p, w) for p, o in enumerate(self.owners) for w in o if w not in new[p]]
        t0 = time.perf_counter()
        reshaped = workers is not None and workers != self.workers
        if reshaped:
            self.workers = workers
            self._keyed_by = self._key_function(workers)
        if reshaped and not self.resident:
            old = self.rdd
            self.rdd = self._cache(old.partitionBy(self.workers, self._keyed_by))
            old.unpersist()
        if self.resident and (gained or dropped or reshaped):
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
        shipped = int(sum(self.sizes[p] for p, _ in gained)) if self.resident else 0
        moved = sorted({p for p, _ in gained})
        return Move(epoch, moved, shipped, (time.perf_counter() - t0) * 1000, dropped)

    def for_batch(self) -> RDD:
        """Worker-keyed static records for this batch's join, under the current owners."""
        if self.resident:
            return self.rdd
        owners = list(self.owners)
        return (self.rdd.flatMap(lambda kv: [(w, kv[1]) for w in owners[kv[0]]])
                .partitionBy(self.workers, by_worker))

    def close(self) -> None:
        self._drop_replaced()
        self.rdd.unpersist()
