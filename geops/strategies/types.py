"""What flows between the strategy's stages: routed stream items and partial matches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class Routed:
    """One row per stream item: a publication copy sent to one static partition.

    RIhPS and RIsPS items also carry candidate subscription ids, as CSR: the candidates of item
    i are ``cand_ids[cand_offsets[i]:cand_offsets[i + 1]]``. sPS and sPIS items carry none.
    """

    pub_index: np.ndarray
    partition: np.ndarray
    cand_offsets: np.ndarray | None = None
    cand_ids: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.pub_index)

    def take(self, rows: np.ndarray) -> Routed:
        """The items ``rows`` (in that order), candidates re-based."""
        rows = np.asarray(rows, np.int64)
        if self.cand_offsets is None or self.cand_ids is None:
            return Routed(self.pub_index[rows], self.partition[rows])
        starts = self.cand_offsets[rows]
        lengths = self.cand_offsets[rows + 1] - starts
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        gather = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        return Routed(self.pub_index[rows], self.partition[rows], offsets,
                      self.cand_ids[gather])

    def by_partition(self) -> Iterator[tuple[int, Routed]]:
        """(partition id, its items) for every partition that got items, ascending."""
        order = np.argsort(self.partition, kind="stable")
        pids = self.partition[order]
        cuts = np.flatnonzero(np.diff(pids)) + 1
        for rows in np.split(order, cuts):
            if len(rows):
                yield int(self.partition[rows[0]]), self.take(rows)


@dataclass
class PartialMatches:
    """What one partition found for its items.

    ``keys``/``sub_ids``: pairs where the relation holds. ``excluded_keys``/``excluded_sub_ids``:
    DISJOINT subscriptions found to intersect the publication (``merge`` removes them from the
    DISJOINT set). ``candidates``: pairs refined with the exact predicate.
    """

    keys: np.ndarray
    sub_ids: np.ndarray
    excluded_keys: np.ndarray
    excluded_sub_ids: np.ndarray
    candidates: int

    @classmethod
    def empty(cls) -> PartialMatches:
        none = np.empty(0, np.int64)
        return cls(none, none, none, none, 0)


class Router(Protocol):
    """The replicated, stream-side part of a strategy (see ``geops.strategies.routers``)."""

    num_partitions: int

    def route(self, geoms: np.ndarray, deltas: tuple = (),
              partitions: np.ndarray | None = None) -> Routed: ...
