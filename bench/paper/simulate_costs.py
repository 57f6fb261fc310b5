"""The simulation's cost model, taken from the physical runs (``bench.paper.simulate``'s
docstring says how), and its checks against them: the partitions correspond, and what the
model predicts for each physical run against what it measured."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.csv_tables import Row, iter_rows, read_rows
from bench.paper.results import is_plan_run
from bench.paper.simulate import (
    COST_MODE,
    COST_SKEW,
    PARTITIONER,
    PHYSICAL_HOT_WORKERS,
    CostModel,
    Log,
)
from bench.paper.workloads import WorkloadKey, Workloads
from geops.strategies import build_strategy


def _per_partition(sums: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """sums / counts per partition; the overall ratio where a count is 0; None if all are."""
    total = counts.sum()
    if total <= 0:
        return None
    out = np.full(len(sums), sums.sum() / total, np.float64)
    seen = counts > 0
    out[seen] = sums[seen] / counts[seen]
    return out


def models_by_workload(models: list[CostModel]) -> dict[tuple[int, int, int], list[CostModel]]:
    """The models grouped by the workload they run on, (repeat, subscriptions, partitions), in
    that key's order: one generated workload serves every pipeline of a group."""
    groups: dict[tuple[int, int, int], list[CostModel]] = {}
    for m in models:
        groups.setdefault((m.repeat, m.subscriptions, m.partitions), []).append(m)
    return dict(sorted(groups.items()))


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
