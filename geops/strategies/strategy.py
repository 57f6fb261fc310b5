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

from config.choices import STRATEGIES
from geops.model import Envelopes, Relation, Subscriptions
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

# (envelopes, spatial partitioner or None, P) -> (subscription index, partition) pairs
Placement = Callable[[Envelopes, SpatialPartitioner | None, int],
                     tuple[np.ndarray, np.ndarray]]


def _hashed(env: Envelopes, _spatial: SpatialPartitioner | None,
            num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(len(env), dtype=np.int64), hash_partition(env.ids, num_partitions)


def _every_cell(env: Envelopes, spatial: SpatialPartitioner | None,
                _num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    return spatial.place_bounds(env.bounds, env.points)


def _lowest_cell(env: Envelopes, spatial: SpatialPartitioner | None,
                 _num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    members, pids = spatial.place_bounds(env.bounds, env.points)
    # one cell each: place_bounds() sorts by partition, so the first is lowest
    first = np.r_[True, members[1:] != members[:-1]][: len(members)]
    return members[first], pids[first]


@dataclass(frozen=True)
class Kind:
    """What builds one strategy."""

    place: Placement               # the partitioning rule (on envelopes: no shapes needed)
    spatial: bool                  # placed by a spatial partitioner (else ids are hashed)
    candidates: bool               # routed by a replicated R-tree that attaches candidate ids
    matcher: type[PartitionMatcher]


KINDS: dict[str, Kind] = STRATEGIES.table({
    "sPS": Kind(_every_cell, spatial=True, candidates=False, matcher=ScanMatcher),
    "sPIS": Kind(_every_cell, spatial=True, candidates=False, matcher=IndexedMatcher),
    "RIhPS": Kind(_hashed, spatial=False, candidates=True, matcher=CandidateMatcher),
    "RIsPS": Kind(_lowest_cell, spatial=True, candidates=True, matcher=CandidateMatcher),
})


class Layout:
    """A strategy's plan over a set of subscriptions known by their envelopes: the partitioner,
    which partitions each subscription belongs to, and the router. It is all the app's driver
    needs (``Envelopes`` of a million subscriptions: ~42 MB); the shapes stay on the executors.
    """

    def __init__(self, name: str, envelopes: Envelopes, num_partitions: int,
                 partitioner: str = "kdbtree", *, sample_seed: int = 0,
                 spatial: SpatialPartitioner | None = None):
        """``spatial``: a partitioner to place by instead of one built from ``envelopes``
        (the one a static side was built with, kept in the app's snapshot)."""
        kind = KINDS[STRATEGIES.check(name)]
        PARTITIONERS.check(partitioner)
        if num_partitions < 1:
            raise ValueError(f"need at least one partition, got {num_partitions}")
        if len(np.unique(envelopes.ids)) != len(envelopes):
            raise ValueError("subscription ids must be unique")
        if kind.spatial:
            if spatial is None:
                spatial = build_partitioner(partitioner, envelopes, num_partitions,
                                            sample_seed=sample_seed)
            p = spatial.num_partitions
        else:
            spatial, p = None, num_partitions
        members, pids = kind.place(envelopes, spatial, p)
        self.name = name
        self.num_partitions = p
        self.partitioner = spatial
        self.envelopes = envelopes
        self._router: Router = (CandidateRouter(envelopes.ids[members],
                                                envelopes.bounds[members], pids, p)
                                if kind.candidates else SpatialRouter(spatial))
        order = np.argsort(pids, kind="stable")
        self._members = np.asarray(members, np.int64)[order]
        self._sizes = np.bincount(pids, minlength=p).astype(np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(self._sizes)])

    def place(self, envelopes: Envelopes) -> tuple[np.ndarray, np.ndarray]:
        """(row, partition) of every partition each of ``envelopes`` belongs to under this
        strategy's rule, e.g. to place subscriptions that arrive while running."""
        return KINDS[self.name].place(envelopes, self.partitioner, self.num_partitions)

    def place_subscriptions(self, subs: Subscriptions) -> tuple[np.ndarray, np.ndarray]:
        """``place`` for subscriptions given with their shapes."""
        return self.place(Envelopes.of(subs))

    def router(self) -> Router:
        """The replicated part, shipped to every stream-side task."""
        return self._router

    def partition_members(self, pid: int) -> np.ndarray:
        """Rows of the subscriptions of static partition ``pid`` (in input order)."""
        return self._members[self._offsets[pid]:self._offsets[pid + 1]]

    def disjoint_ids(self) -> np.ndarray:
        """Sorted ids of every DISJOINT subscription (they can match without any partition)."""
        return np.sort(self.envelopes.ids[self.envelopes.relations == Relation.DISJOINT])

    def partition_sizes(self) -> np.ndarray:
        """Subscriptions per partition (int64, length P); replicas count in each partition."""
        return self._sizes.copy()


class Strategy(Layout):
    """A strategy over a fixed set of subscriptions with their shapes: a ``Layout`` that can
    also make each partition's payload (offline runs, tests, benchmarks)."""

    def __init__(self, name: str, subs: Subscriptions, num_partitions: int,
                 partitioner: str = "kdbtree", *, sample_seed: int = 0):
        super().__init__(name, Envelopes.of(subs), num_partitions, partitioner,
                         sample_seed=sample_seed)
        self._subs = subs

    def subscriptions(self) -> Subscriptions:
        """The subscriptions the strategy was built from."""
        return self._subs

    def partition_subscriptions(self, pid: int) -> Subscriptions:
        """The subscriptions of static partition ``pid`` (in input order)."""
        return self._subs.take(self.partition_members(pid))

    def partition_payload(self, pid: int) -> bytes:
        """Partition ``pid`` serialised; its length is what moving the partition costs."""
        if not 0 <= pid < self.num_partitions:
            raise IndexError(f"partition {pid} outside 0..{self.num_partitions - 1}")
        cell = payload.WHOLE_PLANE if self.partitioner is None else self.partitioner.cells[pid]
        return payload.encode(self.partition_subscriptions(pid), cell)


def build_strategy(name: str, subs: Subscriptions, num_partitions: int,
                   partitioner: str = "kdbtree", *, sample_seed: int = 0) -> Strategy:
    """Partition ``subs`` for strategy ``name`` into (about, for a quadtree) ``num_partitions``.

    RIhPS hashes ids and ignores the partitioner; the others build ``partitioner`` with
    ``build_partitioner`` (so a quadtree's actual count is ``Strategy.num_partitions``).
    """
    return Strategy(name, subs, num_partitions, partitioner, sample_seed=sample_seed)


def load_partition(strategy_name: str, data: bytes) -> PartitionMatcher:
    """Decode a partition payload and build what its strategy matches with (on the worker)."""
    subs, cell = payload.decode(data)
    return KINDS[STRATEGIES.check(strategy_name)].matcher.load(subs, cell)
