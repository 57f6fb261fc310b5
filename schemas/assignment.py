"""Partition-to-worker assignments: the initial one and the checks every command must pass.

An assignment is a list of P worker ids (index = static partition id) with an epoch that only
grows. The initial assignment (epoch 0) is the same pure function of P and W in the generator,
the app and the distributor, so the skew the generator asks for is the skew the app sees.
"""

from __future__ import annotations

from collections.abc import Sequence


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
