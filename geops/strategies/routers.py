"""The replicated, stream-side part of each strategy: where each publication goes.

A router is shipped to every stream-side task, so it holds only plain arrays and pickles small;
an index it needs is built lazily on first use and cached per process (keyed by a token drawn
when the router was made), so the many copies of one router that a worker process unpickles
share one index, and the index itself never travels.

A task that keeps the items of some partitions only (a join task that reads its batch itself,
``app.read.ranges``) names them (``partitions``): a candidate router then queries an index of
those partitions' subscriptions alone, so each task's routing shrinks with the share of the
partitions it owns (RIsPS's index query is most of what routing a publication costs it;
sPS/sPIS's placement needs no such index).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

import numpy as np
import shapely

from geops.index import GlobalIndex
from geops.partitioning import SpatialPartitioner
from geops.strategies.types import Routed

# (token, the partitions kept or b"" for all) -> [index, the last router delta applied to it]
_INDEXES: OrderedDict[tuple[str, bytes], list] = OrderedDict()
# Indexes one process keeps, the least recently used dropped first: a router's index over all
# partitions, or over the partitions of one worker (the tasks of any worker may run in any
# process, and an assignment changes at each move), of a new router and an old one in flight.
# Bounded by their entries, at most _ENTRIES times the router's (W workers' indexes of one
# assignment hold one router's entries together), and by their number.
_ENTRIES = 4
_CACHED = 256


class SpatialRouter:
    """sPS and sPIS: a publication goes to every cell its envelope touches (a point: one)."""

    def __init__(self, partitioner: SpatialPartitioner):
        self.partitioner = partitioner
        self.num_partitions = partitioner.num_partitions

    def route(self, geoms: np.ndarray, deltas: tuple = (),
              partitions: np.ndarray | None = None) -> Routed:
        """``deltas``: subscription changes, which do not change where publications go;
        ``partitions``: placing a publication costs the same for any, so all are placed."""
        pub_index, partition = self.partitioner.place(geoms)
        return Routed(pub_index, partition)


class CandidateRouter:
    """RIhPS and RIsPS: candidates from the replicated (partition, id) R-tree, by partition."""

    def __init__(self, ids: np.ndarray, bounds: np.ndarray, partitions: np.ndarray,
                 num_partitions: int):
        self.ids = np.asarray(ids, np.int64)
        self.bounds = np.asarray(bounds, np.float64)
        self.partitions = np.asarray(partitions, np.int32)
        self.num_partitions = num_partitions
        self.token = uuid.uuid4().hex

    def index(self, deltas: tuple = (), partitions: np.ndarray | None = None) -> GlobalIndex:
        """This router's global index, built once per process and brought up to date with
        the subscription changes ``deltas`` (``churn.RouterDelta``, oldest first); with
        ``partitions`` (sorted partition ids), an index of those partitions' entries only."""
        from geops.strategies.churn import apply_router_deltas

        kept = None if partitions is None else np.asarray(partitions, np.int32)
        if kept is not None and len(np.unique(kept)) >= self.num_partitions:
            kept = None  # every partition (one worker): the full index, not a second copy
        key = (self.token, b"" if kept is None else b"k" + kept.tobytes())
        found = _INDEXES.get(key)
        if found is None:
            inside = slice(None) if kept is None else np.isin(self.partitions, kept)
            found = [GlobalIndex(self.ids[inside], self.bounds[inside],
                                 self.partitions[inside]), 0]
            _INDEXES[key] = found
            while len(_INDEXES) > 1 and (
                    len(_INDEXES) > _CACHED
                    or sum(len(i) for i, _ in _INDEXES.values()) > _ENTRIES * len(self.ids)):
                _INDEXES.popitem(last=False)
        else:
            _INDEXES.move_to_end(key)
        if deltas:
            found[1] = apply_router_deltas(found[0], deltas, found[1], kept)
        return found[0]

    def route(self, geoms: np.ndarray, deltas: tuple = (),
              partitions: np.ndarray | None = None) -> Routed:
        """One item per (publication, partition holding ≥1 candidate), with its candidates;
        with ``partitions`` (sorted ids), only the items of those partitions."""
        qidx, partition, ids = self.index(deltas, partitions).query(
            shapely.bounds(np.asarray(geoms, object)))
        order = np.argsort(qidx * self.num_partitions + partition, kind="stable")
        qidx, partition, ids = qidx[order], partition[order], ids[order]
        starts = np.flatnonzero(np.r_[True, (qidx[1:] != qidx[:-1])
                                      | (partition[1:] != partition[:-1])])[: len(qidx)]
        offsets = np.append(starts, len(qidx)).astype(np.int64)
        return Routed(qidx[starts], partition[starts], offsets, ids)
