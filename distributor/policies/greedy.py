"""``greedy``: the lowest maximum worker load it can find, reached with the fewest moves.

Minimising the maximum load (makespan) is NP-hard, and so is reaching a given maximum with the
fewest migrations, so this is a heuristic with three guarantees the tests check:

- it never returns an assignment whose maximum load is higher than the current one, and it
  returns the current assignment unchanged when it cannot lower the maximum;
- its maximum load is at most that of LPT (largest partition first onto the least-loaded
  worker, within 4/3 of the optimum) plus ``tolerance`` * mean load;
- no move is unneeded: moving any single moved partition back to its old worker would raise
  the maximum load above the result's.

How (for P partitions, W workers):

1. ``repair(T)`` tries to bring every worker to at most T with few moves, moving each partition
   at most once. It always works on the most loaded worker h, with excess e = L_h - T, and
   takes the first step that applies: (a) the smallest partition of h that covers e and fits
   somewhere; (b) a two-move chain: a covering partition of h onto a worker w that then sheds
   its smallest partition that covers the overflow and fits elsewhere (the paper's Figure 2);
   (c) the largest partition of h that fits somewhere; (d) the smallest partition of h onto
   the least-loaded worker, whose overflow is handled next. Targets are chosen best-fit (the
   fullest worker that still takes the partition), which keeps large gaps for large partitions.
   One call costs O(moves * W * log P).
2. The target T is found by bisection between the lower bound max(mean load, largest partition)
   and the current maximum, to a precision of ``precision`` * mean load (about
   log2(W / precision) calls). LPT's makespan is probed too, and LPT's own assignment (workers
   relabelled to keep as many partitions in place as possible) is kept as a candidate. One
   more call at (best maximum + tolerance * mean load) looks for a cheaper near-best result.
3. Every candidate is pruned: a moved partition goes back home while that does not raise the
   candidate's maximum. Among the candidates whose maximum is within ``tolerance`` * mean load
   of the best one, the one with the fewest moves wins (then the lower migration cost, the lower
   maximum, then the one moving the cheapest / lowest-numbered partitions). The tolerance
   stops the policy from trading many extra migrations for a noise-sized gain.

Measured for P = 4000 and W = 16..64 with skewed loads: 0.1-0.2 s; about 2 s in the
pathological case where nearly every partition must move (all on one worker).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from distributor.errors import InvalidPolicyOption, ShapeError
from distributor.mldc import worker_loads

_REL_EPS = 1e-9        # float slack, relative to the mean worker load
_CHAIN_CANDIDATES = 4  # covering partitions tried as the first move of a two-move chain

Entry = tuple[float, int, int]  # (load, rank, partition): sortable, ties broken by rank


class _Repair:
    """State of one ``repair(T)`` run: worker loads and each worker's movable partitions."""

    def __init__(self, loads: list[float], assignment: list[int], workers: int,
                 target: float, rank: list[int], eps: float):
        self.loads = loads
        self.owner = list(assignment)
        self.workers = workers
        self.target = target
        self.eps = eps
        self.load = worker_loads(loads, assignment, workers)
        self.movable: list[list[Entry]] = [[] for _ in range(workers)]
        for p, w in enumerate(assignment):
            if loads[p] > 0:
                self.movable[w].append((loads[p], rank[p], p))
        for entries in self.movable:
            entries.sort()

    def run(self) -> list[int] | None:
        """The repaired assignment, or None when this heuristic cannot reach the target."""
        for _ in range(len(self.loads) + 1):  # every step moves a partition, none twice
            h = max(range(self.workers), key=lambda w: (self.load[w], -w))
            excess = self.load[h] - self.target
            if excess <= self.eps:
                return self.owner
            if not (self._finish(h, excess) or self._chain(h, excess) or self._partial(h)
                    or self._overflow(h)):
                return None
        return None

    def _room(self, w: int) -> float:
        return self.target - self.load[w]

    def _move(self, entry: Entry, to: int) -> None:
        load, _, p = entry
        src = self.owner[p]
        self.movable[src].remove(entry)  # a moved partition is not moved again
        self.load[src] -= load
        self.load[to] += load
        self.owner[p] = to

    def _best_fit(self, load: float, exclude: tuple[int, ...]) -> int | None:
        """The worker with the least room that still takes ``load`` (lowest id on ties)."""
        best = None
        for w in range(self.workers):
            room = self._room(w)
            if w not in exclude and room + self.eps >= load and (
                    best is None or room < self._room(best)):
                best = w
        return best

    def _max_room(self, exclude: tuple[int, ...]) -> float:
        return max((self._room(w) for w in range(self.workers) if w not in exclude),
                   default=-math.inf)

    def _covering(self, h: int, excess: float) -> int:
        """Index in ``movable[h]`` of the smallest partition whose load covers ``excess``."""
        return bisect_left(self.movable[h], excess - self.eps, key=lambda e: e[0])

    def _finish(self, h: int, excess: float) -> bool:
        entries = self.movable[h]
        i = self._covering(h, excess)
        if i < len(entries):
            to = self._best_fit(entries[i][0], (h,))
            if to is not None:
                self._move(entries[i], to)
                return True
        return False

    def _chain(self, h: int, excess: float) -> bool:
        best: tuple[float, int, int, Entry, Entry] | None = None
        entries = self.movable[h]
        start = self._covering(h, excess)
        top = heapq.nlargest(3, range(self.workers), key=lambda w: (self._room(w), -w))
        for first in entries[start:start + _CHAIN_CANDIDATES]:
            home_room = self._room(h) + first[0]
            for w in range(self.workers):
                if w == h:
                    continue
                overflow = first[0] - self._room(w)
                others = next((self._room(v) for v in top if v not in (h, w)), -math.inf)
                room = max(others, home_room)
                shed = self.movable[w]
                j = bisect_left(shed, overflow - self.eps, key=lambda e: e[0])
                if j < len(shed) and shed[j][0] <= room + self.eps:
                    option = (shed[j][0], shed[j][1], w, first, shed[j])
                    if best is None or option[:3] < best[:3]:
                        best = option
            if best is not None:
                break
        if best is None:
            return False
        _, _, w, first, second = best
        self._move(first, w)
        to = self._best_fit(second[0], (w,))
        assert to is not None  # guaranteed by the room computed above
        self._move(second, to)
        return True

    def _partial(self, h: int) -> bool:
        entries = self.movable[h]
        j = bisect_right(entries, self._max_room((h,)) + self.eps, key=lambda e: e[0]) - 1
        if j < 0:
            return False
        to = self._best_fit(entries[j][0], (h,))
        if to is None:
            return False
        self._move(entries[j], to)
        return True

    def _overflow(self, h: int) -> bool:
        if not self.movable[h]:
            return False
        to = max((w for w in range(self.workers) if w != h), key=lambda w: (self._room(w), -w))
        self._move(self.movable[h][0], to)
        return True


def _lpt(loads: list[float], workers: int, rank: list[int]) -> list[int]:
    """Largest partition first onto the least-loaded worker (ties: lowest worker id)."""
    heap = [(0.0, w) for w in range(workers)]
    out = [0] * len(loads)
    for p in sorted(range(len(loads)), key=lambda p: (-loads[p], rank[p])):
        load, w = heapq.heappop(heap)
        out[p] = w
        heapq.heappush(heap, (load + loads[p], w))
    return out


def _relabel(bins: list[int], assignment: list[int], workers: int) -> list[int]:
    """Rename LPT's bins after workers so that as many partitions as possible stay put."""
    overlap = [[0] * workers for _ in range(workers)]
    for b, w in zip(bins, assignment, strict=True):
        overlap[b][w] += 1
    pairs = sorted(((b, w) for b in range(workers) for w in range(workers)),
                   key=lambda bw: (-overlap[bw[0]][bw[1]], bw))
    name: dict[int, int] = {}
    taken: set[int] = set()
    for b, w in pairs:
        if b not in name and w not in taken:
            name[b] = w
            taken.add(w)
    return [name[b] for b in bins]


def prune(loads: Sequence[float], old: Sequence[int], new: Sequence[int], workers: int,
          costs: Sequence[float], eps: float = 0.0) -> list[int]:
    """``new`` with moved partitions sent home while that keeps its maximum load.

    Expensive moves are undone first. At the end, undoing any single remaining move would
    raise the maximum load above ``max(new loads) + eps``.
    """
    out = list(new)
    load = worker_loads(loads, out, workers)
    limit = max(load) + eps
    moved = sorted((p for p in range(len(out)) if out[p] != old[p]),
                   key=lambda p: (-costs[p], -loads[p], p))
    changed = True
    while changed:
        changed = False
        for p in moved:
            if out[p] != old[p] and load[old[p]] + loads[p] <= limit:
                load[out[p]] -= loads[p]
                load[old[p]] += loads[p]
                out[p] = old[p]
                changed = True
    return out


class GreedyPolicy:
    """Minimise the maximum worker load, then the number of moves (see the module doc)."""

    name = "greedy"

    def __init__(self, tolerance: float = 0.01, precision: float = 1e-3):
        if not 0 <= tolerance < math.inf or not 0 < precision < math.inf:
            raise InvalidPolicyOption(f"need tolerance >= 0 and precision > 0, got {tolerance}, "
                                      f"{precision}")
        self.tolerance = tolerance
        self.precision = precision

    def propose(self, partition_loads: Sequence[float], assignment: Sequence[int],
                workers: int, costs: Sequence[float] | None = None) -> list[int]:
        """A new assignment, or ``assignment`` itself (as a list) when nothing is better."""
        loads = [float(x) for x in partition_loads]
        old = list(assignment)
        cost = [0.0] * len(loads) if costs is None else [float(c) for c in costs]
        if not len(loads) == len(old) == len(cost):
            raise ShapeError(f"{len(loads)} loads, {len(old)} owners, {len(cost)} costs")
        total = math.fsum(loads)
        if workers < 2 or total <= 0:
            return old
        mean = total / workers
        eps = _REL_EPS * mean
        current = max(worker_loads(loads, old, workers))
        bound = max(mean, max(loads))
        if current <= bound + eps:
            return old
        order = sorted(range(len(loads)), key=lambda p: (cost[p], p))
        rank = [0] * len(loads)
        for r, p in enumerate(order):
            rank[p] = r

        candidates: list[tuple[int, float, float, list[int], list[int]]] = []

        def consider(new: list[int]) -> float:
            """Prune and keep a candidate that lowers the maximum; return its maximum."""
            new = prune(loads, old, new, workers, cost, eps)
            peak = max(worker_loads(loads, new, workers))
            if peak < current - eps:
                moved = sorted(rank[p] for p in range(len(new)) if new[p] != old[p])
                candidates.append((len(moved), math.fsum(cost[order[r]] for r in moved), peak,
                                   moved, new))
            return peak

        def repair(target: float) -> float | None:
            new = _Repair(loads, old, workers, target, rank, eps).run()
            return None if new is None else consider(new)

        lpt_peak = consider(_relabel(_lpt(loads, workers, rank), old, workers))
        if repair(bound) is None:
            lo, hi = bound, current
            reached = repair(lpt_peak)
            if reached is not None:
                hi = reached
            while hi - lo > self.precision * mean:
                mid = (lo + hi) / 2
                reached = repair(mid)
                if reached is None:
                    lo = mid
                else:
                    hi = reached
        if not candidates:
            return old
        best = min(c[2] for c in candidates)
        if self.tolerance > 0:
            repair(best + self.tolerance * mean)
        near = [c for c in candidates if c[2] <= best + self.tolerance * mean + eps]
        return min(near)[4]
