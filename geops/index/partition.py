"""The subscriptions of one static partition, held where that partition is matched.

Columns (ids, relations, prepared geometries with envelopes and types) in slots, a lookup from
subscription id to slot, and for sPIS an R-tree over the envelopes. ``insert`` (an upsert: a
known id is replaced) and ``delete`` keep all of them current, so a resident partition follows
subscription churn without a rebuild. Removed subscriptions leave dead slots behind; once they
outnumber the live ones the columns are compacted (slots renumbered, the R-tree bulk-loaded),
so a partition under endless churn does not grow.
"""

from __future__ import annotations

import numpy as np
import shapely

from geops.index.envelope import EnvelopeIndex
from geops.model import Subscriptions
from geops.relations import Shapes

_DEAD_MIN = 256  # dead slots a partition may carry before compaction (and at least the live)


class PartitionIndex:
    """One partition's subscriptions; ``tree=True`` adds the per-partition R-tree (sPIS)."""

    def __init__(self, subs: Subscriptions, *, tree: bool):
        if len(np.unique(subs.ids)) != len(subs):
            raise ValueError("subscription ids of a partition must be unique")
        geoms = subs.geoms.copy()
        shapely.prepare(geoms)
        self._columns(subs.ids.copy(), subs.relations.copy(), Shapes.of(geoms), tree)

    def _columns(self, ids: np.ndarray, relations: np.ndarray, shapes: Shapes, tree: bool
                 ) -> None:
        self.ids, self.relations, self.shapes = ids, relations, shapes
        self.alive = np.ones(len(ids), bool)
        self.tree = EnvelopeIndex(shapes.bounds) if tree else None
        self._reindex()

    def _reindex(self) -> None:
        live = np.flatnonzero(self.alive)
        order = np.argsort(self.ids[live], kind="stable")
        self._sorted_ids = self.ids[live][order]
        self._sorted_slots = live[order]

    def __len__(self) -> int:
        return len(self._sorted_ids)

    def live_slots(self) -> np.ndarray:
        return self._sorted_slots

    def slots_of(self, ids: np.ndarray) -> np.ndarray:
        """Slot of each id (int64), -1 where the id is not (or no longer) in this partition."""
        ids = np.asarray(ids, np.int64)
        out = np.full(len(ids), -1, np.int64)
        if len(self._sorted_ids):
            pos = np.minimum(np.searchsorted(self._sorted_ids, ids), len(self._sorted_ids) - 1)
            found = self._sorted_ids[pos] == ids
            out[found] = self._sorted_slots[pos[found]]
        return out

    def query(self, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query index, slot) of live subscriptions whose envelope meets each query's."""
        if self.tree is None:
            raise TypeError("this partition has no R-tree (built with tree=False)")
        return self.tree.query(bounds)

    def insert(self, subs: Subscriptions) -> None:
        """Add subscriptions; one whose id is already here replaces the old one."""
        self.update(np.empty(0, np.int64), subs)

    def delete(self, ids: np.ndarray) -> None:
        """Remove subscriptions by id; ids not in this partition are ignored."""
        self.update(np.asarray(ids, np.int64), None)

    def update(self, deletes: np.ndarray, upserts: Subscriptions | None) -> None:
        """Remove ``deletes`` (ids; unknown ones are ignored) and add ``upserts`` (one whose id
        is here replaces it) in one pass: one lookup, one change of the R-tree, one re-sort.
        Applying subscription churn costs per partition and change, so its steps count."""
        gone = np.asarray(deletes, np.int64)
        if upserts is not None and len(upserts):
            if len(np.unique(upserts.ids)) != len(upserts):
                raise ValueError("inserted subscription ids must be unique")
            gone = np.concatenate([gone, upserts.ids])
        else:
            upserts = None
        slots = self.slots_of(gone)
        slots = np.unique(slots[slots >= 0])
        if len(slots):
            if self.tree is not None:
                self.tree.delete(slots)
            self.alive[slots] = False
        if upserts is not None:
            geoms = upserts.geoms.copy()
            shapely.prepare(geoms)
            new = Shapes.of(geoms)
            self.ids = np.concatenate([self.ids, upserts.ids])
            self.relations = np.concatenate([self.relations, upserts.relations])
            self.shapes = Shapes(np.concatenate([self.shapes.geoms, new.geoms]),
                                 np.concatenate([self.shapes.bounds, new.bounds]),
                                 np.concatenate([self.shapes.types, new.types]))
            self.alive = np.concatenate([self.alive, np.ones(len(upserts), bool)])
            if self.tree is not None:
                self.tree.insert(new.bounds)
        elif not len(slots):
            return
        self._reindex()
        if len(self.ids) - len(self) > max(_DEAD_MIN, len(self)):
            keep = self._sorted_slots
            shapes = self.shapes
            self._columns(self.ids[keep], self.relations[keep],
                          Shapes(shapes.geoms[keep], shapes.bounds[keep], shapes.types[keep]),
                          self.tree is not None)
