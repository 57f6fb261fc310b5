"""``minmig``: MinMig of Fang et al. (HPDC 2017), the migration-minimising member of the LLFD
family.

The same workflow as ``llfd`` (``policies.migration``), but the partitions taken off an
overloaded worker, and the order of the exchangeable sets, follow MinMig's priority
``gamma = load ** beta / static bytes`` (beta = 1.5, the paper's): the most load relieved per
byte shipped. Why: under STAL a move ships the partition's static data and rebuilds its index
on the new worker, so among moves that balance equally well the light-weight, busy partitions
are the cheap ones. One owner per partition (replicas are dropped when that balances better).
"""

from __future__ import annotations

from distributor.errors import InvalidPolicyOption
from distributor.policies import migration
from distributor.policies.llfd import LLFDPolicy


class MinMigPolicy(LLFDPolicy):
    """LLFD with MinMig's load-per-byte criterion."""

    name = "minmig"
    psi_name = "highest load^beta per byte first"

    def __init__(self, theta: float = migration.THETA, beta: float = migration.BETA):
        super().__init__(theta)
        if not 0 < beta < 10:
            raise InvalidPolicyOption(f"need 0 < beta < 10, got {beta}")
        self.beta = beta
        self._gamma = migration.by_load_per_byte(beta)

    def psi(self, share: float, size: float) -> float:
        return self._gamma(share, size)
