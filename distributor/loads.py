"""Per-period partition loads of the assignment epoch in force (monitoring, Section 3.1).

The app reports one PartitionLoad per (batch, partition, worker): a partition with several
owners (replicas) is reported once by each owner with its share; the shares are summed into
the partition's load, and the workers that reported it are its owners as the app runs them.

Holds only records the engine has already validated and matched to the epoch in force; a new
epoch starts from nothing, so loads measured under an older assignment are never mixed in.
Metrics are delivered at least once, so a record repeated for the same (batch, partition,
worker) within this period or the previous one is dropped. A record whose counts would push a
partition's or the period's sum past an Avro ``long`` is refused (``overflow``), so whatever the
engine reports of these sums encodes.
"""

from __future__ import annotations

LONG_MAX = 2**63 - 1  # the largest Avro long


class EpochLoads:
    """Items and processing time per partition for the current period of one epoch."""

    def __init__(self, partitions: int):
        self.partitions = partitions
        self.reset()

    def reset(self) -> None:
        """Forget everything: a new epoch begins."""
        self.items_per_partition = [0] * self.partitions
        self.ns_per_partition = [0] * self.partitions
        self._by_worker: dict[int, list[int]] = {}   # worker -> [items, ns] in the period
        self._period_items = 0
        self.locations: dict[int, int] = {}   # partition -> worker the records name
        # partition -> every worker that reported it in this epoch: a replicated partition is
        # reported once per owner (each with its share of the items and time)
        self.reporters: dict[int, set[int]] = {}
        self._seen: set[tuple[int, int, int]] = set()
        self._seen_before: set[tuple[int, int, int]] = set()

    def overflow(self, partition: int, items: int, processing_ns: int) -> str | None:
        """Why counting this record would overflow an Avro long, or None when it fits."""
        for what, total in (("items of partition", self.items_per_partition[partition] + items),
                            ("processing_ns of partition",
                             self.ns_per_partition[partition] + processing_ns)):
            if total > LONG_MAX:
                return (f"{what} {partition} would sum to {total} in this period, more than "
                        f"an Avro long holds")
        if self._period_items + items > LONG_MAX:
            return (f"the period's items would sum to {self._period_items + items}, more than "
                    f"an Avro long holds")
        return None

    def add(self, batch_id: int, partition: int, worker: int, items: int,
            processing_ns: int) -> bool:
        """Count one record; False (and nothing counted) when it repeats an earlier one."""
        key = (batch_id, partition, worker)
        if key in self._seen or key in self._seen_before:
            return False
        self._seen.add(key)
        self.items_per_partition[partition] += items
        self.ns_per_partition[partition] += processing_ns
        self._period_items += items
        mine = self._by_worker.setdefault(worker, [0, 0])
        mine[0] += items
        mine[1] += processing_ns
        self.locations[partition] = worker
        self.reporters.setdefault(partition, set()).add(worker)
        return True

    def owners(self, partition: int) -> tuple[int, ...]:
        """The workers that reported ``partition`` in this epoch (ascending), or ()."""
        return tuple(sorted(self.reporters.get(partition, ())))

    @property
    def period_items(self) -> int:
        """Items counted in the current period."""
        return self._period_items

    def loads(self, metric: str) -> list[float]:
        """Load of each partition in the current period: items (DB) or nanoseconds (LB)."""
        source = self.items_per_partition if metric == "DB" else self.ns_per_partition
        return [float(v) for v in source]

    def reported_by_worker(self, metric: str, workers: int) -> list[float]:
        """Load each worker reported in the current period, items (DB) or nanoseconds (LB),
        as the records name it: what a worker measured, not a share split among owners."""
        column = 0 if metric == "DB" else 1
        return [float(self._by_worker.get(w, (0, 0))[column]) for w in range(workers)]

    def next_period(self) -> None:
        """Start a new period of the same epoch (keeps recent keys to catch repeats)."""
        self.items_per_partition = [0] * self.partitions
        self.ns_per_partition = [0] * self.partitions
        self._by_worker = {}
        self._period_items = 0
        self._seen_before, self._seen = self._seen, set()
