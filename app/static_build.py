"""Static partitions built where they live: executors read the subscriptions topic themselves.

The driver builds what routing needs (the partitioner, RIsPS's / RIhPS's global index) from
the subscriptions it reads anyway, but the partitions' data never passes through it or through a
task closure: a task per slice of the topic reads its records straight from Kafka, the last
record per subscription id wins (tombstones delete, as compaction would leave the topic),
invalid geometries are dropped (the driver, which reads the same offsets, dead-letters them),
each subscription is placed by the strategy's own rule with the broadcast partitioner, and the
pieces of each partition are shuffled straight to the worker that keeps it (STAL) or to its
home (STRL), where they become one payload (``geops.strategies.payload``), byte for byte the
one the driver would have made.

A 300,000-subscription static side shipped from the driver was a 185 MB task and an
OutOfMemoryError in the driver's dispatcher (issue 26); here the largest thing a task carries is
its (partition, start, end) slice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from geops.model import Relation, Subscriptions, geometries_from_wkb
from geops.strategies import payload
from geops.strategies.strategy import KINDS

# Records read by one task; a topic partition longer than this is read by several tasks.
RECORDS_PER_TASK = 100_000

Slice = tuple[int, int, int]  # (topic partition, first offset, end offset)
Latest = tuple[int, int, bytes | None, int]  # (topic partition, offset, WKB or None, relation)


@dataclass(frozen=True)
class BuildSpec:
    """Where the subscriptions of the static side are and how to place them."""

    strategy: str
    num_partitions: int
    partitioner: Any            # Broadcast of the spatial partitioner, or None (RIhPS)
    kafka_conf: dict[str, str]
    topic: str
    ends: dict[int, int]        # {topic partition: end offset} the driver read up to
    outage_limit: float = 300.0

    def slices(self, per_task: int = RECORDS_PER_TASK) -> list[Slice]:
        """The offset ranges the read tasks take, at most ``per_task`` offsets each."""
        return [(p, start, min(start + per_task, end))
                for p, end in sorted(self.ends.items()) for start in range(0, end, per_task)]


def read_slice(spec: BuildSpec, part: Slice) -> Iterator[tuple[int, Latest]]:
    """(subscription id, its newest record in the slice) for every id the slice holds."""
    from kafkaio.offsets import read_between
    from schemas import DecodeError, codec

    c = codec()
    p, start, end = part
    latest: dict[int, Latest] = {}
    for msg in read_between(spec.kafka_conf, spec.topic, {p: start}, {p: end},
                            spec.outage_limit):
        if msg.value() is None:
            # a key that is no subscription id: the driver dead-letters it
            with contextlib.suppress(TypeError, ValueError):
                latest[int(msg.key())] = (p, msg.offset(), None, 0)
            continue
        try:
            rec = c.decode_as("Subscription", msg.value())
        except DecodeError:
            continue  # dead-lettered by the driver
        latest[rec["id"]] = (p, msg.offset(), rec["geometry"], int(Relation[rec["relation"]]))
    return iter(latest.items())


def newer(a: Latest, b: Latest) -> Latest:
    """The later of two records of one id (by topic partition, then offset)."""
    return a if (a[0], a[1]) >= (b[0], b[1]) else b


def place_pieces(spec: BuildSpec, rows: Iterable[tuple[int, Latest]]
                 ) -> Iterator[tuple[int, bytes]]:
    """(static partition, payload of its subscriptions among ``rows``) for every partition
    these live subscriptions belong to under the strategy's placement rule."""
    live = sorted((sid, rec) for sid, rec in rows if rec[2] is not None)
    if not live:
        return
    ids = np.array([sid for sid, _ in live], np.int64)
    geoms, problems = geometries_from_wkb([rec[2] for _, rec in live])
    rels = np.array([rec[3] for _, rec in live], np.int8)
    keep = np.array([problem is None for problem in problems], bool)
    subs = Subscriptions(ids[keep], geoms[keep], rels[keep])
    partitioner = None if spec.partitioner is None else spec.partitioner.value
    members, pids = KINDS[spec.strategy].place(subs, partitioner, spec.num_partitions)
    order = np.argsort(pids, kind="stable")
    members, pids = members[order], pids[order]
    bounds = np.flatnonzero(np.r_[True, pids[1:] != pids[:-1]]) if len(pids) else []
    for i, lo in enumerate(bounds):
        hi = bounds[i + 1] if i + 1 < len(bounds) else len(pids)
        pid = int(pids[lo])
        yield pid, payload.encode(subs.take(members[lo:hi]), _cell(partitioner, pid))


def merge_pieces(partitioner: Any, pieces: Iterable[tuple[int, bytes]]
                 ) -> Iterator[tuple[int, bytes]]:
    """(partition, payload) per partition from its pieces (subscriptions sorted by id)."""
    grouped: dict[int, list[bytes]] = {}
    for pid, piece in pieces:
        grouped.setdefault(pid, []).append(piece)
    spatial = None if partitioner is None else partitioner.value
    for pid in sorted(grouped):
        yield pid, payload.merge(grouped[pid], _cell(spatial, pid))


def _cell(partitioner: Any, pid: int) -> np.ndarray:
    return payload.WHOLE_PLANE if partitioner is None else partitioner.cells[pid]


def build_payloads(sc: Any, spec: BuildSpec, workers: int,
                   targets: Callable[[int], Iterable[int]],
                   partition_func: Callable[[int], int]) -> Any:
    """An RDD of (target, StaticPartition) for every target in ``targets(partition)`` (its
    owners under STAL, its home under STRL), partitioned by ``partition_func`` of the target
    into ``workers`` Spark partitions; nothing of it passes through the driver.

    It ends with a shuffle, so what gets cached is the shuffle's output and not a Python RDD:
    a cached Python RDD in the join's union made Spark start more Python workers than task
    slots, and tasks rotating over them rebuilt resident indexes in each (measured: 4 workers
    for local[2] instead of 2).
    """
    from app.records import StaticPartition

    slices = spec.slices()
    n = max(1, workers)
    if not slices:
        return sc.parallelize([], n).partitionBy(n, partition_func)
    return (sc.parallelize(slices, len(slices))
            .flatMap(lambda part: read_slice(spec, part))
            .reduceByKey(newer, n)
            .mapPartitions(lambda rows: place_pieces(spec, rows))
            .partitionBy(n)
            .mapPartitions(lambda pieces: merge_pieces(spec.partitioner, pieces))
            .flatMap(lambda kv: [(t, StaticPartition(*kv)) for t in targets(kv[0])])
            .partitionBy(n, partition_func))


def sizes_of(rdd: Any, partitions: int) -> np.ndarray:
    """Payload bytes per partition of an RDD of (target, StaticPartition), counting each
    partition once however many targets hold it (a small collect)."""
    out = np.zeros(partitions, np.int64)
    for pid, size in (rdd.map(lambda kv: (kv[1].partition, len(kv[1].payload))).distinct()
                      .collect()):
        out[pid] = size
    return out
