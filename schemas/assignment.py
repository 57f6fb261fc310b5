"""Partition-to-worker assignments: the initial one and the checks every command must pass.

An assignment is a list of P worker ids (index = static partition id) with an epoch that only
grows. The initial assignment (epoch 0) is the same pure function of P and W in the generator,
the app and the distributor, so the skew the generator asks for is the skew the app sees.
A hot partition may have several owners (``replicas``, RebalanceCommand v2): each owner holds a
copy of its static data and takes a share of its stream items (``owner_index``).
``command_for`` judges one record of the control topic for one app; the app and the distributor
read the newest command through it (``kafkaio.control.newest_command``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from schemas.codec import codec
from schemas.errors import CommandRejected, DecodeError

# Why a control record is not a command for an app (``CommandRejected.kind``).
TOMBSTONE = "tombstone"
MALFORMED = "malformed"
FOREIGN = "foreign app"
NOT_NEWER = "not newer"
UNFIT = "unfit"


def initial_assignment(partitions: int, workers: int) -> list[int]:
    """Contiguous blocks: partition p goes to worker ``p * W // P``.

    Partition ids are numbered in spatial order by every spatial partitioner, so each worker
    starts with one compact region; block sizes differ by at most one.
    """
    if workers < 1 or partitions < 1:
        raise ValueError(f"need at least one partition and one worker, got P={partitions}, "
                         f"W={workers}")
    return [p * workers // partitions for p in range(partitions)]


def assignment_problem(assignment: Sequence[int], partitions: int, workers: int) -> str | None:
    """Why an assignment does not fit P partitions and W workers, or None when it fits."""
    if len(assignment) != partitions:
        return f"assignment has {len(assignment)} entries, expected {partitions} partitions"
    bad = [w for w in assignment if not isinstance(w, int) or not 0 <= w < workers]
    if bad:
        return f"worker ids {sorted(set(bad))[:5]} outside 0..{workers - 1}"
    return None


Owners = tuple[int, ...]  # the workers owning one partition, its primary owner first


def owners_of(assignment: Sequence[int],
              replicas: Sequence[Mapping[str, Any]] = ()) -> list[Owners]:
    """Every partition's owners from a command's ``assignment`` and ``replicas`` fields.

    A partition without a replica entry has one owner, ``assignment[p]``; a replica entry lists
    all owners with the primary first. ValueError when an entry contradicts the assignment.
    """
    owners: list[Owners] = [(w,) for w in assignment]
    for rep in replicas:
        p, workers = rep["partition"], tuple(rep["workers"])
        if not 0 <= p < len(owners):
            raise ValueError(f"replica of partition {p} outside 0..{len(owners) - 1}")
        if not workers or workers[0] != assignment[p] or len(set(workers)) != len(workers):
            raise ValueError(f"replicas of partition {p} {list(workers)} must start with its "
                             f"owner {assignment[p]} and not repeat a worker")
        owners[p] = workers
    return owners


def command_fields(owners: Sequence[Sequence[int]]) -> tuple[list[int], list[dict[str, Any]]]:
    """The ``assignment`` and ``replicas`` fields of a command for per-partition ``owners``."""
    assignment = [int(o[0]) for o in owners]
    replicas = [{"partition": p, "workers": [int(w) for w in o]}
                for p, o in enumerate(owners) if len(o) > 1]
    return assignment, replicas


def owners_for_workers(owners: Sequence[Owners], workers: int,
                       weights: Sequence[float]) -> list[Owners]:
    """Owners that fit ``workers`` workers, moving as little ``weight`` as it takes.

    For a change of the number of workers while the app runs (executors lost or back). Owners
    outside 0..workers-1 are dropped; a partition left without one goes, heaviest first, to
    the least loaded worker. Then, while a worker is more than a partition's weight lighter
    than the heaviest (a worker just added holds nothing), the heaviest worker gives its
    lightest single-owner partition that narrows the gap to the lightest worker.
    """
    if workers < 1:
        raise ValueError(f"need at least one worker, got W={workers}")
    kept: list[Owners] = [tuple(w for w in o if w < workers) for o in owners]
    load = [0.0] * workers
    for p, o in enumerate(kept):
        for w in o:
            load[w] += weights[p] / len(o)
    for p in sorted((p for p, o in enumerate(kept) if not o), key=lambda p: -weights[p]):
        w = min(range(workers), key=lambda w: (load[w], w))
        kept[p] = (w,)
        load[w] += weights[p]
    while True:
        hi = max(range(workers), key=lambda w: (load[w], -w))
        lo = min(range(workers), key=lambda w: (load[w], w))
        gap = load[hi] - load[lo]
        movable = [p for p, o in enumerate(kept)
                   if o == (hi,) and 0 < weights[p] < gap]
        if not movable:
            return kept
        p = max(movable, key=lambda p: (min(weights[p], gap - weights[p]), -p))
        kept[p] = (lo,)
        load[hi] -= weights[p]
        load[lo] += weights[p]


def owner_index(keys: np.ndarray, replicas: int) -> np.ndarray:
    """Which of a partition's ``replicas`` owners takes each stream item, by its int64 key.

    A pure function of the publication key (Kafka partition and offset), so a batch replayed
    after a crash splits its items exactly as before; consecutive offsets spread evenly.
    """
    return np.asarray(keys, np.int64) % replicas if replicas > 1 else np.zeros(len(keys), np.int64)


def moves_between(old: Sequence[int], new: Sequence[int]) -> list[tuple[int, int, int]]:
    """(partition, from worker, to worker) for every partition whose owner changes."""
    return [(p, a, b) for p, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]


def hot_partitions(assignment: Sequence[int], hot_workers: int) -> list[int]:
    """Partitions owned by workers 0..hot_workers-1: the 'hot' side of the skew coefficient."""
    return [p for p, w in enumerate(assignment) if w < hot_workers]


def command_for(value: bytes | None, app_id: str, newer_than: int | None = None,
                partitions: int | None = None, workers: int | None = None) -> dict[str, Any]:
    """The RebalanceCommand record in ``value`` if it is meant for ``app_id`` (its app id is
    empty or ours), its epoch is above ``newer_than`` (when given) and its assignment fits P
    ``partitions`` and W ``workers`` (when given); otherwise ``CommandRejected`` saying why."""
    if value is None:
        raise CommandRejected(TOMBSTONE, "tombstone")
    try:
        rec = codec().decode_as("RebalanceCommand", value)
    except DecodeError as exc:
        raise CommandRejected(MALFORMED, f"malformed: {exc}") from None
    if rec["app_id"] and rec["app_id"] != app_id:
        raise CommandRejected(FOREIGN, f"for app '{rec['app_id']}', not '{app_id}'")
    if newer_than is not None and rec["epoch"] <= newer_than:
        raise CommandRejected(NOT_NEWER, f"epoch {rec['epoch']} is not newer than the epoch "
                                         f"in force ({newer_than})")
    if partitions is not None and workers is not None:
        problem = assignment_problem(rec["assignment"], partitions, workers)
        if problem is None:
            problem = replicas_problem(rec["assignment"], rec["replicas"], workers)
        if problem:
            raise CommandRejected(UNFIT, f"epoch {rec['epoch']}: {problem}")
    return rec


def replicas_problem(assignment: Sequence[int], replicas: Sequence[Mapping[str, Any]],
                     workers: int) -> str | None:
    """Why a command's ``replicas`` do not fit its assignment and W workers, or None."""
    try:
        owners = owners_of(assignment, replicas)
    except ValueError as exc:
        return str(exc)
    bad = sorted({w for o in owners for w in o if not 0 <= w < workers})
    return f"replica worker ids {bad[:5]} outside 0..{workers - 1}" if bad else None
