"""Pure computations of `geops bench live --scenario moving`: which pool of publications each
phase sends, the phases' time windows, rebalances per phase, the per-partition loads of a
phase, the ideal run's owners, and the run's capacity against the ideal.

Nothing here touches Kafka, processes or the clock (tests/bench/test_live_moving.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

import numpy as np

from distributor.mldc import owners_mldc
from distributor.params import DEFAULTS
from distributor.policies import Policy, propose_owners
from schemas.assignment import Owners, initial_assignment, owners_of

# The targets set for it: every shift followed by 1-2 rebalances; capacity within 10 % of ideal.
MAX_REBALANCES_PER_SHIFT = 2
MIN_IDEAL_RATIO = 0.9
UNBALANCED_MLDC = DEFAULTS["threshold"]  # a shift leaving MLDC below it needs no rebalance


def pool_of_phase(k: int) -> int:
    """The pool phase ``k`` sends: 0 (the hot share on the initial hot side, workers
    0..H-1) in even phases, 1 (the moved side, workers W/2..W/2+H-1) in odd ones; ``--shifts
    N`` makes N + 1 phases, so the hot spot moves there and back."""
    return k % 2


def hot_workers_of_phase(k: int, workers: int, hot_workers: int) -> list[int]:
    """The workers (under the initial assignment) whose partitions are hot in phase ``k``."""
    first = workers // 2 if pool_of_phase(k) else 0
    return list(range(first, first + hot_workers))


def split_pools(geoms: np.ndarray, moved_at: int) -> tuple[np.ndarray, np.ndarray]:
    """The two pools of a moving-hotspot workload (``SkewSpec(moving=True)``): publications
    before ``moved_at`` (hot on the initial side) and from it on (hot on the moved side)."""
    if not 0 < moved_at < len(geoms):
        raise ValueError(f"the hot spot must move inside the workload, at {moved_at} of "
                         f"{len(geoms)}")
    return geoms[:moved_at], geoms[moved_at:]


def phase_bounds(t0_ms: float, shifts_ms: Sequence[float], end_ms: float
                 ) -> list[tuple[float, float]]:
    """[start, end) of each phase: from ``t0_ms`` to the first shift, between shifts, and from
    the last shift to ``end_ms`` (the end of the stream, or later to count its drain)."""
    edges = [float(t0_ms), *(float(s) for s in shifts_ms), float(end_ms)]
    if any(b < a for a, b in pairwise(edges)):
        raise ValueError(f"phase edges must not decrease: {edges}")
    return list(pairwise(edges))


def count_per_phase(times_ms: Iterable[float], bounds: Sequence[tuple[float, float]]
                    ) -> list[int]:
    """How many of ``times_ms`` (e.g. the rebalance commands) fall in each [start, end)."""
    times = list(times_ms)
    return [sum(1 for t in times if a <= t < b) for a, b in bounds]


def follows_every_shift(per_phase: Sequence[int],
                        mldc_at_start: Sequence[float | None] | None = None,
                        at_most: int = MAX_REBALANCES_PER_SHIFT,
                        unbalanced: float = UNBALANCED_MLDC) -> bool:
    """Every shift (phases 1..N) was followed by at least one and at most ``at_most``
    rebalances (phase 0 is the stream's start, not a shift). A shift after which the stream
    ran at an MLDC below ``unbalanced`` (Table 1's threshold: earlier moves can leave the
    assignment balanced for the new hot side too) needs none: 0 to ``at_most`` there."""
    if len(per_phase) < 2:
        return False
    mldc = list(mldc_at_start or [None] * len(per_phase))
    return all((0 if m is not None and m < unbalanced else 1) <= n <= at_most
               for n, m in zip(per_phase[1:], mldc[1:], strict=True))


def partition_loads(loads: Iterable[tuple[int, int, int]], start_ms: float, end_ms: float,
                    partitions: int) -> np.ndarray:
    """Processing ns per partition of the PartitionLoad records ``(time ms, partition, ns)``
    in [start, end), summed over batches and replicas."""
    out = np.zeros(partitions, np.float64)
    for t, p, ns in loads:
        if start_ms <= t < end_ms and 0 <= p < partitions:
            out[p] += ns
    return out


def owners_in_force(commands: Iterable[Mapping], t_ms: float, partitions: int, workers: int
                    ) -> list[Owners]:
    """The owners of the newest RebalanceCommand issued before ``t_ms`` (the initial
    assignment when there is none)."""
    issued = [c for c in commands if c["time"] < t_ms]
    if not issued:
        return [(w,) for w in initial_assignment(partitions, workers)]
    newest = max(issued, key=lambda c: c["time"])
    return owners_of(newest["assignment"], newest.get("replicas") or ())


def shift_mldc(loads: Iterable[tuple[int, int, int]], commands: Sequence[Mapping],
               start_ms: float, end_ms: float, partitions: int, workers: int) -> float | None:
    """MLDC (LB) of the processing times measured in [start, end) under the owners in force at
    ``start``: how unbalanced a shift left the assignment (near 0: it needs no rebalance)."""
    measured = partition_loads(loads, start_ms, end_ms, partitions)
    return owners_mldc(measured, owners_in_force(commands, start_ms, partitions, workers),
                       workers)


def ideal_owners(policy: Policy, loads: Sequence[float], workers: int
                 ) -> tuple[list[Owners], float | None]:
    """The owners ``policy`` proposes for ``loads`` starting from the initial assignment, and
    the MLDC (LB) they leave: the balanced assignment the ideal run commands for a phase."""
    start = [(w,) for w in initial_assignment(len(loads), workers)]
    owners = propose_owners(policy, loads, start, workers)
    return owners, owners_mldc(loads, owners, workers)


def ideal_ratio(actual: Sequence[Mapping], ideal: Sequence[Mapping]) -> dict:
    """Capacity (publications per busy second) of the run against the ideal run, per phase and
    over all phases (records over busy time of all of them), from
    ``bench.harness.batches.window_throughput`` rows; None where a side processed nothing."""
    def per_busy(rows: Sequence[Mapping]) -> float | None:
        busy = sum(r["busy_s"] for r in rows)
        return sum(r["records"] for r in rows) / busy if busy > 0 else None

    phases = [_ratio(a.get("per_busy_s"), b.get("per_busy_s"))
              for a, b in zip(actual, ideal, strict=True)]
    run, best = per_busy(actual), per_busy(ideal)
    return {"phases": phases, "run_per_busy_s": run, "ideal_per_busy_s": best,
            "overall": _ratio(run, best)}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None
