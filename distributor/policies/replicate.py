"""``replicate``: hot partitions get several owners, the rest is balanced by moving (MinMig).

Moving whole partitions cannot lower the busiest worker below the hottest partition's load.
The join is stateless (a static partition is read-only), so a partition may be owned by k
workers, each holding a copy of its static data and taking 1/k of its stream items
(``schemas.assignment.owner_index``: key modulo k, deterministic and even), as partial key
grouping (Nasir et al., ICDE 2015) and D-Choices (Nasir et al., ICDE 2016) split a hot key.

How k is chosen, with ``L_max = (1 + theta) x`` the mean worker load:

1. from its load: ``k_p = ceil(load_p / L_max)`` (at most W), the fewest owners whose shares
   each fit under ``L_max``; a partition whose load fell below ``L_max`` gets k = 1 again, so
   replicas are dropped when the load falls (the least-loaded owners' copies are kept, the
   primary always);
2. the pieces (k_p shares of load_p / k_p) are balanced by the LLFD workflow with MinMig's
   criterion (``policies.migration``): owners in force are kept where possible, a new replica
   is placed like a moved partition and costs its static bytes to ship;
3. while the busiest worker stays above ``L_max`` and holds a share larger than
   ``theta x mean`` (a smaller piece can always be fitted by LLFD), that partition gets one
   owner more and step 2 runs again (at most 2 W rounds); the best result (lowest busiest
   worker, then fewest bytes shipped) is kept;
4. ``greedy``'s proposal (moves only, one owner each) competes: when its busiest worker is no
   busier than that result's, it wins. Why: greedy minimises the maximum load more tightly
   than the LLFD workflow, which stops at ``L_max``; so ``replicate`` is never less balanced
   than greedy, and it makes no copies where moving suffices.

Partitions whose load is below ``L_max`` are never replicated, so many small partitions are
only moved. The owners in force are returned when nothing lowers the busiest worker's load.
``propose`` (one owner per partition) is MinMig's answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from distributor.mldc import owner_loads
from distributor.policies import migration
from distributor.policies.base import propose_owners
from distributor.policies.greedy import GreedyPolicy
from distributor.policies.minmig import MinMigPolicy
from schemas.assignment import Owners


class ReplicatePolicy(MinMigPolicy):
    """MinMig plus replication of partitions above the fair share (see the module doc)."""

    name = "replicate"
    _greedy = GreedyPolicy()

    def propose_owners(self, partition_loads: Sequence[float], owners: Sequence[Owners],
                       workers: int, costs: Sequence[float] | None = None) -> list[Owners]:
        loads = [float(x) for x in partition_loads]
        old = migration.current_owners(owners)
        P = len(loads)
        total = math.fsum(loads)
        if workers < 2 or total <= 0 or P == 0:
            return old
        size = [0.0] * P if costs is None else [float(c) for c in costs]
        mean = total / workers
        lmax = (1 + self.theta) * mean
        eps = 1e-9 * mean
        k = [max(1, min(workers, math.ceil(x / lmax - 1e-12))) for x in loads]
        best: tuple[float, float, list[Owners]] | None = None
        for _ in range(2 * workers):
            new = migration.rebalance(loads, old, workers, size, psi=self.psi,
                                      theta=self.theta, replicas=k)
            per_worker = owner_loads(loads, new, workers)
            top = max(per_worker)
            score = (top, migration.shipped_bytes(old, new, size), new)
            if best is None or score[:2] < best[:2]:
                best = score
            if top <= lmax + eps:
                break
            busiest = max(range(workers), key=lambda w: (per_worker[w], -w))
            pieces = [p for p in range(P) if busiest in new[p] and k[p] < workers
                      and loads[p] / k[p] > self.theta * mean + eps]
            if not pieces:
                break
            hot = max(pieces, key=lambda p: (loads[p] / k[p], -p))
            k[hot] += 1
        assert best is not None
        moved = propose_owners(self._greedy, loads, old, workers, size)
        if max(owner_loads(loads, moved, workers)) <= best[0] + eps:
            return migration.not_worse(loads, old, moved, workers)
        return migration.not_worse(loads, old, best[2], workers)

    def propose(self, partition_loads: Sequence[float], assignment: Sequence[int],
                workers: int, costs: Sequence[float] | None = None) -> list[int]:
        """One owner per partition: MinMig's proposal (no replicas)."""
        return [o[0] for o in MinMigPolicy.propose_owners(
            self, partition_loads, [(w,) for w in assignment], workers, costs)]
