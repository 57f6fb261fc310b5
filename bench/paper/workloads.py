"""Generated workloads, made once and kept while the same parameters are asked for again.

Repeat r of the physical runs and of the simulation generates its workload with seed
``1000 + r``: all modes and pipelines of one (skew, repeat) see the same stream, and the
simulation regenerates exactly the subscriptions (and so the partitions) of the physical runs
it takes its costs from.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from bench.paper.plan import RunSpec
from geops.workload import SkewSpec, Workload, generate_workload

SEED_BASE = 1000


def seed(repeat: int) -> int:
    """The generator's seed for repeat ``repeat``."""
    return SEED_BASE + repeat


@dataclass(frozen=True)
class WorkloadKey:
    """Everything a generated workload depends on."""

    repeat: int
    subscriptions: int
    publications: int
    workers: int
    hot_workers: int
    partitions: int
    partitioner: str
    skew: float
    hot_partitions: int | None = None   # the skewed share in K partitions

    @classmethod
    def of(cls, spec: RunSpec) -> WorkloadKey:
        """The workload of a physical run."""
        return cls(spec.repeat, spec.sizes.subscriptions, spec.sizes.publications, spec.workers,
                   spec.hot_workers, spec.partitions, spec.partitioner, spec.skew,
                   spec.hot_partitions)


class Workloads:
    """A cache of the ``keep`` workloads asked for most recently (memory stays bounded: the
    harness groups runs by workload, and the simulation asks for one at a time)."""

    def __init__(self, keep: int = 1) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.keep = keep
        self._cache: OrderedDict[WorkloadKey, Workload] = OrderedDict()

    def get(self, key: WorkloadKey | RunSpec) -> Workload:
        """The workload of ``key`` (or of the run ``key``), generated on first use."""
        if isinstance(key, RunSpec):
            key = WorkloadKey.of(key)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        while len(self._cache) >= self.keep:
            self._cache.popitem(last=False)
        workload = generate_workload(
            seed=seed(key.repeat), subscriptions=key.subscriptions,
            publications=key.publications,
            skew=SkewSpec(workers=key.workers, hot_workers=key.hot_workers,
                          partitions=key.partitions, partitioner=key.partitioner,
                          target=key.skew, hot_partitions=key.hot_partitions))
        self._cache[key] = workload
        return workload

    def clear(self) -> None:
        self._cache.clear()
