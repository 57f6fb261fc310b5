"""Every enumerated choice of geops, named once, with what each name means.

Configuration validation (``choices`` of ``config.SETTINGS``), the CLI's ``choices``, the
benchmark plan and the code that builds each choice all read these tables. The package that
builds a choice keys its table of builders by the same names through ``Choices.table``, which
refuses a table that misses a name or has one too many: adding a choice here without what
builds it (or the reverse) fails when that package is imported, and its tests fail.

| choices | built by |
|---|---|
| ``STRATEGIES`` | ``geops.strategies.strategy.KINDS`` (placement, router, matcher) |
| ``PARTITIONERS`` | ``geops.partitioning.BUILDERS`` |
| ``JOINS`` | ``app.joins.JOIN_MODES`` (whether partitions stay resident) |
| ``POLICIES`` | ``distributor.policies.POLICIES`` |
| ``METRICS``, ``DISTRIBUTOR_MODES``, ``FIRST_PERIODS`` | ``distributor.params.Params`` |
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Choices(Sequence[str]):
    """The names of one enumeration (in their documented order) and what each means.

    A sequence of its names (iterate, index, test membership, join), so it can be given to
    argparse as ``choices``.
    """

    kind: str
    meanings: Mapping[str, str]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.meanings)

    def __iter__(self) -> Iterator[str]:
        return iter(self.meanings)

    def __len__(self) -> int:
        return len(self.meanings)

    def __getitem__(self, index):  # type: ignore[override]  # int or slice, as a tuple
        return self.names[index]

    def __contains__(self, name: object) -> bool:
        return name in self.meanings

    def check(self, name: str) -> str:
        """``name`` if it is one of the choices; ValueError naming them otherwise."""
        if name not in self.meanings:
            raise ValueError(f"unknown {self.kind} {name!r}; expected one of "
                             f"{', '.join(self.meanings)}")
        return name

    def table(self, built: Mapping[str, T]) -> dict[str, T]:
        """``built`` (one entry per name: what builds that choice) in the order of the names;
        ValueError unless it has exactly these names."""
        missing = [n for n in self.meanings if n not in built]
        extra = [n for n in built if n not in self.meanings]
        if missing or extra:
            raise ValueError(f"the {self.kind} table does not match config/choices.py: "
                             f"missing {missing}, unknown {extra}")
        return {name: built[name] for name in self.meanings}


STRATEGIES = Choices("strategy", {
    "sPS": "spatial partitions; every subscription of a partition is tested",
    "sPIS": "spatial partitions, each with an R-tree of its subscriptions",
    "RIhPS": "subscriptions hashed by id; a replicated R-tree routes candidates",
    "RIsPS": "each subscription in one spatial cell; a replicated R-tree routes candidates",
})
PARTITIONERS = Choices("partitioner", {
    "kdbtree": "KDB-tree over a sample of subscription centres (exactly P cells)",
    "quadtree": "quadtree over the same sample (the smallest 1 + 3k >= P cells)",
    "grid": "equal grid over the subscriptions' envelope (exactly P cells)",
})
JOINS = Choices("join", {
    "STAL": "static-local: static partitions stay on their worker, only the stream moves",
    "STRL": "stream-local: static partitions are shipped to the join every batch",
})
APP_MODES = Choices("app mode", {
    "micro-batch": "Structured Streaming micro-batches over partitioned subscriptions, balanced",
    "real-time": "long-running tasks that answer each publication as it arrives",
})
POLICIES = Choices("policy", {
    "greedy": "minimise the busiest worker's load with the fewest moves",
    "llfd": "move the heaviest partitions off overloaded workers (LLFD of Fang et al., "
            "HPDC 2017)",
    "minmig": "move the most load per static byte off overloaded workers (MinMig of Fang et "
              "al., HPDC 2017)",
    "mixed": "MinMig keeping few partitions away from their initial worker (Mixed of Fang et "
             "al., HPDC 2017)",
    "replicate": "give partitions above the fair share several owners, move the rest (MinMig)",
})
METRICS = Choices("metric", {
    "LB": "processing time of each partition",
    "DB": "items each partition processed",
})
DISTRIBUTOR_MODES = Choices("mode", {
    "dynamic": "command rebalances",
    "observe": "report MLDC only, never command",
    "adaptive": "command rebalances when the predicted saving pays for the move",
})
FIRST_PERIODS = Choices("first period", {
    "min-items": "the first period ends as soon as M items are in",
    "full": "the first period lasts D, as every later one (the paper)",
})
