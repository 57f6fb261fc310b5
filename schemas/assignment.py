"""Partition-to-worker assignments: the initial one and the checks every command must pass.

An assignment is a list of P worker ids (index = static partition id) with an epoch that only
grows. The initial assignment (epoch 0) is the same pure function of P and W in the generator,
the app and the distributor, so the skew the generator asks for is the skew the app sees.
``command_for`` judges one record of the control topic for one app; the app and the distributor
read the newest command through it (``kafkaio.control.newest_command``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schemas.codec import DecodeError, codec

# Why a control record is not a command for an app (``CommandRejected.kind``).
TOMBSTONE = "tombstone"
MALFORMED = "malformed"
FOREIGN = "foreign app"
NOT_NEWER = "not newer"
UNFIT = "unfit"


class CommandRejected(ValueError):
    """A control record that is no command for this app now; ``kind`` says which reason."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind


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
        if problem:
            raise CommandRejected(UNFIT, f"epoch {rec['epoch']}: {problem}")
    return rec
