"""Load per worker and the paper's imbalance measure, the maximum load distance coefficient.

``LDC_i = (L_i - mean L) / mean L`` for every worker i (idle workers included, with load 0) and
``MLDC = max_i LDC_i``. It only looks at the most loaded worker, because a micro-batch waits
for its slowest worker. It is undefined when nothing was processed (mean load 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from distributor.errors import ShapeError


def worker_loads(partition_loads: Sequence[float], assignment: Sequence[int],
                 workers: int) -> list[float]:
    """Sum of the partition loads each worker owns under ``assignment`` (index = partition)."""
    if len(partition_loads) != len(assignment):
        raise ShapeError(f"{len(partition_loads)} partition loads for an assignment of "
                         f"{len(assignment)} partitions")
    per_worker: list[list[float]] = [[] for _ in range(workers)]
    for load, worker in zip(partition_loads, assignment, strict=True):
        per_worker[worker].append(load)
    return [math.fsum(loads) for loads in per_worker]


def load_distances(loads: Sequence[float]) -> list[float] | None:
    """``LDC_i`` of every worker, or None when the total load is zero."""
    mean = math.fsum(loads) / len(loads) if loads else 0.0
    if mean <= 0:
        return None
    return [(load - mean) / mean for load in loads]


def mldc(loads: Sequence[float]) -> float | None:
    """Maximum load distance coefficient of per-worker loads; None when there is no load."""
    distances = load_distances(loads)
    return None if distances is None else max(distances)


def assignment_mldc(partition_loads: Sequence[float], assignment: Sequence[int],
                    workers: int) -> float | None:
    """MLDC of an assignment under the given partition loads (used for MLDC_new as well)."""
    return mldc(worker_loads(partition_loads, assignment, workers))


def as_owners(owners: Sequence[int | Sequence[int]]) -> list[tuple[int, ...]]:
    """Per-partition owners as int tuples; a plain worker id (an assignment) is one owner."""
    return [(int(o),) if isinstance(o, int | np.integer) else tuple(int(w) for w in o)
            for o in owners]


def owner_loads(partition_loads: Sequence[float], owners: Sequence[int | Sequence[int]],
                workers: int) -> list[float]:
    """Load of each worker when partition p is owned by ``owners[p]`` (one or more workers).

    A replicated partition's load is split evenly among its owners: the app routes its stream
    items by ``schemas.assignment.owner_index`` (key modulo the number of owners), so each
    owner takes the same share of its items. With one owner each this is ``worker_loads``.
    """
    if len(partition_loads) != len(owners):
        raise ShapeError(f"{len(partition_loads)} partition loads for owners of "
                         f"{len(owners)} partitions")
    owners = as_owners(owners)
    if all(len(o) == 1 for o in owners):
        return worker_loads(partition_loads, [o[0] for o in owners], workers)
    per_worker: list[list[float]] = [[] for _ in range(workers)]
    for load, own in zip(partition_loads, owners, strict=True):
        if not own:
            raise ShapeError("a partition without an owner")
        share = load / len(own)
        for w in own:
            per_worker[w].append(share)
    return [math.fsum(loads) for loads in per_worker]


def owners_mldc(partition_loads: Sequence[float], owners: Sequence[int | Sequence[int]],
                workers: int) -> float | None:
    """MLDC under per-partition ``owners`` (a replicated partition's load split evenly)."""
    return mldc(owner_loads(partition_loads, owners, workers))
