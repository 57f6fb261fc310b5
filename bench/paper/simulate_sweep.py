"""Fig. 9's simulation: every mode the physical runs allow, at the paper's scale, per pipeline,
skew and repeat, written to the ``simulation*.csv`` files of the results directory."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.csv_tables import write_csv
from bench.paper.plan import MODES
from bench.paper.results import mode_order, pipeline_order
from bench.paper.simulate import (
    COST_MODE,
    HOT_WORKERS,
    MIN_DURATION_S,
    PARTITIONER,
    PERIOD_S,
    PUBLICATIONS,
    SKEWS,
    WORKERS,
    CostModel,
    Log,
    Trace,
    make_trace,
    simulate_mode,
)
from bench.paper.simulate_costs import (
    check_partitions,
    cost_models,
    model_check,
    models_by_workload,
)
from bench.paper.workloads import WorkloadKey, Workloads
from distributor import Params
from geops.errors import ParameterError
from geops.workload import Workload
from schemas.assignment import initial_assignment


def _hot_shares(trace: Trace, model: CostModel, workers: int, hot_workers: int
                ) -> tuple[float, float]:
    """Share of items and of item cost on the hot workers under the initial assignment."""
    hot = np.array(initial_assignment(trace.items.shape[1], workers)) < hot_workers
    items = trace.items.sum(axis=0)
    cost = items * model.ns_per_item
    return float(items[hot].sum() / max(items.sum(), 1)), float(cost[hot].sum()
                                                                 / max(cost.sum(), 1e-9))


def point_workload(workloads: Workloads, key: WorkloadKey,
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
    groups = models_by_workload(models)
    for parts in sorted({m.partitions for m in models if m.partitions <= workers}):
        log(f"simulation: NOTE P = {parts} partitions for W = {workers} workers: no worker "
            f"owns two partitions, so moving whole partitions cannot lower the busiest load")
    for skew in skews:
        for (repeat, subs, parts), group in groups.items():
            workload = point_workload(workloads, WorkloadKey(
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
