"""The summary of issue 22's physical runs, on a crafted results directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.hot_partitions_physical import summarise
from bench.paper.plan import FULL_SIZES, HOT_SPOT, REPLICATE, full_plan
from bench.paper.rows import write_csv

THR = {"Static STAL": (1000.0, 1100.0), "Dynamic LB STAL": (1100.0, 1100.0),
       REPLICATE: (1500.0, 1650.0)}


def test_ratios_pair_repeats_and_replicas_come_from_the_last_batch(tmp_path: Path) -> None:
    plan = full_plan(2, ("sPIS",), tuple(THR), (), FULL_SIZES, hot_spots=(HOT_SPOT,))
    runs, status, moves, loads = [], [], [], []
    for s in plan:
        rid = s.run_id
        runs.append({"run_id": rid, "pipeline": s.pipeline, "mode": s.mode, "skew": s.skew,
                     "repeat": s.repeat, "throughput": THR[s.mode][s.repeat],
                     "rebalances": int(s.mode == REPLICATE), "skew_items": 0.8})
        status += [{"run_id": rid, "period": p, "mldc": m}
                   for p, m in ((0, ""), (1, 0.85), (2, 0.02 if s.mode == REPLICATE else 0.85))]
        if s.mode == REPLICATE:
            moves.append({"run_id": rid, "partitions_moved": 1, "bytes": 2_000_000})
        for batch in (0, 1):
            loads.append({"run_id": rid, "batch_id": batch, "partition": 0, "worker": 0})
            if s.mode == REPLICATE and batch == 1:
                loads.append({"run_id": rid, "batch_id": batch, "partition": 0, "worker": 1})
    for name, rows in (("runs", runs), ("status", status), ("moves", moves), ("loads", loads)):
        write_csv(tmp_path / f"{name}.csv", rows)
    rows = {r["mode"]: r for r in summarise(tmp_path)}
    rep = rows[REPLICATE]
    assert rep["hot_partitions"] == 1 and rep["skew"] == 0.8 and rep["repeats"] == 2
    assert rep["over_static"] == pytest.approx(3150 / 2100)
    assert (rep["over_static_min"], rep["over_static_max"]) == pytest.approx((1.5, 1.5))
    assert rep["over_greedy_min"] == pytest.approx(1500 / 1100)
    assert rep["mldc_last_mean"] == pytest.approx(0.02)
    assert rep["moved_mb_mean"] == pytest.approx(2.0)
    assert rep["replicated_last"] == "1/1" and rep["rebalances"] == "1/1"
    assert rows["Static STAL"]["replicated_last"] == "0/0"
    assert (tmp_path / "summary.csv").exists()
