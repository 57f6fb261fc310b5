"""Trace-driven simulation of the six modes at the paper's scale (16 workers, 3 hot).

The physical runs measure what each static partition costs on this machine (2 workers); the
simulation replays those costs over a paper-scale stream through the real distributor engine
and policy, and times every micro-batch by its slowest worker.

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
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.paper.plan import ADAPTIVE, DYNAMIC_LB_STAL, MODES, STATIC_STAL
from bench.paper.rows import (
    Row,
    gzip_beside,
    is_plan_run,
    iter_rows,
    mode_order,
    pipeline_order,
    read_rows,
    write_csv,
)
from bench.paper.workloads import WorkloadKey, Workloads
from distributor import Engine, Params, make_policy
from geops.strategies import build_strategy
from geops.workload import ParameterError, Workload
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


# -- the cost model, from the physical runs -------------------------------------------------


def _per_partition(sums: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """sums / counts per partition; the overall ratio where a count is 0; None if all are."""
    total = counts.sum()
    if total <= 0:
        return None
    out = np.full(len(sums), sums.sum() / total, np.float64)
    seen = counts > 0
    out[seen] = sums[seen] / counts[seen]
    return out


def cost_models(results_dir: Path, log: Log = print) -> list[CostModel]:
    """One model per (pipeline, repeat) that has a Static STAL run at skew 0.5."""
    runs = [r for r in read_rows(results_dir / "runs.csv") if is_plan_run(r)]
    cost_runs = [r for r in runs if r["mode"] == COST_MODE
                 and math.isclose(float(r["skew"]), COST_SKEW)]
    if not cost_runs:
        return []

    def size(r: Row) -> tuple[str, int, int]:
        return r["pipeline"], int(r["subscriptions"]), int(r["partitions"])

    siblings = {r["run_id"]: r for r in runs
                if any(size(r) == size(c) for c in cost_runs)}
    items = {c["run_id"]: np.zeros(int(c["partitions"])) for c in cost_runs}
    ns = {c["run_id"]: np.zeros(int(c["partitions"])) for c in cost_runs}
    key_of = {c["run_id"]: (size(c), c["repeat"]) for c in cost_runs}
    builds: dict[tuple, list[np.ndarray]] = {
        k: [np.zeros(int(c["partitions"])), np.zeros(int(c["partitions"]))]
        for c in cost_runs for k in [key_of[c["run_id"]]]}
    for row in iter_rows(results_dir / "loads.csv", set(siblings)):
        run = siblings[row["run_id"]]
        p = int(row["partition"])
        if row["run_id"] in items:
            items[row["run_id"]][p] += int(row["items"])
            ns[row["run_id"]][p] += int(row["processing_ns"])
        key = (size(run), run["repeat"])
        if key in builds and int(row["index_builds"] or 0) > 0 and row.get("build_ns"):
            builds[key][0][p] += float(row["build_ns"])
            builds[key][1][p] += int(row["index_builds"])
    overhead: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    largest: dict[tuple, int] = defaultdict(int)
    for b in read_rows(results_dir / "batches.csv"):
        run = siblings.get(b["run_id"])
        if run is not None:
            overhead[size(run)][run["join"]].append(float(b["duration_ms"])
                                                    - float(b["join_stage_ms"]))
            largest[size(run)] = max(largest[size(run)], int(b["records"]))
    moves = [m for m in read_rows(results_dir / "moves.csv")
             if m["mode"].endswith("STAL") and int(m["partitions_moved"]) > 0]
    models = []
    for c in cost_runs:
        rid = c["run_id"]
        nspi = _per_partition(ns[rid], items[rid])
        if nspi is None or "STAL" not in overhead[size(c)]:
            log(f"simulation: {rid} has no items in loads.csv or no batches in batches.csv; "
                f"{c['pipeline']} r{c['repeat']} skipped")
            continue
        pipeline, subs, parts = size(c)
        same = [float(m["duration_ms"]) for m in moves
                if m["pipeline"] == pipeline and int(m["subscriptions"]) == subs]
        anyp = [float(m["duration_ms"]) for m in moves if int(m["subscriptions"]) == subs]
        move_ms, source = ((statistics.median(same), f"{pipeline} moves ({len(same)})") if same
                           else (statistics.median(anyp), f"moves of all pipelines ({len(anyp)})")
                           if anyp else (0.0, "none measured: moves cost 0"))
        models.append(CostModel(
            pipeline=pipeline, repeat=int(c["repeat"]), cost_run=rid, subscriptions=subs,
            partitions=parts, batch_records=largest[size(c)], ns_per_item=nspi,
            build_ns=_per_partition(*builds[key_of[rid]]),
            overhead_ms={join: statistics.median(v) for join, v in overhead[size(c)].items()},
            move_ms=move_ms, move_source=source, physical_items=items[rid],
            physical_publications=int(c["publications"]), physical_workers=int(c["workers"])))
    return models


# -- streams -----------------------------------------------------------------------------------


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


def check_partitions(model: CostModel, workloads: Workloads) -> float:
    """Largest relative difference per partition between the cost run's measured items and
    those of its workload routed again here (0.0: the partitions correspond exactly)."""
    workload = workloads.get(WorkloadKey(
        model.repeat, model.subscriptions, model.physical_publications, model.physical_workers,
        PHYSICAL_HOT_WORKERS, model.partitions, PARTITIONER, COST_SKEW))
    strategy = build_strategy(model.pipeline, workload.subscriptions, model.partitions,
                              PARTITIONER)
    mine = np.bincount(strategy.router().route(workload.publications.geoms).partition,
                       minlength=model.partitions)
    return float(np.max(np.abs(mine - model.physical_items)
                        / np.maximum(model.physical_items, 1)))


# -- the sweep ---------------------------------------------------------------------------------


def model_check(results_dir: Path, models: list[CostModel]) -> list[dict[str, Any]]:
    """Per physical plan run of a modelled (pipeline, repeat): the sum of its batch durations
    against what the cost model predicts from the run's own per-batch items and workers."""
    by_key = {(m.pipeline, m.repeat, m.subscriptions, m.partitions): m for m in models}
    runs = {}
    for r in read_rows(results_dir / "runs.csv"):
        key = (r["pipeline"], int(r["repeat"]), int(r["subscriptions"]), int(r["partitions"]))
        if is_plan_run(r) and key in by_key:
            runs[r["run_id"]] = (r, by_key[key])
    work: dict[tuple[str, int], dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for row in iter_rows(results_dir / "loads.csv", set(runs)):
        model = runs[row["run_id"]][1]
        p = int(row["partition"])
        ns = int(row["items"]) * model.ns_per_item[p]
        if int(row["index_builds"] or 0) > 0 and model.build_ns is not None:
            ns += model.build_ns[p]
        work[(row["run_id"], int(row["batch_id"]))][int(row["worker"])] += ns
    moved = {(m["run_id"], int(m["batch_id"])) for m in read_rows(results_dir / "moves.csv")}
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for b in read_rows(results_dir / "batches.csv"):
        if b["run_id"] not in runs:
            continue
        run, model = runs[b["run_id"]]
        key = (b["run_id"], int(b["batch_id"]))
        predicted = model.overhead_ms.get(run["join"], 0.0) + max(
            work[key].values(), default=0.0) / 1e6
        if run["join"] == "STAL" and key in moved:
            predicted += model.move_ms
        t = totals[b["run_id"]]
        t[0] += float(b["duration_ms"])
        t[1] += predicted
        t[2] += 1
    return [{"run_id": rid, "pipeline": runs[rid][0]["pipeline"], "mode": runs[rid][0]["mode"],
             "skew": float(runs[rid][0]["skew"]), "repeat": int(runs[rid][0]["repeat"]),
             "batches": t[2], "measured_s": t[0] / 1000, "predicted_s": t[1] / 1000,
             "predicted_over_measured": t[1] / t[0] if t[0] else math.nan}
            for rid, t in totals.items()]


def _hot_shares(trace: Trace, model: CostModel, workers: int, hot_workers: int
                ) -> tuple[float, float]:
    """Share of items and of item cost on the hot workers under the initial assignment."""
    hot = np.array(initial_assignment(trace.items.shape[1], workers)) < hot_workers
    items = trace.items.sum(axis=0)
    cost = items * model.ns_per_item
    return float(items[hot].sum() / max(items.sum(), 1)), float(cost[hot].sum()
                                                                 / max(cost.sum(), 1e-9))


def _point_workload(workloads: Workloads, key: WorkloadKey,
                    log: Callable[[str], None]) -> Workload | None:
    """The workload of a simulated point, or None (logged) when its skew cannot be reached."""
    try:
        return workloads.get(key)
    except ParameterError as exc:
        log(f"simulation: skew {key.skew} not reachable with {key.subscriptions} subscriptions, "
            f"P={key.partitions}, W={key.workers}: {exc}; skipped")
        return None



def run_simulation(results_dir: Path, *, workers: int = WORKERS, hot_workers: int = HOT_WORKERS,
                   skews: tuple[float, ...] = SKEWS, publications: int = PUBLICATIONS,
                   min_duration_s: float = MIN_DURATION_S, period_s: float = PERIOD_S,
                   params: Params | None = None, check: bool = True,
                   log: Log = print) -> Path | None:
    """Simulate every mode the data allows; writes ``simulation.csv`` (one row per pipeline,
    mode, skew and repeat), ``simulation_mldc.csv`` (every period), ``simulation_costs.csv``
    (the cost model) and ``simulation_check.csv`` (the model against the physical runs);
    ``figures.fig9_simulation`` draws it. Returns the path of ``simulation.csv``, or None when
    no physical Static STAL run at skew 0.5 exists to take costs from.

    ``check`` also regenerates each cost run's workload to verify the partitions correspond.
    """
    results_dir = Path(results_dir)
    models = cost_models(results_dir, log)
    if not models:
        log("simulation: no Static STAL run at skew 0.5 to take partition costs from; skipped")
        return None
    workloads = Workloads()  # the last one: a point's modes share it
    costs = []
    # sorted so that pipelines sharing a physical workload regenerate it once
    for m in sorted(models, key=lambda m: (m.repeat, m.physical_publications, m.pipeline)):
        deviation = check_partitions(m, workloads) if check else math.nan
        if deviation > 0:
            log(f"simulation: WARNING {m.cost_run}: the regenerated workload does not give the "
                f"measured items per partition (max relative difference {deviation:.3f})")
        costs.append({
            "pipeline": m.pipeline, "repeat": m.repeat, "cost_run": m.cost_run,
            "subscriptions": m.subscriptions, "partitions": m.partitions,
            "batch_records": m.batch_records, "ns_per_item_mean": float(m.ns_per_item.mean()),
            "ns_per_item_min": float(m.ns_per_item.min()),
            "ns_per_item_max": float(m.ns_per_item.max()),
            "partitions_without_items": int((m.physical_items == 0).sum()),
            "build_ms_mean": (float(m.build_ns.mean()) / 1e6 if m.build_ns is not None
                              else math.nan),
            "overhead_stal_ms": m.overhead_ms.get("STAL", math.nan),
            "overhead_strl_ms": m.overhead_ms.get("STRL", math.nan),
            "move_ms": m.move_ms, "move_source": m.move_source,
            "partition_items_max_rel_diff": deviation,
            "partition_items_match": "" if not check else deviation == 0})
    workloads.clear()
    order = pipeline_order(c["pipeline"] for c in costs)
    costs.sort(key=lambda c: (order.index(c["pipeline"]), c["repeat"]))
    write_csv(results_dir / "simulation_costs.csv", costs)
    write_csv(results_dir / "simulation_check.csv", model_check(results_dir, models))
    rows: list[dict[str, Any]] = []
    periods: list[dict[str, Any]] = []
    groups: dict[tuple, list[CostModel]] = defaultdict(list)
    for m in models:
        groups[(m.repeat, m.subscriptions, m.partitions)].append(m)
    for parts in sorted({m.partitions for m in models if m.partitions <= workers}):
        log(f"simulation: NOTE P = {parts} partitions for W = {workers} workers: no worker "
            f"owns two partitions, so moving whole partitions cannot lower the busiest load")
    for skew in skews:
        for (repeat, subs, parts), group in sorted(groups.items()):
            workload = _point_workload(workloads, WorkloadKey(
                repeat, subs, publications, workers, hot_workers, parts, PARTITIONER, skew), log)
            if workload is None:
                continue
            for model in group:
                missing = sorted(set(MODES) - set(model.modes()))
                if missing:
                    log(f"simulation: {model.pipeline} r{repeat}: no physical data for "
                        f"{', '.join(missing)}; not simulated")
                batch = model.batch_records * workers // model.physical_workers
                trace = make_trace(workload, model.pipeline, parts, batch)
                one = simulate_mode(trace, model, COST_MODE, workers=workers, params=params,
                                    period_s=period_s)
                trace = replace(trace, cycles=max(1, math.ceil(min_duration_s / one.time_s)))
                items_share, cost_share = _hot_shares(trace, model, workers, hot_workers)
                for mode in mode_order(model.modes()):
                    run = simulate_mode(trace, model, mode, workers=workers, params=params,
                                        period_s=period_s)
                    mldcs = [s["mldc"] for s in run.statuses if s["mldc"] is not None]
                    rows.append({
                        "pipeline": model.pipeline, "mode": mode, "skew": skew,
                        "repeat": repeat, "throughput": run.throughput,
                        "rebalances": len(run.commands),
                        "moved_partitions": run.moved_partitions,
                        "publications": run.publications, "batches": len(run.makespans_ms),
                        "batch_records": batch, "cycles": trace.cycles,
                        "time_s": run.time_s, "overhead_share": run.overhead_ms / 1000
                        / run.time_s, "move_s": run.move_ms / 1000,
                        "hot_share_items": items_share, "hot_share_cost": cost_share,
                        "mldc_first": mldcs[0] if mldcs else math.nan,
                        "mldc_last": mldcs[-1] if mldcs else math.nan,
                        "workers": workers, "hot_workers": hot_workers})
                    periods += [{"pipeline": model.pipeline, "mode": mode, "skew": skew,
                                 "repeat": repeat, "period": s["period"],
                                 "time_s": s["time"] / 1000, "epoch": s["epoch"],
                                 "mldc": "" if s["mldc"] is None else s["mldc"],
                                 "threshold": s["threshold"], "decision": s["decision"]}
                                for s in run.statuses]
                done = rows[-len(model.modes()):]
                log(f"simulation: {model.pipeline} skew {skew} r{repeat}: "
                    + ", ".join(f"{r['mode']} {r['throughput']:,.0f}/s ({r['rebalances']} reb.)"
                                for r in done))
    workloads.clear()
    path = results_dir / "simulation.csv"
    write_csv(path, rows)
    write_csv(results_dir / "simulation_mldc.csv", periods)
    return path


# -- the adaptive distributor against Static STAL and Table 1 (docs/results/adaptive) ----------

ADAPTIVE_MODES = (STATIC_STAL, DYNAMIC_LB_STAL, ADAPTIVE)
ADAPTIVE_SKEWS = (3 / 16, 0.25, 0.3, 0.5, 0.7)   # 3/16: the 3 hot workers' fair share
MOVING_SKEW = 0.5


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


def compare_adaptive(results_dir: Path, out_dir: Path, *, workers: int = WORKERS,
                     hot_workers: int = HOT_WORKERS, skews: tuple[float, ...] = ADAPTIVE_SKEWS,
                     moving_skew: float | None = MOVING_SKEW, publications: int = PUBLICATIONS,
                     min_duration_s: float = MIN_DURATION_S, period_s: float = PERIOD_S,
                     pipelines: tuple[str, ...] | None = None,
                     log: Log = print) -> Path | None:
    """Static STAL, the Table 1 distributor (Dynamic LB STAL) and the adaptive one over the
    cost models of ``results_dir``: a steady stream per skew, and a stream whose hot region
    moves half-way (``moving_skew``; None: none). Writes ``adaptive_simulation.csv`` (one row
    per pipeline, scenario, skew, repeat and mode, with the balanced ideal's time) and
    ``adaptive_decisions.csv.gz`` (every status of the two distributors) to ``out_dir``."""
    models = [m for m in cost_models(Path(results_dir), log)
              if pipelines is None or m.pipeline in pipelines]
    if not models:
        log("simulation: no cost model; nothing compared")
        return None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    workloads = Workloads()
    rows: list[dict[str, Any]] = []
    decisions: list[dict[str, Any]] = []
    points = [("steady", s) for s in skews] + (
        [("moving", moving_skew)] if moving_skew is not None else [])
    groups: dict[tuple, list[CostModel]] = defaultdict(list)
    for m in models:
        groups[(m.repeat, m.subscriptions, m.partitions)].append(m)
    for scenario, skew in points:
        for (repeat, subs, parts), group in sorted(groups.items()):
            workload = _point_workload(workloads, WorkloadKey(
                repeat, subs, publications, workers, hot_workers, parts, PARTITIONER, skew), log)
            if workload is None:
                continue
            for model in group:
                trace = scenario_trace(workload, model, parts, scenario, workers=workers,
                                       hot_workers=hot_workers, period_s=period_s,
                                       min_duration_s=min_duration_s)
                ideal = ideal_time_s(trace, model, workers)
                done = []
                for mode in ADAPTIVE_MODES:
                    run = simulate_mode(trace, model, mode, workers=workers, period_s=period_s)
                    mldcs = [s["mldc"] for s in run.statuses if s["mldc"] is not None]
                    rows.append({
                        "pipeline": model.pipeline, "scenario": scenario, "skew": skew,
                        "repeat": repeat, "mode": mode, "throughput": run.throughput,
                        "ideal_throughput": run.publications / ideal,
                        "rebalances": len(run.commands),
                        "moved_partitions": run.moved_partitions,
                        "publications": run.publications, "batches": len(run.makespans_ms),
                        "time_s": run.time_s, "move_s": run.move_ms / 1000,
                        "ideal_time_s": ideal,
                        "mldc_first": mldcs[0] if mldcs else math.nan,
                        "mldc_last": mldcs[-1] if mldcs else math.nan,
                        "workers": workers, "hot_workers": hot_workers})
                    done.append(rows[-1])
                    if mode != COST_MODE:
                        decisions += [{"pipeline": model.pipeline, "scenario": scenario,
                                       "skew": skew, "repeat": repeat, "mode": mode,
                                       "period": s["period"], "time_s": s["time"] / 1000,
                                       "epoch": s["epoch"], "decision": s["decision"],
                                       "mldc": "" if s["mldc"] is None else s["mldc"],
                                       "reason": s["reason"]} for s in run.statuses]
                log(f"simulation: {model.pipeline} {scenario} skew {skew:.3f} r{repeat}: "
                    + ", ".join(f"{r['mode']} {r['throughput']:,.0f}/s ({r['rebalances']} reb.)"
                                for r in done)
                    + f"; ideal {done[0]['ideal_throughput']:,.0f}/s")
    workloads.clear()
    path = out_dir / "adaptive_simulation.csv"
    write_csv(path, rows)
    decided = out_dir / "adaptive_decisions.csv"   # ~1 MB of reasons: stored gzipped
    write_csv(decided, decisions)
    gzip_beside(decided)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.paper.simulate --from DIR --out DIR``: ``compare_adaptive``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.paper.simulate",
                                     description=compare_adaptive.__doc__)
    parser.add_argument("--from", dest="source", type=Path, required=True,
                        help="results directory with the physical runs' CSVs (cost models)")
    parser.add_argument("--out", type=Path, required=True, help="where the CSVs go")
    parser.add_argument("--pipelines", nargs="*", default=None)
    args = parser.parse_args(argv)
    path = compare_adaptive(args.source, args.out,
                            pipelines=tuple(args.pipelines) if args.pipelines else None)
    return 0 if path else 1


if __name__ == "__main__":
    raise SystemExit(main())
