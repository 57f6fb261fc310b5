"""Subscription changes sent to the executors once each, as one broadcast per change.

Pending changes (``geops.strategies.churn``) are needed by every batch until they are folded
into the payloads: a matcher built from a payload catches up with all of them. Carried in the
tasks' closures, they were pickled on the driver, shipped and unpickled by every task of every
batch (up to several MB per batch at 1,000 changes/s). As broadcasts, a change is pickled once
when it arrives and loaded once per Python worker process (PySpark sends a process only the
broadcasts it does not hold yet, and keeps their values); the closures carry change numbers.
A change's broadcast is destroyed once nothing pending refers to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from geops.strategies.churn import ChangeResult, PartitionDelta, RouterDelta


class ChangeBroadcasts:
    """The broadcasts of the pending subscription changes of one app."""

    def __init__(self, sc: Any):
        self.sc = sc
        self._partitions: dict[int, Any] = {}  # seq -> Broadcast of {pid: PartitionDelta}
        self._router: dict[int, Any] = {}      # seq -> Broadcast of a RouterDelta

    def publish(self, seq: int, result: ChangeResult) -> None:
        """Broadcast change ``seq``'s deltas (``LiveSubscriptions.apply``'s result)."""
        if result.partitions:
            self._partitions[seq] = self.sc.broadcast(dict(result.partitions))
        if result.router is not None:
            self._router[seq] = self.sc.broadcast(result.router)

    def for_join(self, pending: Mapping[int, Sequence[PartitionDelta]]
                 ) -> tuple[dict[int, tuple[int, ...]], dict[int, Any]]:
        """(per partition the numbers of its pending changes, those changes' broadcasts)."""
        seqs = {pid: tuple(d.seq for d in ds) for pid, ds in pending.items() if ds}
        used = {s for ss in seqs.values() for s in ss}
        return seqs, {s: self._partitions[s] for s in sorted(used)}

    def for_router(self, pending: Iterable[RouterDelta]) -> tuple[Any, ...]:
        """The broadcasts of the replicated index's pending changes, oldest first."""
        return tuple(self._router[d.seq] for d in pending)

    def retire(self, pending: Mapping[int, Sequence[PartitionDelta]],
               router_pending: Iterable[RouterDelta]) -> None:
        """Destroy the broadcasts of changes nothing pending refers to any more (folded into
        the payloads, or into a new router). The jobs that needed them have run."""
        live = {d.seq for ds in pending.values() for d in ds}
        _drop(self._partitions, live)
        _drop(self._router, {d.seq for d in router_pending})


def pending_deltas(changes: Mapping[int, Any], seqs: Sequence[int], pid: int,
                   applied: int) -> list[PartitionDelta]:
    """Partition ``pid``'s changes after ``applied``, from their broadcasts (``changes``: seq ->
    an object whose ``value`` is that change's {pid: PartitionDelta})."""
    return [changes[s].value[pid] for s in seqs if s > applied]


def _drop(broadcasts: dict[int, Any], keep: set[int]) -> None:
    for seq in [s for s in broadcasts if s not in keep]:
        broadcasts.pop(seq).destroy(blocking=False)
