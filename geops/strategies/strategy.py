"""Building a strategy: which subscriptions go to which static partition, and its router.

| strategy | subscriptions in partitions                   | router                              |
|----------|-----------------------------------------------|-------------------------------------|
| sPS      | every cell the envelope touches (replicated)  | spatial partitioner                 |
| sPIS     | as sPS                                        | spatial partitioner                 |
| RIhPS    | ``id mod P`` (one partition each)             | replicated R-tree, (id mod P, id)   |
| RIsPS    | the lowest cell the envelope touches (one)    | replicated R-tree, (that cell, id)  |
"""

from __future__ import annotations

import numpy as np
import shapely

from geops.model import Relation, Subscriptions
from geops.partitioning import PARTITIONERS, SpatialPartitioner, build_partitioner, hash_partition
from geops.strategies import payload
from geops.strategies.routers import CandidateRouter, SpatialRouter
from geops.strategies.types import Router

STRATEGIES: tuple[str, ...] = ("sPS", "sPIS", "RIhPS", "RIsPS")


class Strategy:
    """A strategy over a fixed set of subscriptions: its partitions, payloads and router."""

    def __init__(self, name: str, subs: Subscriptions, num_partitions: int,
                 members: np.ndarray, member_pids: np.ndarray,
                 router: Router,
                 partitioner: SpatialPartitioner | None):
        self.name = name
        self.num_partitions = num_partitions
        self.partitioner = partitioner
        self._subs = subs
        self._router = router
        order = np.argsort(member_pids, kind="stable")
        self._members = np.asarray(members, np.int64)[order]
        sizes = np.bincount(member_pids, minlength=num_partitions).astype(np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(sizes)])
        self._sizes = sizes

    def place_subscriptions(self, subs: Subscriptions) -> tuple[np.ndarray, np.ndarray]:
        """(subscription index, partition) of every partition ``subs`` belong to under this
        strategy's rule, e.g. to route subscriptions that arrive while running."""
        return _members(self.name, subs, self.partitioner, self.num_partitions)

    def subscriptions(self) -> Subscriptions:
        """The subscriptions the strategy was built from."""
        return self._subs

    def router(self) -> Router:
        """The replicated part, shipped to every stream-side task."""
        return self._router

    def partition_subscriptions(self, pid: int) -> Subscriptions:
        """The subscriptions of static partition ``pid`` (in input order)."""
        return self._subs.take(self._members[self._offsets[pid]:self._offsets[pid + 1]])

    def partition_payload(self, pid: int) -> bytes:
        """Partition ``pid`` serialised; its length is what moving the partition costs."""
        if not 0 <= pid < self.num_partitions:
            raise IndexError(f"partition {pid} outside 0..{self.num_partitions - 1}")
        cell = payload.WHOLE_PLANE if self.partitioner is None else self.partitioner.cells[pid]
        return payload.encode(self.partition_subscriptions(pid), cell)

    def disjoint_ids(self) -> np.ndarray:
        """Sorted ids of every DISJOINT subscription (they can match without any partition)."""
        return np.sort(self._subs.ids[self._subs.relations == Relation.DISJOINT])

    def partition_sizes(self) -> np.ndarray:
        """Subscriptions per partition (int64, length P); replicas count in each partition."""
        return self._sizes.copy()


def build_strategy(name: str, subs: Subscriptions, num_partitions: int,
                   partitioner: str = "kdbtree", *, sample_seed: int = 0) -> Strategy:
    """Partition ``subs`` for strategy ``name`` into (about, for a quadtree) ``num_partitions``.

    RIhPS hashes ids and ignores the partitioner; the others build ``partitioner`` with
    ``build_partitioner`` (so a quadtree's actual count is ``Strategy.num_partitions``).
    """
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; expected one of {', '.join(STRATEGIES)}")
    if partitioner not in PARTITIONERS:
        raise ValueError(f"unknown partitioner {partitioner!r}; expected one of "
                         f"{', '.join(PARTITIONERS)}")
    if num_partitions < 1:
        raise ValueError(f"need at least one partition, got {num_partitions}")
    if len(np.unique(subs.ids)) != len(subs):
        raise ValueError("subscription ids must be unique")
    if name == "RIhPS":
        spatial, p = None, num_partitions
    else:
        spatial = build_partitioner(partitioner, subs, num_partitions, sample_seed=sample_seed)
        p = spatial.num_partitions
    members, pids = _members(name, subs, spatial, p)
    if name in ("RIhPS", "RIsPS"):
        router: Router = CandidateRouter(subs.ids[members], shapely.bounds(subs.geoms[members]),
                                         pids, p)
    else:
        router = SpatialRouter(spatial)
    return Strategy(name, subs, p, members, pids, router, spatial)


def _members(name: str, subs: Subscriptions, spatial: SpatialPartitioner | None,
             num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    """(subscription index, partition) pairs: the strategy's partitioning rule."""
    if spatial is None:
        return np.arange(len(subs), dtype=np.int64), hash_partition(subs.ids, num_partitions)
    members, pids = spatial.place(subs.geoms)
    if name == "RIsPS":  # one cell each: place() sorts by partition, so the first is lowest
        first = np.r_[True, members[1:] != members[:-1]][: len(members)]
        members, pids = members[first], pids[first]
    return members, pids
