"""The trace-driven simulation: makespan arithmetic, the real engine's decisions, and the cost
model read back from physical-run CSVs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.harness.csv_tables import read_rows, write_csv
from bench.paper import simulate, simulate_costs, simulate_sweep
from bench.paper.figures import fig9_simulation
from bench.paper.simulate import CostModel, Trace, simulate_mode
from bench.paper.workloads import WorkloadKey, Workloads
from distributor import GreedyPolicy, Params
from geops.strategies import build_strategy

MS = 1e6  # ns per ms


def _model(ns_per_item, build_ns=None, overhead=None, move_ms=0.0) -> CostModel:
    p = len(ns_per_item)
    return CostModel(
        pipeline="sPIS", repeat=0, cost_run="x", subscriptions=10, partitions=p,
        batch_records=10, ns_per_item=np.array(ns_per_item, float),
        build_ns=None if build_ns is None else np.array(build_ns, float),
        overhead_ms=overhead or {"STAL": 100.0, "STRL": 200.0}, move_ms=move_ms,
        move_source="test", physical_items=np.ones(p), physical_publications=10,
        physical_workers=2)


def _trace(items, batches: int, cycles: int = 1) -> Trace:
    return Trace(np.array([items] * batches, np.int64), np.full(batches, 10),
                 np.full(len(items), 1000, np.int64), cycles)


# P = 4 on W = 2: partitions 0, 1 on worker 0 and 2, 3 on worker 1.
HAND = _model([10 * MS, 5 * MS, 1 * MS, 1 * MS], build_ns=[3 * MS] * 4)


def test_stal_makespan_is_overhead_plus_slowest_worker_and_builds_once() -> None:
    run = simulate_mode(_trace([2, 0, 1, 1], 2), HAND, "Static STAL", workers=2)
    # batch 0: worker 0 = 2 * 10 + build of partition 0 (1 has no items) = 23 ms,
    #          worker 1 = 1 + 1 + 2 builds = 8 ms; batch 1: resident, 20 vs 2 ms
    assert run.makespans_ms == pytest.approx([100 + 23, 100 + 20])
    assert run.throughput == pytest.approx(20 / 0.243)
    assert run.overhead_ms == 200 and run.commands == [] and run.moved_partitions == 0


def test_strl_rebuilds_every_partition_with_items_every_batch() -> None:
    run = simulate_mode(_trace([2, 0, 1, 1], 1, cycles=3), HAND, "Static STRL", workers=2)
    assert run.publications == 30
    assert run.makespans_ms == pytest.approx([200 + 23] * 3)


def test_strl_without_measured_builds_is_refused() -> None:
    with pytest.raises(ValueError, match="no index build"):
        simulate_mode(_trace([1, 1], 1), _model([MS, MS]), "Dynamic LB STRL", workers=2)


def test_static_mode_observes_mldc_and_never_commands() -> None:
    model = _model([MS] * 4, overhead={"STAL": 0.0})
    run = simulate_mode(_trace([10, 10, 1, 1], 500), model, "Static STAL", workers=2,
                        period_s=1.0)
    assert run.commands == [] and len(run.statuses) == 9
    assert {s["decision"] for s in run.statuses} == {"observe"}   # every condition held
    assert run.statuses[-1]["mldc"] == pytest.approx(9 / 11)          # 20 vs 2 ms, mean 11


def test_a_skewed_trace_rebalances_once_through_the_engine_and_policy() -> None:
    model = _model([MS] * 4, build_ns=[0.5 * MS] * 4, overhead={"STAL": 0.0}, move_ms=7.0)
    run = simulate_mode(_trace([10, 10, 1, 1], 200), model, "Dynamic LB STAL", workers=2,
                        period_s=1.0)
    (command,) = run.commands
    assert command["assignment"] == GreedyPolicy().propose([10, 10, 1, 1], [0, 0, 1, 1], 2)
    assert "policy greedy" in command["reason"] and command["epoch"] == 1
    # batch 0 takes 21 ms (two builds on worker 0), then 20 ms each, 22 items per batch:
    # batches 0-48 end by 1000 ms (1078 items >= M), so period 0 commands; batch 49, running
    # at 1000 ms, keeps the old assignment and batch 50 starts the new one
    ends = np.cumsum(run.makespans_ms)
    first = int(np.argmax(np.array(run.makespans_ms[1:]) != 20.0)) + 1
    assert run.makespans_ms[0] == 21.0 and (first, command["time"]) == (50, 1000)
    assert ends[first - 1] > command["time"] >= ends[first - 2]
    # the first batch of the new epoch pays the move and rebuilds the moved partitions
    new = np.array(command["assignment"])
    moved = new != np.array([0, 0, 1, 1])
    loads = np.bincount(new, weights=[10, 10, 1, 1], minlength=2)
    rebuilt = np.bincount(new[moved], minlength=2) * 0.5
    assert run.makespans_ms[first] == pytest.approx(7.0 + max(loads + rebuilt))
    assert run.makespans_ms[first + 1:] == pytest.approx([max(loads)] * (199 - first))
    assert run.move_ms == 7.0 and run.moved_partitions == moved.sum()
    assert run.statuses[-1]["mldc"] == pytest.approx(0.0)


def test_a_balanced_trace_does_not_rebalance() -> None:
    run = simulate_mode(_trace([5, 5, 5, 5], 500), _model([MS] * 4, overhead={"STAL": 0.0}),
                        "Dynamic LB STAL", workers=2, period_s=1.0)
    assert run.commands == [] and len(run.statuses) == 4
    assert {s["mldc"] for s in run.statuses} == {0.0}


def test_lb_sees_time_where_db_sees_only_items() -> None:
    # equal items, but partitions 0 and 1 cost 4x more: 40 ms vs 10 ms per batch
    model = _model([4 * MS, 4 * MS, MS, MS], overhead={"STAL": 0.0})
    trace = _trace([5, 5, 5, 5], 500)
    db = simulate_mode(trace, model, "Dynamic DB STAL", workers=2, period_s=3.0)
    lb = simulate_mode(trace, model, "Dynamic LB STAL", workers=2, period_s=3.0)
    assert db.commands == [] and len(lb.commands) == 1
    assert set(db.makespans_ms) == {40.0} and lb.makespans_ms[-1] == 25.0
    assert lb.throughput > 1.4 * db.throughput


def test_table_one_parameters_can_be_overridden() -> None:
    model = _model([MS] * 4, overhead={"STAL": 0.0})
    run = simulate_mode(_trace([10, 10, 1, 1], 200), model, "Dynamic LB STAL", workers=2,
                        period_s=1.0, params=Params(threshold=5.0))
    assert run.commands == [] and run.statuses[0]["threshold"] == 5.0


# -- from physical-run CSVs -------------------------------------------------------------------

SUBS, PUBS, P, BATCH = 300, 1500, 16, 500


def _physical(out: Path, pipeline: str = "sPIS") -> np.ndarray:
    """CSV files as the harness writes them for three sPIS runs of repeat 0 at skew 0.5, on a
    real (small) workload: ns per item of partition p is (p + 1) us, a build (p + 1) / 10 us."""
    workload = Workloads().get(WorkloadKey(repeat=0, subscriptions=SUBS, publications=PUBS,
                                           workers=2, hot_workers=1, partitions=P,
                                           partitioner="kdbtree", skew=0.5))
    strategy = build_strategy(pipeline, workload.subscriptions, P, "kdbtree")
    routed = strategy.router().route(workload.publications.geoms)
    cell = (routed.pub_index // BATCH) * P + routed.partition
    items = np.bincount(cell, minlength=3 * P).reshape(3, P)
    runs, batches, loads, moves = [], [], [], []
    for mode, join, overhead in (("Static STAL", "STAL", 50.0), ("Static STRL", "STRL", 80.0),
                                 ("Dynamic LB STAL", "STAL", 50.0)):
        rid = f"{pipeline}-{mode.replace(' ', '')}-s50-r0"
        base = {"run_id": rid, "pipeline": pipeline, "mode": mode, "skew": 0.5, "repeat": 0}
        runs.append({**base, "join": join, "balancing": "x", "subscriptions": SUBS,
                     "publications": PUBS, "partitions": P, "workers": 2, "records": PUBS})
        for b in range(3):
            batches.append({**base, "batch_id": b, "records": BATCH,
                            "duration_ms": 1000.0 + overhead, "join_stage_ms": 1000.0})
            for p in range(P):
                built = items[b, p] > 0 and (join == "STRL" or b == 0)
                build = (p + 1) * 100 if built else 0
                ns = items[b, p] * (p + 1) * 1000 + (build if join == "STRL" else 0)
                loads.append({**base, "batch_id": b, "epoch": 0, "partition": p,
                              "worker": p * 2 // P, "items": items[b, p], "processing_ns": ns,
                              "index_builds": int(built), "static_bytes": 0,
                              "build_ns": build})
        if mode.startswith("Dynamic"):
            moves.append({**base, "subscriptions": SUBS, "epoch": 1, "batch_id": 2,
                          "partitions_moved": 4, "bytes": 1000, "duration_ms": 30.0})
    for name, rows in (("runs", runs), ("batches", batches), ("loads", loads),
                       ("moves", moves)):
        write_csv(out / f"{name}.csv", rows)
    return items


def test_cost_model_from_the_physical_csvs(tmp_path: Path) -> None:
    items = _physical(tmp_path).sum(axis=0)
    (model,) = simulate_costs.cost_models(tmp_path)
    seen = items > 0
    assert model.ns_per_item[seen] == pytest.approx((np.arange(P) + 1.0)[seen] * 1000)
    assert model.build_ns[seen] == pytest.approx((np.arange(P) + 1.0)[seen] * 100)
    assert model.overhead_ms == {"STAL": 50.0, "STRL": 80.0}
    assert (model.move_ms, model.batch_records, model.partitions) == (30.0, BATCH, P)
    assert simulate_costs.check_partitions(model, Workloads()) == 0.0
    wrong = replace(model, physical_items=model.physical_items + (np.arange(P) == 3) * 10)
    assert simulate_costs.check_partitions(wrong, Workloads()) > 0


def test_the_whole_sweep_from_the_physical_csvs(tmp_path: Path) -> None:
    items = _physical(tmp_path)
    notes: list[str] = []
    path = simulate_sweep.run_simulation(tmp_path, workers=4, hot_workers=1, skews=(0.3, 0.5),
                                   publications=2000, min_duration_s=2.0, period_s=0.5,
                                   log=notes.append)
    rows = read_rows(path)
    assert {(r["mode"], float(r["skew"])) for r in rows} == {
        (m, s) for m in simulate.MODES for s in (0.3, 0.5)}
    assert all(float(r["time_s"]) >= 2.0 or r["mode"] != "Static STAL" for r in rows)
    shares = sorted({round(float(r["hot_share_items"]), 2) for r in rows})
    assert shares == pytest.approx([0.3, 0.5], abs=0.01)
    (cost,) = read_rows(tmp_path / "simulation_costs.csv")
    assert cost["partition_items_match"] == "True"
    check = {r["mode"]: r for r in read_rows(tmp_path / "simulation_check.csv")}
    assert set(check) == {"Static STAL", "Static STRL", "Dynamic LB STAL"}
    # Static STAL: per batch 50 ms + the slowest of the two workers (builds in batch 0 only)
    ns = items * (np.arange(P) + 1) * 1000 + (np.arange(3)[:, None] == 0) * (items > 0) * (
        np.arange(P) + 1) * 100
    slowest = np.maximum(ns[:, : P // 2].sum(axis=1), ns[:, P // 2:].sum(axis=1)) / 1e6
    assert float(check["Static STAL"]["predicted_s"]) == pytest.approx(
        (3 * 50 + slowest.sum()) / 1000)
    assert float(check["Static STAL"]["measured_s"]) == pytest.approx(3.15)
    assert read_rows(tmp_path / "simulation_mldc.csv")
    fig9_simulation(tmp_path, log=lambda _: None)
    assert (tmp_path / "fig9_simulation.png").exists()
    assert not any("WARNING" in n for n in notes)


def test_no_cost_run_means_no_simulation(tmp_path: Path) -> None:
    notes: list[str] = []
    assert simulate_sweep.run_simulation(tmp_path, log=notes.append) is None
    assert "skipped" in notes[0]


def test_a_cost_run_without_batches_is_skipped(tmp_path: Path) -> None:
    _physical(tmp_path)
    (tmp_path / "batches.csv").unlink()
    notes: list[str] = []
    assert simulate_costs.cost_models(tmp_path, log=notes.append) == []
    assert "no batches" in notes[0]
