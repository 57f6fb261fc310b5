"""The common workflow of the migration-aware policies (Fang et al., HPDC 2017).

Fang et al. balance keys of a stateful operator with a bounded routing table; here the "keys" are
static partitions (or, for a replicated partition, each of its k owners' shares: a
*piece* of load ``load / k``), the migration cost of a piece is its partition's static bytes
(what a STAL move ships to the new owner), and an instance is a worker. With
``L_max = (1 + theta) * mean worker load`` every policy of this family runs:

- **Phase I (cleaning)**: policy specific (``mixed`` sends some partitions home first).
- **Phase II (preparing)**: on every worker above ``L_max`` (busiest first), take pieces off in
  the order of the selection criterion ``psi`` until it is at most ``L_max``; they become
  candidates. New replicas (a partition given more owners) are candidates from the start.
- **Phase III (assigning), LLFD**, least-load fit decreasing: candidates by decreasing load go
  to the least-loaded worker (that does not own the same partition already) where they fit
  under ``L_max``; where a piece does not fit, the paper's *Adjust* may make room by taking an
  *exchangeable set* E of strictly smaller pieces off that worker (chosen by ``psi``, just
  enough to fit) back into the candidates.

Adaptations: a piece above ``L_max`` fits on no worker and is not taken off in Phase II (but
of several on one worker only the largest stays), and a candidate that fits nowhere goes to the
least-loaded eligible worker, or back to the worker it left when that is as lightly loaded (for
the big pieces, the busiest worker's load is then the largest piece's); at the end, moves are
undone (the most bytes first) while that keeps every worker under both ``L_max`` and the
result's busiest load, so a partition never moves for nothing. Adjust chains are capped
(``20 x`` the number of pieces) so the search always ends.

Why this family next to ``greedy``: it moves only what sits above ``L_max`` and picks, by
``psi``, which partitions move, so it can trade the bytes moved against the balance reached;
greedy instead minimises the maximum load and then the number of moves. The policies wrap
this module and return the owners in force when the result does not lower the busiest
worker's load (never worse than now).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence

from distributor.errors import ShapeError
from distributor.mldc import owner_loads
from schemas.assignment import Owners

THETA = 0.05     # L_max = (1 + THETA) x mean: the balance every worker is brought to
BETA = 1.5       # MinMig's weight of the load against the bytes (the paper's value)
_REL_EPS = 1e-9  # loads within this share of the mean are equal
_ADJUST_ROUNDS = 20

# psi(share of load of a piece, static bytes of its partition) -> priority (higher first)
Criterion = Callable[[float, float], float]


def by_load(share: float, size: float) -> float:
    """Highest load first (Fang et al.'s LLFD and MinTable criterion): fewest pieces moved."""
    return share


def by_load_per_byte(beta: float = BETA) -> Criterion:
    """MinMig's ``gamma = load ** beta / bytes``: most load relieved per byte shipped."""
    def gamma(share: float, size: float) -> float:
        return share ** beta / max(size, 1.0)
    return gamma


def current_owners(owners: Sequence[Sequence[int]]) -> list[Owners]:
    """``owners`` as a list of int tuples."""
    return [tuple(int(w) for w in o) for o in owners]


def peak(loads: Sequence[float], owners: Sequence[Sequence[int]], workers: int) -> float:
    """The busiest worker's load under ``owners``."""
    return max(owner_loads(loads, owners, workers))


def not_worse(loads: Sequence[float], old: list[Owners], new: list[Owners],
              workers: int) -> list[Owners]:
    """``new`` if it lowers the busiest worker's load, else ``old`` (nothing better found)."""
    if new == old:
        return old
    total = math.fsum(loads)
    eps = _REL_EPS * total / max(workers, 1)
    return new if peak(loads, new, workers) < peak(loads, old, workers) - eps else old


# long: Phases II and III of Fang et al. (HPDC 2017) as the paper states them, sharing one
# state (owners, worker loads, members) through the closures take, put and prepare
def rebalance(partition_loads: Sequence[float], owners: Sequence[Sequence[int]], workers: int,
              costs: Sequence[float] | None, *, psi: Criterion, theta: float = THETA,
              replicas: Sequence[int] | None = None) -> list[Owners]:
    """Phases II and III for ``replicas[p]`` owners per partition (default one each).

    Owners in force are kept where possible: a partition given fewer owners keeps its primary
    and its other owners on the least-loaded workers; one given more keeps all and its new
    pieces are candidates. Returns the new owners (primary first: the old primary while it
    still owns the partition), without the "never worse" check.
    """
    loads = [float(x) for x in partition_loads]
    P = len(loads)
    old = current_owners(owners)
    if len(old) != P:
        raise ShapeError(f"{P} loads, owners of {len(old)} partitions")
    size = [0.0] * P if costs is None else [float(c) for c in costs]
    if len(size) != P:
        raise ShapeError(f"{P} loads, {len(size)} costs")
    k = [1] * P if replicas is None else [max(1, min(int(r), workers)) for r in replicas]
    total = math.fsum(loads)
    if workers < 2 or total <= 0:
        return old
    mean = total / workers
    eps = _REL_EPS * mean
    lmax = (1 + theta) * mean
    share = [loads[p] / k[p] for p in range(P)]
    prio = [psi(share[p], size[p]) for p in range(P)]
    before = owner_loads(loads, old, workers)

    own: list[list[int]] = []
    wl = [0.0] * workers
    members: list[set[int]] = [set() for _ in range(workers)]
    candidates: list[int] = []
    for p in range(P):
        keep = list(old[p])
        if len(keep) > k[p]:
            rest = sorted(keep[1:], key=lambda w: (before[w], w))
            kept = set([keep[0], *rest[:k[p] - 1]])
            keep = [w for w in keep if w in kept]
        own.append(keep)
        for w in keep:
            wl[w] += share[p]
            members[w].add(p)
        candidates += [p] * (k[p] - len(keep))

    def take(p: int, d: int) -> None:
        own[p].remove(d)
        members[d].discard(p)
        wl[d] -= share[p]

    def put(p: int, d: int) -> None:
        own[p].append(d)
        members[d].add(p)
        wl[d] += share[p]

    # Phase II: relieve every worker above L_max, busiest first, by psi. A piece above L_max
    # fits on no worker: it stays, unless its worker holds several (the largest stays).
    origin: dict[tuple[int, int], int] = {}   # (partition, candidate no.) -> worker it left

    def prepare(p: int, d: int) -> None:
        take(p, d)
        origin[(p, len(candidates))] = d
        candidates.append(p)

    for d in sorted(range(workers), key=lambda d: (-wl[d], d)):
        for p in sorted(members[d], key=lambda p: (-prio[p], p)):
            if wl[d] <= lmax + eps:
                break
            if share[p] <= lmax + eps:
                prepare(p, d)
        if wl[d] > lmax + eps:
            big = sorted((p for p in members[d] if share[p] > lmax + eps),
                         key=lambda p: (-share[p], p))
            for p in big[1:]:
                prepare(p, d)

    # Phase III: least-load fit decreasing, with Adjust
    heap = [(-share[p], -prio[p], p, i) for i, p in enumerate(candidates)]
    heapq.heapify(heap)
    seq = len(heap)
    rounds = _ADJUST_ROUNDS * max(1, len(heap) + P)
    while heap:
        _, _, p, i = heapq.heappop(heap)
        rounds -= 1
        order = [d for d in sorted(range(workers), key=lambda d: (wl[d], d)) if d not in own[p]]
        target, exchange = None, ()
        for d in order:
            if wl[d] + share[p] <= lmax + eps:
                target = d
                break
            if rounds > 0:
                found = _exchangeable(d, p, members, share, prio, wl, lmax, eps)
                if found is not None:
                    target, exchange = d, found
                    break
        if target is None:   # fits nowhere: where it adds least, back where it came from on ties
            home = origin.get((p, i))
            target = order[0]
            if home is not None and home not in own[p] and wl[home] <= wl[target]:
                target = home
        for q in exchange:
            take(q, target)
            origin[(q, seq)] = target
            heapq.heappush(heap, (-share[q], -prio[q], q, seq))
            seq += 1
        put(p, target)
    return _prune(loads, old, [tuple(o) for o in own], workers, size, lmax, eps)


def _prune(loads: list[float], old: list[Owners], new: list[Owners], workers: int,
           size: list[float], lmax: float, eps: float) -> list[Owners]:
    """``new`` with single-owner moves undone (largest static bytes first) while no worker
    goes above both ``L_max`` and the busiest worker of ``new``: when ``L_max`` cannot be
    reached, LLFD's search may have moved partitions that do not help."""
    out = list(new)
    wl = owner_loads(loads, out, workers)
    limit = max(max(wl), lmax) + eps
    moved = sorted((p for p in range(len(out)) if len(old[p]) == len(out[p]) == 1
                    and out[p] != old[p]), key=lambda p: (-size[p], -loads[p], p))
    changed = True
    while changed:
        changed = False
        for p in moved:
            a, b = old[p][0], out[p][0]
            if a != b and wl[a] + loads[p] <= limit:
                wl[b] -= loads[p]
                wl[a] += loads[p]
                out[p] = old[p]
                changed = True
    return out


def _exchangeable(d: int, p: int, members: list[set[int]], share: list[float],
                  prio: list[float], wl: list[float], lmax: float, eps: float
                  ) -> tuple[int, ...] | None:
    """Fang et al.'s exchangeable set: pieces on ``d`` strictly smaller than ``p``'s, by psi, just
    enough that ``p`` fits on ``d`` under ``lmax``; None when no such set exists."""
    need = wl[d] + share[p] - lmax - eps
    chosen: list[int] = []
    for q in sorted((q for q in members[d] if share[q] < share[p]), key=lambda q: (-prio[q], q)):
        chosen.append(q)
        need -= share[q]
        if need <= 0:
            return tuple(chosen)
    return None


def shipped_bytes(old: Sequence[Sequence[int]], new: Sequence[Sequence[int]],
                  costs: Sequence[float]) -> float:
    """Bytes a change of owners ships: a partition's static bytes for every owner it gains."""
    return math.fsum(float(costs[p]) for p, (a, b) in enumerate(zip(old, new, strict=True))
                     for w in b if w not in a)
