"""``mixed``: the Mixed algorithm of Fang et al. (HPDC 2017), MinMig with a bounded "routing
table".

There a key off its hash home needs a routing-table entry and the table is bounded (``A_max``).
Here a partition's *home* is its worker in the initial assignment
(``schemas.assignment.initial_assignment``: contiguous spatial blocks), and an *entry* is a
partition owned by anything else than its home alone. Mixed runs MinMig; while the result has
more than ``table_max`` entries, it starts again from the owners in force with n entries sent
home first (Phase I, the partitions with the fewest static bytes first), n growing by the
entries overused in the last trial. Why: partitions near their home keep each worker's region
spatially compact, and a hot spot that cools down goes home instead of staying scattered; the
price is more bytes moved than MinMig. Default ``table_max``: a quarter of the partitions.
"""

from __future__ import annotations

from collections.abc import Sequence

from distributor.errors import InvalidPolicyOption
from distributor.policies import migration
from distributor.policies.minmig import MinMigPolicy
from schemas.assignment import Owners, initial_assignment

_TRIALS = 8


class MixedPolicy(MinMigPolicy):
    """MinMig that keeps at most ``table_max`` partitions away from home."""

    name = "mixed"

    def __init__(self, theta: float = migration.THETA, beta: float = migration.BETA,
                 table_max: int | None = None):
        super().__init__(theta, beta)
        if table_max is not None and table_max < 0:
            raise InvalidPolicyOption(f"need table_max >= 0, got {table_max}")
        self.table_max = table_max

    def propose_owners(self, partition_loads: Sequence[float], owners: Sequence[Owners],
                       workers: int, costs: Sequence[float] | None = None) -> list[Owners]:
        old = migration.current_owners(owners)
        P = len(old)
        home = initial_assignment(P, workers) if P else []
        limit = P // 4 if self.table_max is None else self.table_max
        size = [0.0] * P if costs is None else [float(c) for c in costs]

        def entries(own: list[Owners]) -> list[int]:
            return [p for p in range(P) if own[p] != (home[p],)]

        # Phase I candidates: entries in force, fewest bytes first
        away = sorted(entries(old), key=lambda p: (size[p], p))
        n, new = 0, old
        for _ in range(_TRIALS):
            start = list(old)
            for p in away[:n]:
                start[p] = (home[p],)
            new = migration.rebalance(partition_loads, start, workers, costs, psi=self.psi,
                                      theta=self.theta)
            over = len(entries(new)) - limit
            if over <= 0 or n >= len(away):
                break
            n = min(len(away), n + over)
        return migration.not_worse(partition_loads, old, new, workers)
