"""Trace-driven simulation of the six modes at the paper's scale (16 workers, 3 hot).

The physical runs measure what each static partition costs on this machine (2 workers); the
simulation replays those costs over a paper-scale stream through the real distributor engine
and policy, and times every micro-batch by its slowest worker. This module is the simulator;
``simulate_costs`` builds its cost model from the physical runs, ``simulate_sweep`` runs Fig. 9's
sweep; the study ``bench.studies.simulate_adaptive`` compares the adaptive distributor.

Assumptions (printed verbatim in the report):

- **Static partitions are the physical runs' own.** Repeat r of the simulation generates its
  workload with the physical runs' seed (1000 + r) and subscription count, so the subscriptions
  and the kdbtree partitioner (built from the subscriptions alone) are identical; only the
  publications differ: ``SkewSpec(workers=16, hot_workers=3, partitions=P, target=s)`` steers
  them so that a share s of the stream items falls in the partitions of workers 0-2 under the
  initial assignment (partition p on worker p*16//P). This is checked: routing the cost run's
  own workload again must give exactly the per-partition item counts of its ``loads.csv``
  (``partition_items_match`` in ``simulation_costs.csv``).
- **Cost of a stream item** = nanoseconds per item of its partition: sum of ``processing_ns``
  over sum of ``items`` of that partition in the pipeline's Static STAL run at skew 0.5 of the
  same repeat, all batches (join + match + filter; STAL excludes the one-off index build). A
  partition without items there takes the run's overall ns per item. Points and polygons are
  not told apart inside a partition, and the cost does not depend on the batch size.
- **Index build** of a partition = mean ``build_ns`` over every (batch, partition) row with an
  index build in the plan runs of the same pipeline, repeat and size (any mode, any skew: it is
  the same ``load_partition`` call in STAL and STRL); the run-wide mean for a partition never
  built (no build measured at all: STRL is not simulated and STAL builds cost 0). STRL pays
  it for every partition with items in every batch; STAL pays it once per residency: when a
  partition first gets items on a worker (at the start and after it moved).
- **Fixed per-batch overhead** = median of ``duration_ms - join_stage_ms`` over the batches of
  the pipeline's plan runs with that join (STAL or STRL): everything outside the busiest join
  task (planning, reading and routing the stream, collecting and writing the matches). It is
  added to every batch unchanged, as measured here, not rescaled to a cluster. Time inside a
  join task that belongs to no partition (receiving the stream items and, in STRL, the shipped
  static partitions before the first partition starts) is not modelled;
  ``simulation_check.csv`` shows how much of the measured batch time the model leaves out.
- **Moving static data (STAL)** blocks the first batch of a new assignment for the median
  ``duration_ms`` of the measured moves of that pipeline and size (else of any pipeline of that
  size, else 0, noted in ``move_source``): the app re-partitions its whole cached static RDD, so
  the time follows the static data size rather than the number of partitions moved. In STRL a
  new assignment only re-routes the per-batch shipping, at no extra cost.
- **Batches** hold B publications, B = the largest batch of the pipeline's plan runs (its
  ``max_records_per_trigger``) times W / W_physical, so that a worker of the simulated cluster
  has as much work per batch as a worker of the physical runs; in publication order; every
  publication is queued at the start, as in the paper's method. The workers are identical, each
  runs one task at a time at the speed measured here, and a batch takes overhead + move + the
  largest sum of its partitions' costs (and builds) on one worker.
- **Length of the stream**: ``publications`` generated publications (default 100,000, the
  paper's count), replayed whole ``cycles`` times, where ``cycles`` is the smallest number that
  makes the Static STAL run last at least ``min_duration_s`` (120 s) of simulated time, so the
  distributor sees several periods. All modes of one point replay the same stream.
- **Distributor**: the real ``distributor.Engine`` with the ``greedy`` policy and the paper's
  Table 1 (threshold 0.5, M 1000, N 3, miMLDC 0.3), period D = 10 s of simulated time (the clock
  advances by batch makespans). Each batch reports a BatchSummary and one PartitionLoad per
  partition when it ends, as the app does: items (DB) and processing ns (LB; in STRL including
  the rebuild, in STAL excluding it) with no measurement noise, so LB sees the true cost. A
  period closes before the metrics of a batch still running at its end; a command applies from
  the next batch that starts. Static modes run the engine in ``observe`` mode (MLDC only).
  ``Adaptive STAL`` (not in the plan; ``compare_adaptive``, docs/results/adaptive) runs it in
  mode ``adaptive``, asked after every batch, with each batch's duration and join time in its
  BatchSummary and a MoveReport (the moved partitions' serialised bytes, the modelled move
  time) after every move.
- **Throughput** = publications / sum of batch makespans.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from bench.paper.plan import ADAPTIVE, MODES, STATIC_STAL
from distributor import Engine, Params, make_policy
from geops.strategies import build_strategy
from geops.workload import Workload
from schemas.assignment import initial_assignment, owners_of

Log = Callable[[str], None]

WORKERS = 16
HOT_WORKERS = 3
SKEWS = (0.3, 0.4, 0.5, 0.6, 0.7)
PUBLICATIONS = 100_000
MIN_DURATION_S = 120.0
PERIOD_S = 10.0
COST_MODE = STATIC_STAL
COST_SKEW = 0.5
PHYSICAL_HOT_WORKERS = 1  # the plan's physical runs: one hot worker of two
PARTITIONER = "kdbtree"
# The plan's modes and those only simulated so far: the adaptive distributor (LB, every batch).
SIM_MODES: dict[str, tuple[str, str]] = {**MODES, ADAPTIVE: ("STAL", "adaptive")}


@dataclass(frozen=True)
class CostModel:
    """What one pipeline's partitions cost, from the physical runs of one repeat."""

    pipeline: str
    repeat: int
    cost_run: str
    subscriptions: int
    partitions: int
    batch_records: int
    ns_per_item: np.ndarray           # (P,) join + match + filter per stream item
    build_ns: np.ndarray | None       # (P,) one index build; None when none was measured
    overhead_ms: dict[str, float]     # join -> fixed per-batch overhead
    move_ms: float                    # one STAL redistribution
    move_source: str
    physical_items: np.ndarray        # (P,) items of the cost run, to check the partitions
    physical_publications: int
    physical_workers: int

    def modes(self) -> list[str]:
        """The modes this model can simulate (a join needs its overhead; STRL its builds)."""
        return [m for m, (join, _) in MODES.items() if join in self.overhead_ms
                and (join == "STAL" or self.build_ns is not None)]


@dataclass(frozen=True)
class Trace:
    """A stream cut into batches: items per batch and partition, replayed ``cycles`` times."""

    items: np.ndarray          # (K, P)
    records: np.ndarray        # (K,) publications per batch
    static_bytes: np.ndarray   # (P,) serialised size of each static partition
    cycles: int = 1

    @property
    def publications(self) -> int:
        return int(self.records.sum()) * self.cycles


@dataclass
class ModeRun:
    """The outcome of simulating one mode over a trace."""

    mode: str
    publications: int
    makespans_ms: list[float] = field(default_factory=list)
    overhead_ms: float = 0.0
    move_ms: float = 0.0
    moved_partitions: int = 0          # owners added: moved partitions and new replicas
    moved_bytes: int = 0               # static bytes those ship
    commands: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)

    @property
    def time_s(self) -> float:
        return math.fsum(self.makespans_ms) / 1000

    @property
    def throughput(self) -> float:
        return self.publications / self.time_s


def simulate_mode(trace: Trace, model: CostModel, mode: str, *, workers: int = WORKERS,
                  params: Params | None = None, period_s: float = PERIOD_S,
                  policy: str = "greedy") -> ModeRun:
    """Play ``trace`` in ``mode``: batch makespans from ``model``, rebalances from the engine.

    ``Adaptive STAL`` runs the engine in mode adaptive: it is asked after every batch (not
    every period) and learns the move cost from a MoveReport after each move, as in the app.
    """
    join, balancing = SIM_MODES[mode]
    if join == "STRL" and model.build_ns is None:
        raise ValueError(f"{mode}: no index build time measured for {model.pipeline}")
    overhead = model.overhead_ms[join]
    dynamic = balancing != "static"
    adaptive = balancing == "adaptive"
    params = replace(params or Params(), metric=balancing if dynamic and not adaptive else "LB",
                     mode="adaptive" if adaptive else "dynamic" if dynamic else "observe")
    engine = Engine(params, make_policy(policy), app_id="sim")
    batches, partitions = trace.items.shape
    build = model.build_ns if model.build_ns is not None else np.zeros(partitions)
    assignment = np.array(initial_assignment(partitions, workers))
    # owners[p, w]: worker w owns partition p (several owners: a replicated partition, its
    # items and their cost split evenly among them); resident[p, w]: its index is built there
    owners = np.zeros((partitions, workers), bool)
    owners[np.arange(partitions), assignment] = True
    epoch = 0
    resident = np.zeros((partitions, workers), bool)
    period_ms = period_s * 1000
    next_end = period_ms
    now = 0.0
    run = ModeRun(mode, trace.publications)
    for n in range(batches * trace.cycles):
        items = trace.items[n % batches]
        move = 0.0
        if run.commands and run.commands[-1]["epoch"] > epoch:
            command = run.commands[-1]
            new = np.zeros((partitions, workers), bool)
            for p, own in enumerate(owners_of(command["assignment"], command["replicas"])):
                new[p, list(own)] = True
            added = new & ~owners            # each ships the partition's static data once
            moved = added.any(axis=1)
            resident[owners & ~new] = False  # a worker that lost a partition drops its index
            if join == "STAL" and moved.any():
                move = model.move_ms
                resident[added] = False
            run.moved_partitions += int(added.sum())
            shipped = int((added.sum(axis=1) * trace.static_bytes).sum())
            run.moved_bytes += shipped
            owners, assignment, epoch = new, np.array(command["assignment"]), command["epoch"]
            engine.observe_move({"app_id": "sim", "batch_id": n, "epoch": epoch,
                                 "partitions_moved": np.flatnonzero(moved).tolist(),
                                 "bytes": shipped if join == "STAL" else 0,
                                 "duration_ms": move, "time": 0})
        busy = items > 0
        cost = items * model.ns_per_item
        k = owners.sum(axis=1)
        builds = np.zeros((partitions, workers))   # every owner builds its own index
        if join == "STRL":
            builds[busy] = np.where(owners[busy], build[busy, None], 0.0)
        else:
            fresh = owners & busy[:, None] & ~resident
            builds[fresh] = np.broadcast_to(build[:, None], fresh.shape)[fresh]
            resident |= fresh
        per_worker = (owners * (cost / k)[:, None] + builds).sum(axis=0)
        makespan = overhead + move + float(per_worker.max()) / 1e6
        run.makespans_ms.append(makespan)
        run.overhead_ms += overhead
        run.move_ms += move
        now += makespan
        while not adaptive and next_end < now:   # periods that closed while it was running
            result = engine.end_period(round(next_end))
            run.statuses.append(result.status)
            if result.command is not None:
                run.commands.append(result.command)
            next_end += period_ms
        reported = (owners * (cost / k)[:, None] + builds if join == "STRL"
                    else owners * (cost / k)[:, None])
        shipped = np.where(busy, trace.static_bytes, 0) if join == "STRL" else np.zeros(
            partitions, np.int64)
        _report(engine, n, epoch, owners, items, reported, shipped, round(now), workers,
                {"join": join, "duration_ms": makespan, "join_stage_ms": makespan - overhead
                 - move})
        if engine.decision_due:   # mode adaptive: judged at every batch boundary
            result = engine.end_period(round(now))
            run.statuses.append(result.status)
            if result.command is not None:
                run.commands.append(result.command)
    return run


def _report(engine: Engine, batch: int, epoch: int, owners: np.ndarray, items: np.ndarray,
            ns: np.ndarray, shipped: np.ndarray, now_ms: int, workers: int,
            timing: dict[str, Any] | None = None) -> None:
    """What the app sends at the end of a batch: one PartitionLoad per (partition, owner) and
    a BatchSummary. ``owners`` and ``ns`` are (P, W): a replicated partition's owners each
    report their share of its items (split as evenly as integers allow) and their own time."""
    problems = []
    for p in range(len(items)):
        own = np.flatnonzero(owners[p])
        for i, w in enumerate(own):
            share = int(items[p]) // len(own) + (i < int(items[p]) % len(own))
            problems.append(engine.observe_load({
                "app_id": "sim", "batch_id": batch, "epoch": epoch, "partition": p,
                "worker": int(w), "items": share,
                "processing_ns": round(float(ns[p, w])), "static_bytes": int(shipped[p]),
                "time": now_ms}))
    problems.append(engine.observe_batch({"app_id": "sim", "batch_id": batch, "epoch": epoch,
                                          "workers": workers, "partitions": len(items),
                                          **(timing or {})}))
    bad = [p for p in problems if p and not p.startswith("stale epoch")]
    if bad:
        raise RuntimeError(f"the engine rejected the simulated metrics of batch {batch}: "
                           f"{bad[0]}")


def make_trace(workload: Workload, pipeline: str, partitions: int, batch_records: int) -> Trace:
    """Route ``workload``'s publications with ``pipeline`` and cut them into batches."""
    strategy = build_strategy(pipeline, workload.subscriptions, partitions, PARTITIONER)
    if strategy.num_partitions != partitions:
        raise ValueError(f"{pipeline}: {strategy.num_partitions} partitions, expected "
                         f"{partitions}")
    routed = strategy.router().route(workload.publications.geoms)
    total = len(workload.publications)
    batches = max(1, math.ceil(total / batch_records))
    cell = (routed.pub_index // batch_records) * partitions + routed.partition
    items = np.bincount(cell, minlength=batches * partitions).reshape(batches, partitions)
    edges = np.minimum(np.arange(batches + 1) * batch_records, total)
    sizes = np.array([len(strategy.partition_payload(p)) for p in range(partitions)], np.int64)
    return Trace(items.astype(np.int64), np.diff(edges), sizes)


def moving(trace: Trace, workers: int, hot_workers: int, at: float = 0.5) -> Trace:
    """``trace`` played out (``cycles`` times) with its hot region moving at fraction ``at``:
    from then on the items of the partitions of workers 0..H-1 (under the initial assignment)
    go to those of workers W/2..W/2+H-1 and the reverse. Each partition keeps its own cost per
    item and static size, so the load that moves also changes somewhat."""
    partitions = trace.items.shape[1]
    owner = np.array(initial_assignment(partitions, workers))
    perm = np.arange(partitions)
    half = workers // 2
    for w in range(hot_workers):
        a, b = np.flatnonzero(owner == w), np.flatnonzero(owner == half + w)
        if len(a) != len(b):
            raise ValueError(f"workers {w} and {half + w} own {len(a)} and {len(b)} partitions")
        perm[a], perm[b] = b, a
    items = np.tile(trace.items, (trace.cycles, 1))
    records = np.tile(trace.records, trace.cycles)
    shift = round(len(items) * at)
    moved = items[shift:].copy()
    items[shift:] = 0
    items[shift:, perm] = moved
    return Trace(items, records, trace.static_bytes)


def scenario_trace(workload: Workload, model: CostModel, parts: int, scenario: str, *,
                   workers: int, hot_workers: int, period_s: float,
                   min_duration_s: float) -> Trace:
    """A point's trace for one cost model: its batches at ``workers``, cycled to last at least
    ``min_duration_s`` under Static STAL (twice at least for a ``moving`` scenario, whose hot
    region then moves half-way)."""
    batch = model.batch_records * workers // model.physical_workers
    trace = make_trace(workload, model.pipeline, parts, batch)
    one = simulate_mode(trace, model, COST_MODE, workers=workers, period_s=period_s)
    cycles = max(1, math.ceil(min_duration_s / one.time_s))
    if scenario == "moving":
        return moving(replace(trace, cycles=max(2, cycles)), workers, hot_workers)
    return replace(trace, cycles=cycles)


def ideal_time_s(trace: Trace, model: CostModel, workers: int, policy: str = "greedy") -> float:
    """Simulated time if every batch ran on the policy's best assignment for its own loads,
    moved for free and with every index already built: the balanced ideal."""
    chooser = make_policy(policy)
    start = initial_assignment(trace.items.shape[1], workers)
    total = 0.0
    for n in range(len(trace.items) * trace.cycles):
        cost = (trace.items[n % len(trace.items)] * model.ns_per_item).tolist()
        best = chooser.propose(cost, start, workers)
        total += model.overhead_ms["STAL"] + max(
            np.bincount(best, weights=cost, minlength=workers)) / 1e6
    return total / 1000
