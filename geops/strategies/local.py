"""Running a strategy in one process along the app's path: route → group → match → merge.

The offline matcher, the kernel benchmark and the tests use this, so they exercise exactly
what the Spark app runs per partition, minus the shuffle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geops.model import Subscriptions
from geops.strategies.churn import LiveSubscriptions, apply_deltas
from geops.strategies.matchers import PartitionMatcher
from geops.strategies.merge import merge
from geops.strategies.strategy import Strategy, load_partition


@dataclass
class BatchMatches:
    """Merged matches of a batch (CSR by key) and how much work found them."""

    keys: np.ndarray
    offsets: np.ndarray
    sub_ids: np.ndarray
    items: int
    candidates: int


class LocalRunner:
    """A strategy with every partition loaded from its payload in this process."""

    def __init__(self, strategy: Strategy):
        self.strategy = strategy
        self.router = strategy.router()
        self.matchers: list[PartitionMatcher] = [
            load_partition(strategy.name, strategy.partition_payload(pid))
            for pid in range(strategy.num_partitions)]
        self._disjoint = strategy.disjoint_ids()
        self._live: LiveSubscriptions | None = None
        self._applied = [0] * strategy.num_partitions
        self._router_deltas: list = []

    def apply(self, upserts: Subscriptions, deletes: np.ndarray) -> None:
        """Subscriptions change: apply the change's deltas to the partitions and the router,
        as the app's tasks do."""
        if self._live is None:
            self._live = LiveSubscriptions(self.strategy, self.strategy.subscriptions())
        result = self._live.apply(upserts, deletes)
        for pid, delta in result.partitions.items():
            self._applied[pid] = apply_deltas(self.matchers[pid], [delta], self._applied[pid])
        if result.router is not None:
            self._router_deltas.append(result.router)
        self._disjoint = self._live.disjoint_ids()

    def match(self, keys: np.ndarray, geoms: np.ndarray) -> BatchMatches:
        """Match a batch of publications (unique int64 ``keys``, shapely ``geoms``)."""
        keys = np.asarray(keys, np.int64)
        geoms = np.asarray(geoms, dtype=object)
        routed = self.router.route(geoms, tuple(self._router_deltas))
        partials = []
        for pid, items in routed.by_partition():
            partials.append(self.matchers[pid].match(
                keys[items.pub_index], geoms[items.pub_index], items.cand_offsets,
                items.cand_ids))
        out_keys, offsets, sub_ids = merge(keys, partials, self._disjoint)
        return BatchMatches(out_keys, offsets, sub_ids, len(routed),
                            sum(p.candidates for p in partials))
