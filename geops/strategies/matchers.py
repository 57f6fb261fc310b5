"""The partition-side part of each strategy: exact matching of the items sent to a partition.

All matchers hold the partition's subscriptions in a ``PartitionIndex`` (prepared geometries),
turn items into (item, subscription) candidate pairs in their own way, and refine every pair
with the exact kernel ``geops.relations.evaluate``:

- sPS (``ScanMatcher``): every item with every subscription of the partition, no index;
- sPIS (``IndexedMatcher``): the partition's R-tree, queried with the items' envelopes, keeping
  a pair only in the cell that holds the lower-left corner of the two envelopes' intersection
  (both are replicated there), so a pair found in several cells is refined once;
- RIhPS / RIsPS (``CandidateMatcher``): the candidate ids the router attached to each item.

A DISJOINT subscription is never reported as a positive here: the pairs where it *intersects*
the publication are reported as excluded, and ``merge`` adds the rest.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

import numpy as np

from geops.index import PartitionIndex
from geops.model import Relation, Subscriptions
from geops.relations import Shapes, evaluate
from geops.strategies.types import PartialMatches

_SCAN_PAIRS = 1 << 20  # sPS builds its all-pairs product in slices of about this many pairs


class PartitionMatcher(ABC):
    """Matches items against one partition; subclasses choose the candidate pairs."""

    def __init__(self, index: PartitionIndex):
        self.index = index

    @classmethod
    def load(cls, subs: Subscriptions, cell: np.ndarray) -> PartitionMatcher:
        """The matcher of one partition's subscriptions (``cell``: its part of the plane)."""
        return cls(PartitionIndex(subs, tree=False))

    @property
    def num_subscriptions(self) -> int:
        return len(self.index)

    def insert(self, subs: Subscriptions) -> None:
        """Add (or replace by id) subscriptions of this partition."""
        self.index.insert(subs)

    def delete(self, ids: np.ndarray) -> None:
        """Remove subscriptions of this partition by id."""
        self.index.delete(ids)

    def update(self, deletes: np.ndarray, upserts: Subscriptions | None) -> None:
        """Remove ``deletes`` and add (or replace by id) ``upserts``, in one pass."""
        self.index.update(deletes, upserts)

    def match(self, keys: np.ndarray, geoms: np.ndarray, cand_offsets: np.ndarray | None = None,
              cand_ids: np.ndarray | None = None) -> PartialMatches:
        """Exact matches of the items (publication ``keys`` and ``geoms``) in this partition."""
        keys = np.asarray(keys, np.int64)
        pubs = Shapes.of(geoms)
        found = [self._refine(keys, pubs, item, slot)
                 for item, slot in self._pairs(pubs, cand_offsets, cand_ids)]
        if not found:
            return PartialMatches.empty()
        return PartialMatches(*(np.concatenate([f[i] for f in found]) for i in range(4)),
                              candidates=sum(len(f[4]) for f in found))

    @abstractmethod
    def _pairs(self, pubs: Shapes, cand_offsets: np.ndarray | None,
               cand_ids: np.ndarray | None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(item index, subscription slot) candidate pairs, in one or more slices."""

    def _refine(self, keys: np.ndarray, pubs: Shapes, item: np.ndarray, slot: np.ndarray
                ) -> tuple[np.ndarray, ...]:
        idx = self.index
        relation = idx.relations[slot]
        holds = evaluate(relation, idx.shapes, slot, pubs, item)
        disjoint = relation == Relation.DISJOINT
        pos = holds & ~disjoint
        exc = disjoint & ~holds
        return (keys[item[pos]], idx.ids[slot[pos]], keys[item[exc]], idx.ids[slot[exc]], item)


class ScanMatcher(PartitionMatcher):
    """sPS: test every subscription of the partition against every item."""

    def _pairs(self, pubs, cand_offsets, cand_ids):
        slots = self.index.live_slots()
        if not len(slots) or not len(pubs):
            return
        step = max(1, _SCAN_PAIRS // len(slots))
        for lo in range(0, len(pubs), step):
            items = np.arange(lo, min(lo + step, len(pubs)), dtype=np.int64)
            yield np.repeat(items, len(slots)), np.tile(slots, len(items))


class IndexedMatcher(PartitionMatcher):
    """sPIS: the partition's R-tree gives the subscriptions whose envelope meets an item's."""

    def __init__(self, index: PartitionIndex, cell: np.ndarray):
        super().__init__(index)
        self.cell = np.asarray(cell, np.float64)

    @classmethod
    def load(cls, subs: Subscriptions, cell: np.ndarray) -> IndexedMatcher:
        return cls(PartitionIndex(subs, tree=True), cell)

    def _pairs(self, pubs, cand_offsets, cand_ids):
        if not len(pubs) or not len(self.index):
            return
        item, slot = self.index.query(pubs.bounds)
        # Reference point: the lower-left corner of the envelopes' intersection. It lies in
        # both envelopes, so both were placed in the (half-open) cell holding it: that cell
        # alone refines the pair. (A point item's only cell is the one holding the point.)
        x0, y0, x1, y1 = self.cell
        sub_b, pub_b = self.index.shapes.bounds[slot], pubs.bounds[item]
        rx = np.maximum(sub_b[:, 0], pub_b[:, 0])
        ry = np.maximum(sub_b[:, 1], pub_b[:, 1])
        mine = (x0 <= rx) & (rx < x1) & (y0 <= ry) & (ry < y1)
        yield item[mine], slot[mine]


class CandidateMatcher(PartitionMatcher):
    """RIhPS / RIsPS: refine the candidate ids the router attached to each item."""

    def _pairs(self, pubs, cand_offsets, cand_ids):
        if cand_offsets is None or cand_ids is None:
            raise ValueError("RIhPS/RIsPS items need cand_offsets and cand_ids")
        item = np.repeat(np.arange(len(pubs), dtype=np.int64), np.diff(cand_offsets))
        slot = self.index.slots_of(cand_ids)
        known = slot >= 0  # an id the router knows but this partition no longer holds
        if known.any():
            yield item[known], slot[known]

