"""What a batch's join tasks returned, gathered by record type (``app.records``) for the
driver's merge and writes: one collector method per type, chosen by the record's type."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app import records as kinds
from geops.strategies import PartialMatches
from schemas.assignment import Owners


@dataclass
class Collected:
    """A batch's task output by kind. ``loads``: one per (partition, owner), a replicated
    partition reporting each owner's share, zero for those no task reported."""

    loads: dict[tuple[int, int], kinds.PartitionLoad]
    partials: list[PartialMatches] = field(default_factory=list)
    # the publications the matches are for: keys, ids and event times per record
    known_keys: list[np.ndarray] = field(default_factory=list)
    known_ids: list[np.ndarray] = field(default_factory=list)
    known_times: list[np.ndarray] = field(default_factory=list)
    positions: list[kinds.Positions] = field(default_factory=list)
    records: int = 0
    dead: int = 0
    busiest_ns: int = 0
    sizes: dict[int, int] = field(default_factory=dict)
    # what the join tasks wrote themselves (``app.batch.task_output``): Match records, their
    # latencies (ms), and the loads (partition, worker) they wrote
    task_matched: int = 0
    task_latencies: list[np.ndarray] = field(default_factory=list)
    written_loads: set[tuple[int, int]] = field(default_factory=set)

    @classmethod
    def of(cls, out: Iterable[Any], owners: Sequence[Owners]) -> Collected:
        """Every record of ``out`` given to its type's collector (what has none is not kept)."""
        found = cls({(p, w): kinds.PartitionLoad(p, w) for p, ws in enumerate(owners) for w in ws})
        for rec in out:
            collect = COLLECTORS.get(type(rec))
            if collect is not None:
                collect(found, rec)
        return found

    def matched(self, rec: kinds.Matched) -> None:
        self.partials.append(rec.partial)
        self.presence(rec)

    def presence(self, rec: kinds.Matched | kinds.Presence) -> None:
        self.known_keys.append(rec.keys)
        self.known_ids.append(rec.ids)
        self.known_times.append(rec.event_ms)

    def load(self, rec: kinds.PartitionLoad) -> None:
        self.loads[(rec.partition, rec.worker)] = rec

    def position(self, rec: kinds.Positions) -> None:
        self.positions.append(rec)

    def read_stats(self, rec: kinds.ReadStats) -> None:
        self.records += rec.records
        self.dead += rec.dead_letters

    def busy(self, rec: kinds.Busy) -> None:
        self.busiest_ns = max(self.busiest_ns, rec.busy_ns)

    def payloads(self, rec: kinds.Payloads) -> None:
        self.sizes.update(rec.sizes)

    def wrote(self, rec: kinds.Wrote) -> None:
        self.task_matched += rec.matched
        self.task_latencies.append(rec.latencies_ms)
        self.written_loads.update(rec.loads)


COLLECTORS: dict[type, Callable[[Collected, Any], None]] = {
    kinds.Matched: Collected.matched, kinds.Presence: Collected.presence,
    kinds.PartitionLoad: Collected.load, kinds.Positions: Collected.position,
    kinds.ReadStats: Collected.read_stats, kinds.Busy: Collected.busy,
    kinds.Payloads: Collected.payloads, kinds.Wrote: Collected.wrote,
}
