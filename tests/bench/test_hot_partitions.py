"""The simulation with replicated partitions: makespans with a partition's work split
among its owners, index builds per owner, bytes shipped per added owner, and the sweep's rows."""

from __future__ import annotations

import numpy as np
import pytest

from bench.harness.csv_tables import read_rows
from bench.paper import simulate
from bench.paper.simulate import CostModel, Trace, simulate_mode
from bench.studies import hot_partitions
from distributor import Params

MS = 1e6


def _model(ns_per_item, build_ns=None, move_ms=0.0) -> CostModel:
    p = len(ns_per_item)
    return CostModel(
        pipeline="sPS", repeat=0, cost_run="x", subscriptions=10, partitions=p,
        batch_records=10, ns_per_item=np.array(ns_per_item, float),
        build_ns=None if build_ns is None else np.array(build_ns, float),
        overhead_ms={"STAL": 100.0, "STRL": 200.0}, move_ms=move_ms, move_source="test",
        physical_items=np.ones(p), physical_publications=10, physical_workers=2)


# P = 8 on W = 4: partitions 0, 1 on worker 0, ... Partition 0 carries almost everything.
ITEMS = [1200, 10, 10, 10, 10, 10, 10, 10]
SIZES = np.array([5_000, 100, 100, 100, 100, 100, 100, 100], np.int64)


def _trace(batches=40):
    return Trace(np.array([ITEMS] * batches, np.int64), np.full(batches, 1270), SIZES)


MODEL = _model([MS] * 8, build_ns=[7 * MS] * 8, move_ms=50.0)
PARAMS = Params(min_items=100)


def test_replicate_splits_the_hot_partition_and_the_makespan_follows() -> None:
    greedy = simulate_mode(_trace(), MODEL, "Dynamic LB STAL", workers=4, params=PARAMS,
                           period_s=1.0)
    replicated = simulate_mode(_trace(), MODEL, "Dynamic LB STAL", workers=4, params=PARAMS,
                               period_s=1.0, policy="replicate")
    # greedy can only move the small partitions off worker 0: 1,200 ms stay on it
    assert min(greedy.makespans_ms) >= 100 + 1200
    # replicate: ceil(1200 / (1.05 x 317.5)) = 4 owners of partition 0, 300 ms each
    assert replicated.makespans_ms[-1] == pytest.approx(100 + 300 + 20)
    assert replicated.throughput > 2.5 * greedy.throughput
    (command,) = replicated.commands
    assert command["replicas"][0]["partition"] == 0
    assert len(command["replicas"][0]["workers"]) == 4
    # three new owners of partition 0 ship its 5,000 bytes each; nothing else moves
    assert replicated.moved_bytes == 3 * 5_000
    assert replicated.moved_partitions == 3
    assert hot_partitions.final_owners(replicated)[0] == 1
    # after the command the engine judges the split loads: MLDC near 0, no second command
    assert replicated.statuses[-1]["mldc"] < 0.1


def test_each_new_owner_builds_the_index_once_and_pays_the_move() -> None:
    run = simulate_mode(_trace(), MODEL, "Dynamic LB STAL", workers=4, params=PARAMS,
                        period_s=1.0, policy="replicate")
    # batch 0: 1,200 + 10 ms of join and two 7 ms builds on worker 0; the command follows
    # batch 1's period; batch 2 applies it: move 50 ms, each owner 300 ms of partition 0, its
    # two small partitions (20 ms) and one new build (7 ms); then 300 + 20 ms a batch
    assert run.makespans_ms[:4] == pytest.approx([100 + 1224, 100 + 1210,
                                                  100 + 50 + 327, 100 + 320])
    assert run.move_ms == 50.0


def test_greedy_single_owner_runs_report_and_move_as_before() -> None:
    run = simulate_mode(_trace(4), _model([10 * MS, 5 * MS, 1 * MS, 1 * MS] * 2),
                        "Static STAL", workers=4)
    assert run.moved_partitions == 0 and run.moved_bytes == 0 and run.commands == []


def test_the_sweep_writes_one_row_per_policy(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(hot_partitions, "cost_models", lambda *_a, **_k: [MODEL])

    class FakeWorkloads:
        def clear(self):
            pass

    monkeypatch.setattr(hot_partitions, "Workloads", FakeWorkloads)
    monkeypatch.setattr(hot_partitions, "point_workload", lambda *a, **k: object())
    monkeypatch.setattr(simulate, "make_trace", lambda *a, **k: _trace(10))  # scenario_trace's
    path = hot_partitions.compare_policies(tmp_path, tmp_path, policies=("greedy", "replicate"),
                                           pipelines=("sPS",), skews=(0.7,), moving_skew=None,
                                           workers=4, min_duration_s=1.0, period_s=1.0,
                                           scenarios=("steady",), adaptive_policies=(
                                               "replicate",), log=lambda _m: None)
    assert path.name == "hot_partitions.csv.gz"
    rows = read_rows(tmp_path / "hot_partitions.csv")
    assert len(rows) == 4   # Static STAL, greedy, replicate, adaptive replicate
    variant = [r["variant"] for r in rows]
    assert variant == ["none", "greedy", "replicate", "adaptive-replicate"]
    assert (tmp_path / "hot_partitions_mldc.csv.gz").exists()
    summary = {r["variant"]: r for r in read_rows(hot_partitions.summarise(tmp_path))}
    assert float(summary["greedy"]["over_greedy_mean"]) == 1.0
    assert float(summary["replicate"]["over_greedy_mean"]) > 2.0
    assert float(summary["replicate"]["mldc_last_max"]) < 0.1
    assert float(summary["replicate"]["replicated_mean"]) == 1.0
    assert float(summary["adaptive-replicate"]["mldc_last_max"]) < 0.1
    assert (tmp_path / "hot_partitions.png").exists()


def test_the_paper_runs_keep_greedy_whatever_the_default() -> None:
    from bench.paper.plan import first_period_plan
    from bench.paper.runner import DistributorSettings, distributor_args
    from config import defaults

    assert defaults()["distributor"]["policy"] == "replicate"
    for spec in first_period_plan(1, ("sPS",), (0.9,)):
        args = distributor_args(spec, DistributorSettings())
        assert args[args.index("--policy") + 1] == "greedy"
