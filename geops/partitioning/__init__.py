"""Spatial partitioners (KDB-tree, quadtree, equal grid) and hash partitioning by id.

A spatial partitioner is built, as in GeoPS, from a sample of subscription envelopes
(``max(2·P, N/100)`` of them, at most N) inside the boundary = envelope of all subscriptions.
The sample is drawn from the subscriptions sorted by id, so the result depends only on the set
of subscriptions, P and the seed — never on their order. The generator, the app and the
distributor all build it with ``build_partitioner(kind, subs, P, sample_seed=0)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from config.choices import PARTITIONERS
from geops.model import Envelopes, Subscriptions
from geops.partitioning.grid import build_grid
from geops.partitioning.kdbtree import build_kdbtree
from geops.partitioning.quadtree import build_quadtree, quadtree_leaves
from geops.partitioning.tree import SpatialPartitioner

__all__ = ["KINDS", "PARTITIONERS", "SpatialPartitioner", "build_partitioner",
           "hash_partition", "quadtree_leaves", "sample_size"]


@dataclass(frozen=True)
class Kind:
    """What builds one partitioner: ``build(sample centres or None, frame, P)``."""

    build: Callable[[np.ndarray | None, np.ndarray, int], SpatialPartitioner]
    sampled: bool  # from a sample of subscription centres; else from the frame alone


KINDS: dict[str, Kind] = PARTITIONERS.table({
    "kdbtree": Kind(build_kdbtree, sampled=True),
    "quadtree": Kind(build_quadtree, sampled=True),
    "grid": Kind(lambda _centers, frame, num_partitions: build_grid(frame, num_partitions),
                 sampled=False),
})


def sample_size(num_subscriptions: int, num_partitions: int) -> int:
    """How many subscription envelopes the partitioner is built from (GeoPS's rule)."""
    return min(num_subscriptions, max(2 * num_partitions, num_subscriptions // 100))


def build_partitioner(kind: str, subs: Subscriptions | Envelopes, num_partitions: int, *,
                      sample_seed: int = 0) -> SpatialPartitioner:
    """Build a ``kind`` partitioner ("kdbtree", "quadtree" or "grid") for ``subs``.

    KDB-tree and grid have exactly ``num_partitions`` cells; a quadtree has
    ``quadtree_leaves(num_partitions)`` (the smallest 1 + 3k ≥ P). With no subscriptions the
    boundary is the unit square at the origin.
    """
    chosen = KINDS[PARTITIONERS.check(kind)]
    if num_partitions < 1:
        raise ValueError(f"need at least one partition, got {num_partitions}")
    envelopes = subs if isinstance(subs, Envelopes) else Envelopes.of(subs)
    bounds = envelopes.bounds
    if len(bounds):
        frame = np.array([bounds[:, 0].min(), bounds[:, 1].min(),
                          bounds[:, 2].max(), bounds[:, 3].max()])
    else:
        frame = np.array([0.0, 0.0, 1.0, 1.0])
    if not chosen.sampled:
        return chosen.build(None, frame, num_partitions)
    order = np.lexsort((bounds[:, 3], bounds[:, 2], bounds[:, 1], bounds[:, 0], envelopes.ids))
    rng = np.random.default_rng(sample_seed)
    pick = np.sort(rng.choice(len(order), sample_size(len(order), num_partitions),
                              replace=False))
    sample = bounds[order[pick]]
    centers = np.column_stack([(sample[:, 0] + sample[:, 2]) / 2,
                               (sample[:, 1] + sample[:, 3]) / 2])
    return chosen.build(centers, frame, num_partitions)


def hash_partition(ids: np.ndarray, num_partitions: int) -> np.ndarray:
    """RIhPS's partition of each id: ``id mod P``, never negative (int32)."""
    return np.mod(np.asarray(ids, np.int64), num_partitions).astype(np.int32)
