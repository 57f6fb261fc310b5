"""Mode adaptive on recorded metrics: every Static STAL run of the full matrix (W = 2, three
repeats of sPS, sPIS, RIsPS and RIhPS), its PartitionLoads and BatchSummaries replayed batch by
batch through the engine as the service would feed them.

The runs never rebalanced, so a replay ends at the first command (the app would have applied
it). At skew 0.5 the adaptive engine must never command; at 0.7 and above (where the Table 1
distributor commands only from 0.8) it must command within the first few batches.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from bench.harness.csv_tables import iter_rows, read_rows, stored
from bench.paper.results import is_plan_run
from distributor import Engine, GreedyPolicy, Params

RESULTS = Path(__file__).parents[2] / "docs" / "results" / "full-matrix"
APP = "recorded"


@pytest.fixture(scope="module")
def recorded():
    """{run_id: (run, {batch: [load rows]}, {batch: batch row})} of the Static STAL runs."""
    if not all(stored(RESULTS / name) for name in ("runs.csv", "loads.csv", "batches.csv")):
        pytest.skip(f"no recorded metrics in {RESULTS}")
    runs = {r["run_id"]: r for r in read_rows(RESULTS / "runs.csv")
            if r["mode"] == "Static STAL" and is_plan_run(r)}
    loads: dict[str, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for row in iter_rows(RESULTS / "loads.csv", set(runs)):
        loads[row["run_id"]][int(row["batch_id"])].append(row)
    batches: dict[str, dict[int, dict]] = defaultdict(dict)
    for row in iter_rows(RESULTS / "batches.csv", set(runs)):
        batches[row["run_id"]][int(row["batch_id"])] = row
    return {rid: (run, loads[rid], batches[rid]) for rid, run in runs.items()}


def replay(run, loads, batches):
    """The run's statuses up to (and with) its first command, if any."""
    engine = Engine(Params(mode="adaptive"), GreedyPolicy(), app_id=APP)
    statuses = []
    for b in sorted(batches):
        for row in loads.get(b, []):
            problem = engine.observe_load({
                "app_id": APP, "batch_id": b, "epoch": int(row["epoch"]),
                "partition": int(row["partition"]), "worker": int(row["worker"]),
                "items": int(row["items"]), "processing_ns": int(row["processing_ns"]),
                "build_ns": int(row["build_ns"] or 0),
                "static_bytes": int(row["static_bytes"] or 0), "time": 0})
            assert problem is None, problem
        s = batches[b]
        assert engine.observe_batch({
            "app_id": APP, "batch_id": b, "epoch": int(s["epoch"]),
            "workers": int(run["workers"]), "partitions": int(run["partitions"]),
            "join": run["join"], "duration_ms": float(s["duration_ms"]),
            "join_stage_ms": float(s["join_stage_ms"])}) is None
        if engine.decision_due:
            result = engine.end_period(b)
            statuses.append(result.status)
            if result.command is not None:
                break
    return statuses


def by_skew(recorded, test):
    return sorted(rid for rid, (run, _, _) in recorded.items() if test(float(run["skew"])))


def test_no_command_at_skew_05_in_any_recorded_run(recorded):
    runs = by_skew(recorded, lambda s: s == 0.5)
    assert len(runs) >= 12
    for rid in runs:
        statuses = replay(*recorded[rid])
        assert len(statuses) == len(recorded[rid][2]), rid   # judged every batch
        assert all(s["decision"] == "none" for s in statuses), (rid, statuses[-1]["reason"])


def test_a_command_within_six_batches_from_skew_07(recorded):
    runs = by_skew(recorded, lambda s: s >= 0.7)
    assert len(runs) >= 27
    for rid in runs:
        statuses = replay(*recorded[rid])
        assert statuses[-1]["decision"] == "rebalance", (rid, statuses[-1]["reason"])
        assert len(statuses) <= 6, (rid, len(statuses))
        assert statuses[-1]["mldc_predicted"] < 0.05
