"""Building a strategy: which subscriptions go to which static partition, its router, and
what matches a partition. ``KINDS`` is the table of the four (names: ``config.choices``):

| strategy | subscriptions in partitions           | router                             | matcher |
|----------|---------------------------------------|------------------------------------|---------|
| sPS      | every cell it touches (replicated)    | spatial partitioner                | scan    |
| sPIS     | as sPS                                | spatial partitioner                | R-tree  |
| RIhPS    | ``id mod P`` (one partition each)     | replicated R-tree, (id mod P, id)  | ids     |
| RIsPS    | the lowest cell it touches (one)      | replicated R-tree, (that cell, id) | ids     |

(scan: every subscription of the partition; R-tree: the partition's own; ids: the candidate ids
the router attached to each item.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import shapely

from config.choices import STRATEGIES
from geops.model import Relation, Subscriptions
from geops.partitioning import PARTITIONERS, SpatialPartitioner, build_partitioner, hash_partition
from geops.strategies import payload
from geops.strategies.matchers import (
    CandidateMatcher,
    IndexedMatcher,
    PartitionMatcher,
    ScanMatcher,
)
from geops.strategies.routers import CandidateRouter, SpatialRouter
from geops.strategies.types import Router

# (subscriptions, spatial partitioner or None, P) -> (subscription index, partition) pairs
Placement = Callable[[Subscriptions, SpatialPartitioner | None, int],
                     tuple[np.ndarray, np.ndarray]]


def _hashed(subs: Subscriptions, _spatial: SpatialPartitioner | None,
            num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(len(subs), dtype=np.int64), hash_partition(subs.ids, num_partitions)


def _every_cell(subs: Subscriptions, spatial: SpatialPartitioner | None,
                _num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    return spatial.place(subs.geoms)


def _lowest_cell(subs: Subscriptions, spatial: SpatialPartitioner | None,
                 _num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    members, pids = spatial.place(subs.geoms)
    # one cell each: place() sorts by partition, so the first is lowest
    first = np.r_[True, members[1:] != members[:-1]][: len(members)]
    return members[first], pids[first]


@dataclass(frozen=True)
class Kind:
    """What builds one strategy."""

    place: Placement               # the partitioning rule
    spatial: bool                  # placed by a spatial partitioner (else ids are hashed)
    candidates: bool               # routed by a replicated R-tree that attaches candidate ids
    matcher: type[PartitionMatcher]


KINDS: dict[str, Kind] = STRATEGIES.table({
    "sPS": Kind(_every_cell, spatial=True, candidates=False, matcher=ScanMatcher),
    "sPIS": Kind(_every_cell, spatial=True, candidates=False, matcher=IndexedMatcher),
    "RIhPS": Kind(_hashed, spatial=False, candidates=True, matcher=CandidateMatcher),
    "RIsPS": Kind(_lowest_cell, spatial=True, candidates=True, matcher=CandidateMatcher),
})


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
        return KINDS[self.name].place(subs, self.partitioner, self.num_partitions)

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
    kind = KINDS[STRATEGIES.check(name)]
    PARTITIONERS.check(partitioner)
    if num_partitions < 1:
        raise ValueError(f"need at least one partition, got {num_partitions}")
    if len(np.unique(subs.ids)) != len(subs):
        raise ValueError("subscription ids must be unique")
    if kind.spatial:
        spatial = build_partitioner(partitioner, subs, num_partitions, sample_seed=sample_seed)
        p = spatial.num_partitions
    else:
        spatial, p = None, num_partitions
    members, pids = kind.place(subs, spatial, p)
    if kind.candidates:
        router: Router = CandidateRouter(subs.ids[members], shapely.bounds(subs.geoms[members]),
                                         pids, p)
    else:
        router = SpatialRouter(spatial)
    return Strategy(name, subs, p, members, pids, router, spatial)


def load_partition(strategy_name: str, data: bytes) -> PartitionMatcher:
    """Decode a partition payload and build what its strategy matches with (on the worker)."""
    subs, cell = payload.decode(data)
    return KINDS[STRATEGIES.check(strategy_name)].matcher.load(subs, cell)
