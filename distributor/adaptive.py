"""The adaptive decision (``mode = "adaptive"``): rebalance when the predicted saving pays for
the move, judged batch by batch from a cost model kept up to date from the app's metrics.

Pure Python, no I/O; the engine feeds it and asks it at every batch boundary. The model:

- **Per-batch saving.** Every finished batch b of the app is kept as its processing time per
  partition (``PartitionLoad.processing_ns``), where each partition ran, its duration
  (``BatchSummary.duration_ms``) and its join time (``join_stage_ms``: the busiest worker's).
  Balancing shrinks only the join: the rest of a batch (planning, reading, routing, writing) is
  the same under any assignment. So the time batch b would have saved under a candidate
  assignment A' instead of the assignment A in force is ``r * (max_w L_b(A) - max_w L_b(A'))``,
  where L_b(X) is the summed processing time of the partitions on worker w under X and r the
  wall milliseconds of the join per CPU millisecond of its busiest worker (the median of
  ``join_stage_ms / max_w L_b`` over the batches; 1 when the app reports no join time). The
  candidate is the policy's (``greedy``) proposal for the mean partition loads of the batches.
- **Confidence.** The saving per batch is estimated by its mean over the batches of the current
  load pattern (the newest ``WINDOW``) and a one-sided 95 % lower bound (Student t): what the
  decision uses. It needs two batches at least and more when they disagree: M is derived.
- **Worth it at all.** The lower bound must be at least ``min_saving`` of a batch's duration
  (median); below that, a difference is within what repeats of the same run differ by (the
  dead band that also keeps it from chasing its own noise after a move).
- **Move cost.** ``MoveCosts``: milliseconds per byte moved, a least-squares line through the
  app's ``MoveReport`` (bytes, duration_ms) and a prior of three pseudo-moves from Fig. 8 of the
  full matrix (``PRIOR_MOVES``) that weighs as much as one real move. Bytes of a candidate are
  the known sizes of its moved partitions (``static_bytes``, or the moves that carried them);
  while no size is known (STAL reports none before its first move) a move is priced at the
  prior's middle point, the 10,000 subscriptions of the project's benchmarks. Plus the index
  builds the moved partitions need on their new workers (STAL; from ``build_ns``): the largest
  sum on one worker. In STRL nothing moves (every batch ships and builds anyway): cost 0.
- **Horizon.** How many more batches the current pattern (the per-partition shares of the
  processing time) will last. A batch whose shares are further than ``stability_tolerance``
  (total variation distance) *beyond sampling noise* from the mean of the pattern's batches
  starts a new pattern. Sampling noise: the distance two samples of the same stream are
  expected to have, from the items counted in the batch and in the pattern (``sampling_tv``);
  a batch of a few hundred items over 64 partitions differs from its own stream's shares by
  more than the tolerance by chance alone, which kept every pattern one batch old.
  The horizon at age a is the mean remaining life of the patterns seen at age a: the earlier
  ones that reached it (lifetime - a) and the current one, taken to last as long again as it
  has lasted (a). Alone, or older than every earlier one, it gets a; when earlier patterns
  ended right at this age (a stream that alternates), the horizon shrinks towards 0.
- **Decision.** Rebalance when ``horizon * lower bound > safety_margin * move cost``, the lower
  bound is worth it, and the assignment in force has run ``SETTLE`` batches (its first batch
  carries the move and the index builds: N is derived). After a move the same batches, judged
  against the new assignment, show (nearly) nothing to save, so it cannot oscillate.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from distributor.mldc import as_owners, owner_loads, owners_mldc
from distributor.policies import Policy, propose_owners
from schemas.assignment import Owners

WINDOW = 20          # batches of the current pattern the estimates use (the newest)
SETTLE = 2           # batches of a new assignment before it may be judged again
LIFETIMES = 32       # finished pattern lifetimes remembered for the horizon
# Fig. 8 of docs/results/full-matrix: mean (bytes, ms) of the forced moves of all 16 partitions
# at 1,000, 10,000 and 100,000 subscriptions: the prior of the move cost.
PRIOR_MOVES = ((344_692, 178.8), (3_178_492, 240.1), (30_508_265, 1025.6))
PRIOR_WEIGHT = 1.0   # the prior weighs as much as this many real moves
UNKNOWN_SIZE = 1     # the prior move whose size prices a move of unknown size (10,000 subs)
# One-sided 95 % quantiles of Student's t for 1..19 degrees of freedom (WINDOW - 1).
_T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782,
        1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729)


def t95(df: int) -> float:
    """The one-sided 95 % quantile of Student's t with ``df`` >= 1 degrees of freedom."""
    return _T95[min(df, len(_T95)) - 1]


def field_number(value: Any) -> float:
    """A finite non-negative float of a record field, else 0.0 (missing or unusable)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else 0.0


@dataclass(frozen=True)
class Batch:
    """One finished batch of the app, as the model keeps it."""

    batch_id: int
    epoch: int
    ns: tuple[float, ...]      # processing time per partition (0 for none reported)
    owners: tuple[Owners, ...]  # the workers each partition ran on (several: replicated)
    workers: int
    items: int
    duration_ms: float
    join_ms: float             # the busiest worker's join time (wall); 0 when not reported

    @property
    def total(self) -> float:
        return math.fsum(self.ns)

    def peak(self, owners: Sequence[Owners]) -> float:
        """The busiest worker's processing time (ns) under per-partition ``owners`` (a
        replicated partition's time split evenly among its owners)."""
        return max(owner_loads(self.ns, owners, self.workers))

    def wall_per_cpu(self) -> float | None:
        """Wall ms of the join per CPU ms of its busiest worker, when both are known."""
        peak = self.peak(self.owners)
        if self.join_ms <= 0 or peak <= 0:
            return None
        return self.join_ms / (peak / 1e6)


class MoveCosts:
    """Milliseconds a move of static data costs, learnt from MoveReports, and what is known of
    each partition: its size and its index build time."""

    def __init__(self, partitions: int):
        self.observed: list[tuple[float, float]] = []   # (bytes, ms) of real moves
        self.sizes: dict[int, float] = {}     # partition -> bytes
        self.builds: dict[int, float] = {}    # partition -> ms of one index build
        self.partitions = partitions

    def note_partition(self, partition: int, static_bytes: float, build_ns: float) -> None:
        """What a PartitionLoad tells of its partition (sizes from STRL shipping)."""
        if static_bytes > 0:
            self.sizes[partition] = static_bytes
        if build_ns > 0:
            self.builds[partition] = build_ns / 1e6

    def observe(self, partitions: Sequence[int], size: float, ms: float) -> None:
        """A STAL move the app reported: ``size`` bytes of ``partitions`` in ``ms``."""
        if not partitions:
            return
        self.observed.append((size, ms))
        each = size / len(partitions)
        for p in partitions:
            if 0 <= p < self.partitions and p not in self.sizes:
                self.sizes[p] = each

    def line(self) -> tuple[float, float]:
        """(ms, ms per byte) of the least-squares line through the moves and the prior."""
        points = [(b, m, PRIOR_WEIGHT / len(PRIOR_MOVES)) for b, m in PRIOR_MOVES]
        points += [(b, m, 1.0) for b, m in self.observed]
        w = math.fsum(p[2] for p in points)
        mx = math.fsum(p[0] * p[2] for p in points) / w
        my = math.fsum(p[1] * p[2] for p in points) / w
        sxx = math.fsum(p[2] * (p[0] - mx) ** 2 for p in points)
        sxy = math.fsum(p[2] * (p[0] - mx) * (p[1] - my) for p in points)
        slope = max(0.0, sxy / sxx) if sxx > 0 else 0.0
        base = my - slope * mx
        if base < 0:  # through the origin instead
            base = 0.0
            sx2 = math.fsum(p[2] * p[0] ** 2 for p in points)
            slope = max(0.0, math.fsum(p[2] * p[0] * p[1] for p in points) / sx2)
        return base, slope

    def move(self, moved: Sequence[int]) -> tuple[float, str]:
        """Predicted ms to move ``moved`` and how it was priced."""
        if not moved:
            return 0.0, "nothing moves"
        base, slope = self.line()
        learnt = (f"{len(self.observed)} move(s) seen and the Fig. 8 prior" if self.observed
                  else "the Fig. 8 prior, no move seen yet")
        known = [self.sizes[p] for p in moved if p in self.sizes]
        if not self.sizes:
            size = PRIOR_MOVES[UNKNOWN_SIZE][0]
            return base + slope * size, (f"size unknown, priced as {size / 1e6:.1f} MB "
                                         f"by {learnt}")
        mean = math.fsum(self.sizes.values()) / len(self.sizes)
        size = math.fsum(known) + mean * (len(moved) - len(known))
        return base + slope * size, f"{size / 1e6:.2f} MB at {base:.0f} ms + " \
                                    f"{slope * 1e6:.0f} ms/MB ({learnt})"

    def rebuild(self, old: Sequence[Owners], new: Sequence[Owners], workers: int) -> float:
        """Predicted ms of the index builds the moved partitions and new replicas need: the
        largest sum on one worker (unknown builds count as the mean known one, or 0)."""
        mean = statistics.fmean(self.builds.values()) if self.builds else 0.0
        per_worker = [0.0] * workers
        for p, (a, b) in enumerate(zip(as_owners(old), as_owners(new), strict=True)):
            for w in b:
                if w not in a:
                    per_worker[w] += self.builds.get(p, mean)
        return max(per_worker, default=0.0)


def sampling_tv(shares: Sequence[float], items: float, ref_items: float) -> float:
    """The total variation distance expected between a batch of ``items`` stream items and a
    reference of ``ref_items`` drawn from the same per-partition ``shares``: half the sum over
    partitions of E|difference of two binomial proportions| (normal approximation,
    sqrt(2 / pi) x its standard deviation). 0 when either count is unknown."""
    if items <= 0 or ref_items <= 0:
        return 0.0
    spread = math.fsum(math.sqrt(max(s, 0.0) * max(1.0 - s, 0.0)) for s in shares)
    return 0.5 * math.sqrt(2.0 / math.pi) * spread * math.sqrt(1.0 / items + 1.0 / ref_items)


@dataclass
class Patterns:
    """The current load pattern (its newest batches and its age) and the lifetimes of the
    finished ones."""

    tolerance: float
    batches: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    shares: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    age: int = 0
    lifetimes: deque = field(default_factory=lambda: deque(maxlen=LIFETIMES))
    last_distance: float | None = None
    last_noise: float = 0.0

    def add(self, batch: Batch) -> bool:
        """Take a finished batch; True when it starts a new pattern. Batches without load tell
        nothing and are skipped."""
        total = batch.total
        if total <= 0:
            return False
        shares = [v / total for v in batch.ns]
        changed = False
        if self.shares:
            n = len(self.shares)
            ref = [math.fsum(s[p] for s in self.shares) / n for p in range(len(shares))]
            self.last_distance = 0.5 * math.fsum(abs(a - b) for a, b in zip(shares, ref,
                                                                            strict=True))
            self.last_noise = sampling_tv(ref, batch.items,
                                          math.fsum(b.items for b in self.batches))
            if self.last_distance > self.tolerance + self.last_noise:
                self.lifetimes.append(self.age)
                self.batches.clear()
                self.shares.clear()
                self.age = 0
                changed = True
        self.batches.append(batch)
        self.shares.append(shares)
        self.age += 1
        return changed

    def horizon(self) -> tuple[float, str]:
        """Batches the current pattern of age a is expected to last still, and why: the mean
        remaining life of the patterns seen at age a, the earlier ones that reached it (their
        lifetime - a; 0 for those that ended at a) and this one, expected to last as long
        again as it has lasted (a). With no earlier pattern as old, that is a."""
        age = self.age
        reached = [n - age for n in self.lifetimes if n >= age]
        if not reached:
            return float(age), f"{age} batch(es): as long again as it has lasted"
        value = (math.fsum(reached) + age) / (len(reached) + 1)
        return value, (f"{value:.1f} batch(es): the mean remaining life at age {age} of this "
                       f"pattern (as long again) and of {len(reached)} earlier one(s) that "
                       f"reached that age")


@dataclass(frozen=True)
class Assessment:
    """One adaptive judgement: every quantity of the decision and a one-line account."""

    proposal: list[Owners]
    per_worker: list[float]       # mean processing ns per batch of each worker, in force
    mldc: float | None
    mldc_predicted: float | None
    confident: bool               # >= 2 batches in the current pattern
    settled: bool                 # the assignment in force ran SETTLE batches
    worth: bool                   # lower bound >= min_saving of a batch
    pays: bool | None             # horizon * lower bound > margin * cost (None: no candidate)
    reason: str

    @property
    def rebalance(self) -> bool:
        return self.confident and self.settled and self.worth and self.pays is True


class AdaptiveModel:
    """The batches, the move costs and the patterns of one app; ``assess`` judges them."""

    def __init__(self, partitions: int, workers: int, *, min_saving: float,
                 safety_margin: float, stability_tolerance: float):
        self.partitions, self.workers = partitions, workers
        self.min_saving = min_saving
        self.safety_margin = safety_margin
        self.costs = MoveCosts(partitions)
        self.patterns = Patterns(stability_tolerance)
        self.join = "STAL"
        self.epoch_batches = 0        # finished batches of the epoch in force
        self._seen: deque[int] = deque(maxlen=4 * WINDOW)

    def new_epoch(self) -> None:
        self.epoch_batches = 0

    def add(self, batch: Batch, join: str | None = None) -> bool:
        """Take a finished batch of the epoch in force; False when its id was seen before."""
        if batch.batch_id in self._seen:
            return False
        self._seen.append(batch.batch_id)
        if join:
            self.join = join
        self.epoch_batches += 1
        self.patterns.add(batch)
        return True

    def observe_move(self, partitions: Sequence[int], size: float, ms: float) -> None:
        if self.join != "STRL":  # STRL moves nothing: its reports say 0 bytes in ~0 ms
            self.costs.observe(partitions, size, ms)

    def assess(self, owners: Sequence[Owners], policy: Policy) -> Assessment:
        """Judge the batches of the current pattern under the ``owners`` in force."""
        batches = list(self.patterns.batches)
        n = len(batches)
        P, W = self.partitions, self.workers
        loads = [math.fsum(b.ns[p] for b in batches) / n for p in range(P)] if n else [0.0] * P
        current = as_owners(owners)
        per_worker = owner_loads(loads, current, W)
        sizes = [self.costs.sizes.get(p, 0.0) for p in range(P)]
        proposal = propose_owners(policy, loads, current, W, sizes) if n else current
        mldc_now = owners_mldc(loads, current, W)
        mldc_new = owners_mldc(loads, proposal, W)
        confident = n >= 2
        settled = self.epoch_batches >= SETTLE
        ratios = [r for r in (b.wall_per_cpu() for b in batches) if r is not None]
        ratio = statistics.median(ratios) if ratios else 1.0
        savings = [ratio * (b.peak(current) - b.peak(proposal)) / 1e6 for b in batches]
        durations = [b.duration_ms for b in batches if b.duration_ms > 0]
        batch_ms = statistics.median(durations) if durations else None
        # a partition ships its static data to every owner it gains (once per new owner); a
        # dropped replica ships nothing but is still a change
        moved = [p for p in range(P) for w in proposal[p] if w not in current[p]]
        changed = bool(moved) or proposal != current
        if self.join == "STRL":
            move_ms, move_how, rebuild_ms = 0.0, "STRL moves no static data", 0.0
        else:
            move_ms, move_how = self.costs.move(moved)
            rebuild_ms = self.costs.rebuild(current, proposal, W)
        cost = move_ms + rebuild_ms
        horizon, horizon_how = self.patterns.horizon()
        pat = self.patterns
        parts = [f"{n} batch(es) in the current pattern (age {pat.age}"
                 + ("" if pat.last_distance is None else
                    f"; last batch {pat.last_distance:.3f} from it, a new pattern beyond "
                    f"{pat.tolerance:g} + sampling noise {pat.last_noise:.3f}")
                 + f"), {self.epoch_batches} under the assignment in force"]
        if not changed:
            parts.append(f"policy {policy.name} finds nothing better (MLDC "
                         f"{_fmt(mldc_now)})")
            return Assessment(proposal, per_worker, mldc_now, mldc_new, confident, settled,
                              False, None, "; ".join(parts))
        mean = statistics.fmean(savings)
        low = (mean - t95(n - 1) * statistics.stdev(savings) / math.sqrt(n)) if n >= 2 else None
        share = None if low is None or not batch_ms else low / batch_ms
        worth = share is not None and share >= self.min_saving
        gain = None if low is None else max(low, 0.0) * horizon
        pays = None if gain is None else gain > self.safety_margin * cost
        parts.append(
            f"{len(moved)} move(s) by {policy.name}: MLDC {_fmt(mldc_now)} -> "
            f"{_fmt(mldc_new)}; saving {mean:,.0f} ms/batch (95% lower bound "
            f"{_fmt(low, ',.0f')}, {_fmt(None if share is None else 100 * share, '.1f')}% of "
            f"a {_fmt(batch_ms, ',.0f')} ms batch; needs {100 * self.min_saving:g}%) "
            f"{'held' if worth else 'FAILED'}")
        parts.append(
            f"horizon {horizon_how}; gain {_fmt(gain, ',.0f')} ms vs {self.safety_margin:g} x "
            f"cost {cost:,.0f} ms (move {move_ms:,.0f} ms: {move_how}; index builds "
            f"{rebuild_ms:,.0f} ms) {'held' if pays else 'FAILED'}")
        if not confident:
            parts.append("confidence FAILED (one batch of this pattern)")
        if not settled:
            parts.append(f"settled FAILED (the assignment in force ran {self.epoch_batches} of "
                         f"{SETTLE} batches)")
        return Assessment(proposal, per_worker, mldc_now, mldc_new, confident, settled, worth,
                          pays, "; ".join(parts))


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)
