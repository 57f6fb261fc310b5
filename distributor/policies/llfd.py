"""``llfd``: the basic workflow of Fang et al. (HPDC 2017) with the highest-load-first criterion.

Takes the largest partitions off every worker above ``(1 + theta) x`` the mean load and places
them, largest first, on the least-loaded worker where they fit (LLFD with Adjust,
``policies.migration``). Why: it relieves an overloaded worker with the fewest partitions
moved, whatever their static size; use it when moves cost about the same whatever is moved
(STRL, or a STAL move dominated by a fixed cost). One owner per partition: it drops replicas
(a replicated partition gets back one owner, its primary) when that balances better.
"""

from __future__ import annotations

from collections.abc import Sequence

from distributor.errors import InvalidPolicyOption
from distributor.policies import migration
from schemas.assignment import Owners


class LLFDPolicy:
    """Least-load fit decreasing on the partitions of the overloaded workers."""

    name = "llfd"
    psi_name = "highest load first"

    def __init__(self, theta: float = migration.THETA):
        if not 0 <= theta < 10:
            raise InvalidPolicyOption(f"need 0 <= theta < 10, got {theta}")
        self.theta = theta

    def psi(self, share: float, size: float) -> float:
        return migration.by_load(share, size)

    def propose_owners(self, partition_loads: Sequence[float], owners: Sequence[Owners],
                       workers: int, costs: Sequence[float] | None = None) -> list[Owners]:
        """One owner per partition, balanced to within ``theta`` where LLFD can; the owners
        in force when that does not lower the busiest worker's load."""
        old = migration.current_owners(owners)
        new = migration.rebalance(partition_loads, old, workers, costs, psi=self.psi,
                                  theta=self.theta)
        return migration.not_worse(partition_loads, old, new, workers)

    def propose(self, partition_loads: Sequence[float], assignment: Sequence[int],
                workers: int, costs: Sequence[float] | None = None) -> list[int]:
        """The single-owner form of ``propose_owners``."""
        return [o[0] for o in self.propose_owners(partition_loads, [(w,) for w in assignment],
                                                  workers, costs)]
