"""The replicated index of RIhPS and RIsPS: subscription envelopes → (partition, id) entries.

Every stream-side task holds one; a bulk query with the publications' envelopes yields their
candidate subscriptions and the partition that holds each (``id mod P`` for RIhPS, the one
spatial cell for RIsPS).
"""

from __future__ import annotations

import numpy as np

from geops.index.envelope import EnvelopeIndex


class GlobalIndex:
    """R-tree of subscription envelopes whose entries carry (partition, subscription id).

    It keeps the arrays it is built from without copying them (a router's, which every
    stream-side process holds anyway; changes replace them, never write into them)."""

    def __init__(self, ids: np.ndarray, bounds: np.ndarray, partitions: np.ndarray):
        self._ids = np.asarray(ids, np.int64)
        self._partitions = np.asarray(partitions, np.int32)
        if len(np.unique(self._ids)) != len(self._ids):
            raise ValueError("subscription ids must be unique")
        self._tree = EnvelopeIndex(bounds)
        self._slot_of: dict[int, int] | None = None  # built on first change

    def __len__(self) -> int:
        return len(self._tree)

    def _slots(self) -> dict[int, int]:
        if self._slot_of is None:
            self._slot_of = dict(zip(self._ids.tolist(), range(len(self._ids)), strict=True))
        return self._slot_of

    def query(self, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query index int64, partition int32, subscription id int64) per intersecting entry."""
        qidx, slots = self._tree.query(bounds)
        return qidx, self._partitions[slots], self._ids[slots]

    def insert(self, ids: np.ndarray, bounds: np.ndarray, partitions: np.ndarray) -> None:
        """Add entries; an id already present is replaced (a changed subscription)."""
        ids = np.asarray(ids, np.int64)
        if len(np.unique(ids)) != len(ids):
            raise ValueError("inserted subscription ids must be unique")
        self.delete(ids)
        slots = self._tree.insert(bounds)
        self._ids = np.concatenate([self._ids, ids])
        self._partitions = np.concatenate([self._partitions, np.asarray(partitions, np.int32)])
        self._slots().update(zip(ids.tolist(), slots.tolist(), strict=True))

    def delete(self, ids: np.ndarray) -> None:
        """Remove entries by subscription id; unknown ids are ignored."""
        slot_of = self._slots()
        slots = [slot_of.pop(i) for i in np.asarray(ids, np.int64).tolist() if i in slot_of]
        if slots:
            self._tree.delete(np.array(slots, np.int64))
