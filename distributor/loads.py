"""Per-period partition loads of the assignment epoch in force (monitoring, Section 3.1).

Holds only records the engine has already validated and matched to the epoch in force; a new
epoch starts from nothing, so loads measured under an older assignment are never mixed in.
Metrics are delivered at least once, so a record repeated for the same (batch, partition,
worker) within this period or the previous one is dropped.
"""

from __future__ import annotations


class EpochLoads:
    """Items and processing time per partition for the current period of one epoch."""

    def __init__(self, partitions: int):
        self.partitions = partitions
        self.reset()

    def reset(self) -> None:
        """Forget everything: a new epoch begins."""
        self.items_per_partition = [0] * self.partitions
        self.ns_per_partition = [0] * self.partitions
        self.locations: dict[int, int] = {}   # partition -> worker the records name
        self._seen: set[tuple[int, int, int]] = set()
        self._seen_before: set[tuple[int, int, int]] = set()

    def add(self, batch_id: int, partition: int, worker: int, items: int,
            processing_ns: int) -> bool:
        """Count one record; False (and nothing counted) when it repeats an earlier one."""
        key = (batch_id, partition, worker)
        if key in self._seen or key in self._seen_before:
            return False
        self._seen.add(key)
        self.items_per_partition[partition] += items
        self.ns_per_partition[partition] += processing_ns
        self.locations[partition] = worker
        return True

    @property
    def period_items(self) -> int:
        """Items counted in the current period."""
        return sum(self.items_per_partition)

    def loads(self, metric: str) -> list[float]:
        """Load of each partition in the current period: items (DB) or nanoseconds (LB)."""
        source = self.items_per_partition if metric == "DB" else self.ns_per_partition
        return [float(v) for v in source]

    def next_period(self) -> None:
        """Start a new period of the same epoch (keeps recent keys to catch repeats)."""
        self.items_per_partition = [0] * self.partitions
        self.ns_per_partition = [0] * self.partitions
        self._seen_before, self._seen = self._seen, set()
