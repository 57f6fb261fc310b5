"""The four GeoPS strategies behind one interface the app drives per partition.

Stream side: ``strategy.router().route(geoms)`` → items (publication, partition[, candidate
ids]). Partition side: ``load_partition(name, strategy.partition_payload(pid))`` → a matcher
whose ``match`` returns ``PartialMatches``. Finally ``merge`` unions the partial results of
each publication, adding the DISJOINT subscriptions (``strategy.disjoint_ids()``) no partition
found intersecting it.
"""

from __future__ import annotations

from geops.strategies.local import BatchMatches, LocalRunner
from geops.strategies.matchers import PartitionMatcher
from geops.strategies.merge import merge, pairs_to_csr
from geops.strategies.routers import CandidateRouter, SpatialRouter
from geops.strategies.strategy import KINDS, STRATEGIES, Strategy, build_strategy, load_partition
from geops.strategies.types import PartialMatches, Routed, Router

__all__ = ["KINDS", "STRATEGIES", "BatchMatches", "CandidateRouter", "LocalRunner",
           "PartialMatches", "PartitionMatcher", "Routed", "Router", "SpatialRouter", "Strategy",
           "build_strategy", "load_partition", "merge", "pairs_to_csr"]

