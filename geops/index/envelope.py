"""An R-tree of envelopes keyed by dense slot numbers (libspatialindex through ``rtree``).

Bulk-loaded (STR) when built, then kept current with ``insert``/``delete`` as subscriptions
come and go. Queries are bulk: one ``intersection_v`` call answers a whole batch of envelopes.
The closed test applies: envelopes that only touch do intersect.

Changes are cheap because the tree is not edited entry by entry: libspatialindex's delete
searches the tree for its entry and an insert through ``rtree`` crosses into C for each one,
each costing many times what an entry of a bulk load costs, and they were most of what applying
subscription churn to a resident partition cost. A delete only marks its slot dead (queries drop
dead slots); an insert joins a short overflow list that queries test by brute force. The tree is
bulk-loaded again from the live slots when the dead and overflow entries exceed a quarter of the
live ones, or the overflow is flushed into it when it grows past ``_OVERFLOW_MAX`` in a tree too
big to reload.
"""

from __future__ import annotations

import numpy as np
from rtree import index as rtree_index

# Nodes smaller than rtree's default of 100 entries: a bulk query tests fewer entries in each
# node it enters, and 32 answered the matching benchmark's queries fastest.
_CAPACITY = 32
# Dead plus overflow entries before the tree is bulk-loaded again: at least this many, and at
# least a quarter of the live ones (so a rebuild's cost is spread over many changes).
_STALE_MIN = 64
_OVERFLOW_MAX = 256  # inserted entries queried by brute force, at most
_BULK_PER_INSERT = 15  # what an entry inserted into the tree costs, in bulk-loaded entries
_QUERY_CHUNK = 4096  # queries tested against the overflow at a time


def _properties() -> rtree_index.Property:
    props = rtree_index.Property()
    props.leaf_capacity = _CAPACITY
    props.index_capacity = _CAPACITY
    return props


class EnvelopeIndex:
    """R-tree over envelopes ``(xmin, ymin, xmax, ymax)``; entry k of the build is slot k.

    It keeps the ``bounds`` it is built from without copying them (the partition index and the
    router hold the same array; nothing changes one in place)."""

    def __init__(self, bounds: np.ndarray):
        bounds = np.asarray(bounds, np.float64).reshape(-1, 4)
        self._bounds = bounds
        self._alive = np.ones(len(bounds), bool)
        self._live = len(bounds)
        self._stale = 0  # dead slots still in the tree
        self._indexed = len(bounds)  # slots from here on are the overflow, not in the tree
        self._tree = self._load(np.arange(len(bounds), dtype=np.int64))

    def _load(self, slots: np.ndarray) -> rtree_index.Index:
        if not len(slots):
            return rtree_index.Index(properties=_properties())
        boxes = self._bounds[slots]
        return rtree_index.Index((slots, boxes[:, :2], boxes[:, 2:]), properties=_properties())

    def __len__(self) -> int:
        return self._live

    def insert(self, bounds: np.ndarray) -> np.ndarray:
        """Add envelopes; returns their new slots (int64)."""
        bounds = np.asarray(bounds, np.float64).reshape(-1, 4)
        slots = np.arange(len(self._bounds), len(self._bounds) + len(bounds), dtype=np.int64)
        self._bounds = np.concatenate([self._bounds, bounds])
        self._alive = np.concatenate([self._alive, np.ones(len(bounds), bool)])
        self._live += len(bounds)
        self._settle()
        return slots

    def delete(self, slots: np.ndarray) -> None:
        """Remove entries by slot; a slot that is not live raises KeyError."""
        slots = np.asarray(slots, np.int64).reshape(-1)
        dead = [s for s in slots.tolist() if not (0 <= s < len(self._alive) and self._alive[s])]
        if dead or len(np.unique(slots)) != len(slots):
            raise KeyError(f"not live (or repeated) slots: {dead or slots.tolist()}")
        self._alive[slots] = False
        self._live -= len(slots)
        self._stale += int((slots < self._indexed).sum())
        self._settle()

    def _settle(self) -> None:
        """Reload the tree or flush the overflow into it when the changes have piled up."""
        overflow = len(self._bounds) - self._indexed
        big = overflow > _OVERFLOW_MAX
        if (self._stale + overflow > max(_STALE_MIN, self._live // 4)
                or (big and self._live < _BULK_PER_INSERT * overflow)):
            self._tree = self._load(np.flatnonzero(self._alive))
            self._stale = 0
        elif big:
            for slot in range(self._indexed, len(self._bounds)):
                if self._alive[slot]:
                    self._tree.insert(slot, self._bounds[slot].tolist())
        else:
            return
        self._indexed = len(self._bounds)

    def query(self, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query index, slot) int64 for every live entry each query envelope intersects."""
        bounds = np.asarray(bounds, np.float64).reshape(-1, 4)
        if not len(bounds) or not len(self):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        slots, counts = self._tree.intersection_v(bounds[:, :2], bounds[:, 2:])
        qidx = np.repeat(np.arange(len(bounds), dtype=np.int64), counts.astype(np.int64))
        slots = slots.astype(np.int64, copy=False)
        if self._stale:
            live = self._alive[slots]
            qidx, slots = qidx[live], slots[live]
        if self._indexed == len(self._bounds):
            return qidx, slots
        over_q, over_s = self._query_overflow(bounds)
        qidx, slots = np.concatenate([qidx, over_q]), np.concatenate([slots, over_s])
        order = np.argsort(qidx, kind="stable")  # grouped by query, as the tree answers
        return qidx[order], slots[order]

    def _query_overflow(self, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        over = self._bounds[self._indexed:]
        alive = self._alive[self._indexed:]
        qs, ss = [], []
        for lo in range(0, len(bounds), _QUERY_CHUNK):
            q = bounds[lo:lo + _QUERY_CHUNK, None, :]
            hit = ((q[..., 0] <= over[:, 2]) & (q[..., 2] >= over[:, 0])
                   & (q[..., 1] <= over[:, 3]) & (q[..., 3] >= over[:, 1]) & alive)
            qi, si = np.nonzero(hit)
            qs.append(qi + lo)
            ss.append(si + self._indexed)
        return (np.concatenate(qs).astype(np.int64, copy=False),
                np.concatenate(ss).astype(np.int64, copy=False))
