"""Static partitions built where they live: on the executors, from the scanned topic.

The executors have read the subscriptions topic (``app.subscriptions.scan``: one task per slice,
its live subscriptions cached as a payload); the driver holds their envelopes, from which it
built the partitioner and the router. Here each cached slice drops the subscriptions a later
record replaced, places the rest by the strategy's own rule with the broadcast partitioner, and
the pieces of each partition are shuffled straight to the worker that keeps it (STAL) or to its
home (STRL), where they become one payload (``geops.strategies.payload``), byte for byte the
one a driver holding every subscription would make.

A 300,000-subscription static side shipped from the driver was a 185 MB task and an
OutOfMemoryError in the driver's dispatcher; here nothing of the static side passes
through the driver or a task closure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.static.snapshot import keep_payload, payload_name
from app.subscriptions.scan import pieces_of
from geops.model import Envelopes, Subscriptions
from geops.strategies import payload
from geops.strategies.strategy import KINDS


@dataclass(frozen=True)
class BuildSpec:
    """What the static side is built from and how to place it."""

    strategy: str
    num_partitions: int
    partitioner: Any            # Broadcast of the spatial partitioner, or None (RIhPS)
    slices: Any                 # RDD of (slice index, payload) (``Scan.payloads``)
    stale: Any                  # Broadcast of {slice index: ids a later record replaced}
    keep_in: str = ""           # a snapshot being made: each merged payload is written there


def place_pieces(strategy: str, num_partitions: int, partitioner: Any,
                 subs: Iterable[Subscriptions]) -> Iterator[tuple[int, bytes]]:
    """(static partition, payload of its subscriptions among ``subs``) for every partition
    these live subscriptions belong to under the strategy's placement rule."""
    spatial = None if partitioner is None else partitioner.value
    for part in subs:
        members, pids = KINDS[strategy].place(Envelopes.of(part), spatial, num_partitions)
        order = np.argsort(pids, kind="stable")
        members, pids = members[order], pids[order]
        bounds = np.flatnonzero(np.r_[True, pids[1:] != pids[:-1]]) if len(pids) else []
        for i, lo in enumerate(bounds):
            hi = bounds[i + 1] if i + 1 < len(bounds) else len(pids)
            pid = int(pids[lo])
            yield pid, payload.encode(part.take(members[lo:hi]), _cell(spatial, pid))


def merge_pieces(partitioner: Any, pieces: Iterable[tuple[int, bytes]], keep_in: str = ""
                 ) -> Iterator[tuple[int, bytes]]:
    """(partition, payload) per partition from its pieces (subscriptions sorted by id);
    ``keep_in``: a snapshot being made, where each payload is also written
    (``app.static.snapshot``)."""
    grouped: dict[int, list[bytes]] = {}
    for pid, piece in pieces:
        grouped.setdefault(pid, []).append(piece)
    spatial = None if partitioner is None else partitioner.value
    for pid in sorted(grouped):
        data = payload.merge(grouped[pid], _cell(spatial, pid))
        keep_payload(keep_in, pid, data)
        yield pid, data


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

    n = max(1, workers)
    strategy, partitions, partitioner, stale, keep_in = (
        spec.strategy, spec.num_partitions, spec.partitioner, spec.stale, spec.keep_in)
    return (spec.slices
            .mapPartitions(lambda slices: place_pieces(strategy, partitions, partitioner,
                                                       pieces_of(slices, stale.value)))
            .partitionBy(n)
            .mapPartitions(lambda pieces: merge_pieces(partitioner, pieces, keep_in))
            .flatMap(lambda kv: [(t, StaticPartition(*kv)) for t in targets(kv[0])])
            .partitionBy(n, partition_func))


def read_payloads(directory: str, files: dict[int, int]) -> Callable[..., Any]:
    """A ``build_payloads`` that reads each partition's payload from a snapshot
    (``app.static.snapshot``: ``files`` {partition: bytes}, checked by the driver) on the
    executors, instead of building it from the topic; the RDD it gives has the same shape."""

    def build(sc: Any, _spec: BuildSpec, workers: int, targets: Callable[[int], Iterable[int]],
              partition_func: Callable[[int], int]) -> Any:
        from app.records import StaticPartition

        n = max(1, workers)
        items = sorted(files.items())
        return (sc.parallelize(items, max(1, min(len(items), sc.defaultParallelism)))
                .map(lambda item: (item[0], _read_payload(directory, *item)))
                .flatMap(lambda kv: [(t, StaticPartition(*kv)) for t in targets(kv[0])])
                .partitionBy(n, partition_func))

    return build


def _read_payload(directory: str, pid: int, size: int) -> bytes:
    with open(f"{directory}/{payload_name(pid)}", "rb") as f:
        data = f.read()
    if len(data) != size:  # changed since the driver checked it: not the snapshot's
        raise ValueError(f"{directory}/{payload_name(pid)}: {len(data)} bytes, {size} recorded")
    return data


def sizes_of(rdd: Any, partitions: int) -> np.ndarray:
    """Payload bytes per partition of an RDD of (target, StaticPartition), counting each
    partition once however many targets hold it (a small collect)."""
    out = np.zeros(partitions, np.int64)
    for pid, size in (rdd.map(lambda kv: (kv[1].partition, len(kv[1].payload))).distinct()
                      .collect()):
        out[pid] = size
    return out
