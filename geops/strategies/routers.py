"""The replicated, stream-side part of each strategy: where each publication goes.

A router is shipped to every stream-side task, so it holds only plain arrays and pickles small;
an index it needs is built lazily on first use and cached per process (keyed by a token drawn
when the router was made), so the many copies of one router that a worker process unpickles
share one index, and the index itself never travels.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

import numpy as np
import shapely

from geops.index import GlobalIndex
from geops.partitioning import SpatialPartitioner
from geops.strategies.types import Routed

# token -> [index, sequence number of the last router delta applied to it]
_INDEXES: OrderedDict[str, list] = OrderedDict()
_CACHED = 4  # routers whose index one process keeps (a new strategy, an old one in flight)


class SpatialRouter:
    """sPS and sPIS: a publication goes to every cell its envelope touches (a point: one)."""

    def __init__(self, partitioner: SpatialPartitioner):
        self.partitioner = partitioner
        self.num_partitions = partitioner.num_partitions

    def route(self, geoms: np.ndarray, deltas: tuple = ()) -> Routed:
        """``deltas``: subscription changes, which do not change where publications go."""
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

    def index(self, deltas: tuple = ()) -> GlobalIndex:
        """This router's global index, built once per process and brought up to date with
        the subscription changes ``deltas`` (``churn.RouterDelta``, oldest first)."""
        from geops.strategies.churn import apply_router_deltas

        found = _INDEXES.get(self.token)
        if found is None:
            found = [GlobalIndex(self.ids, self.bounds, self.partitions), 0]
            _INDEXES[self.token] = found
            while len(_INDEXES) > _CACHED:
                _INDEXES.popitem(last=False)
        else:
            _INDEXES.move_to_end(self.token)
        if deltas:
            found[1] = apply_router_deltas(found[0], deltas, found[1])
        return found[0]

    def route(self, geoms: np.ndarray, deltas: tuple = ()) -> Routed:
        """One item per (publication, partition holding ≥1 candidate), with its candidates."""
        qidx, partition, ids = self.index(deltas).query(
            shapely.bounds(np.asarray(geoms, object)))
        order = np.argsort(qidx * self.num_partitions + partition, kind="stable")
        qidx, partition, ids = qidx[order], partition[order], ids[order]
        starts = np.flatnonzero(np.r_[True, (qidx[1:] != qidx[:-1])
                                      | (partition[1:] != partition[:-1])])[: len(qidx)]
        offsets = np.append(starts, len(qidx)).astype(np.int64)
        return Routed(qidx[starts], partition[starts], offsets, ids)
