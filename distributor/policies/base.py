"""The interface every redistribution policy implements.

A policy maps measured partition loads and the assignment in force to a new assignment; the
engine judges the proposal (MLDC_new) and turns it into a command. Returning the input
assignment unchanged means "nothing better found". Policies are pure and deterministic: the
same input gives the same output, so a trace replay reproduces a live run.

Since RebalanceCommand v2 a static partition may have several owners (``replicas``; its load
is then split evenly among them, ``schemas.assignment.owner_index``). A policy that can
replicate implements ``propose_owners`` as well (``OwnersPolicy``); the engine calls every
policy through ``propose_owners`` below, which runs a single-owner policy (``greedy``) on the
primary owners: its proposal has one owner per partition, so it drops any replica.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from distributor.errors import ShapeError
from distributor.mldc import as_owners
from schemas.assignment import Owners


class Policy(Protocol):
    """Proposes a partition -> worker assignment."""

    name: str

    def propose(self, partition_loads: Sequence[float], assignment: Sequence[int],
                workers: int, costs: Sequence[float] | None = None) -> list[int]:
        """A full new assignment (index = partition) for ``workers`` workers.

        ``costs`` is an optional migration cost per partition (e.g. its static bytes): among
        otherwise equal choices the policy moves the cheaper partitions.
        """
        ...


@runtime_checkable
class OwnersPolicy(Protocol):
    """A policy that may give a partition several owners (``replicas``)."""

    name: str

    def propose(self, partition_loads: Sequence[float], assignment: Sequence[int],
                workers: int, costs: Sequence[float] | None = None) -> list[int]:
        ...

    def propose_owners(self, partition_loads: Sequence[float], owners: Sequence[Owners],
                       workers: int, costs: Sequence[float] | None = None) -> list[Owners]:
        """The owners of every partition (primary first), or ``owners`` itself when nothing
        is better. A partition with k owners has its load split evenly among them."""
        ...


def propose_owners(policy: Policy, partition_loads: Sequence[float],
                   owners: Sequence[Sequence[int]], workers: int,
                   costs: Sequence[float] | None = None) -> list[Owners]:
    """Any policy's proposal as per-partition owners.

    An ``OwnersPolicy`` answers itself; a single-owner policy proposes an assignment of the
    primary owners, one owner per partition. When it finds nothing better (returns the
    primaries unchanged) the owners in force are returned as they are, replicas included.
    """
    current = as_owners(owners)
    if isinstance(policy, OwnersPolicy):
        return [tuple(int(w) for w in o)
                for o in policy.propose_owners(partition_loads, current, workers, costs)]
    primaries = [o[0] for o in current]
    new = policy.propose(partition_loads, primaries, workers, costs)
    if list(new) == primaries:
        return current
    return [(int(w),) for w in new]


def added_owners(old: Sequence[Sequence[int]], new: Sequence[Sequence[int]]
                 ) -> list[tuple[int, int, int]]:
    """(partition, from worker, to worker) for every owner ``new`` adds to a partition: its
    static data is shipped from the partition's old primary owner. A single-owner move is one
    such entry; a dropped replica ships nothing and is no entry."""
    if len(old) != len(new):
        raise ShapeError(f"owners of {len(old)} and {len(new)} partitions")
    return [(p, int(a[0]), int(w)) for p, (a, b) in enumerate(zip(old, new, strict=True))
            for w in b if w not in a]
