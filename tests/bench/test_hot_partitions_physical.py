"""The summary of the hot-partition physical runs, on a crafted results directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.harness.csv_tables import write_csv
from bench.paper.plan import ADAPTIVE, FULL_SIZES, HOT_SPOT, REPLICATE, full_plan
from bench.studies.hot_partitions_physical import main, summarise

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


def test_pipelines_are_points_of_their_own_and_iso_load_logs_are_read(tmp_path: Path) -> None:
    """The same mode, skew and repeat on two pipelines are two points (each against its own
    Static STAL), and a load log stamped ``YYYY-MM-DDTHH:MM:SSZ`` or with an offset (``date
    -Is``) gives the load over a run."""
    thr = {("sPS", "Static STAL"): 100.0, ("sPS", ADAPTIVE): 130.0,
           ("RIsPS", "Static STAL"): 1000.0, ("RIsPS", ADAPTIVE): 900.0}
    start = 1_795_716_000_000  # 2026-11-26T18:00:00Z
    runs = [{"run_id": f"{p}-{m}-r0", "pipeline": p, "mode": m, "skew": 0.7, "repeat": 0,
             "throughput": v, "rebalances": 1, "skew_items": 0.7,
             "first_start_ms": start + 60_000, "last_end_ms": start + 120_000}
            for (p, m), v in thr.items()]
    runs[1].update(first_start_ms=start + 86_400_000 - 30_000,  # over midnight
                   last_end_ms=start + 86_400_000 + 30_000)
    write_csv(tmp_path / "runs.csv", runs)
    for name in ("status", "moves", "loads"):
        write_csv(tmp_path / f"{name}.csv", [])
    log = tmp_path / "load.log"
    log.write_text("2026-11-26T18:00:30Z 9.00 1 1\n2026-11-26T18:01:30Z 2.00 1 1\n"
                   "2026-11-26T18:02:30Z 9.00 1 1\n2026-11-27T17:59:50Z 4.00 1 1\n"
                   "2026-11-27T19:00:10+01:00 6.00 1 1\n")  # 18:00:10Z
    rows = {(r["pipeline"], r["mode"]): r for r in summarise(tmp_path, log)}
    assert rows[("sPS", ADAPTIVE)]["over_static"] == pytest.approx(1.3)
    assert rows[("RIsPS", ADAPTIVE)]["over_static"] == pytest.approx(0.9)
    assert rows[("RIsPS", ADAPTIVE)]["load1_mean"] == pytest.approx(2.0)
    assert rows[("sPS", ADAPTIVE)]["load1_mean"] == pytest.approx(5.0)


def test_a_directory_without_runs_is_refused_by_name(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path)])
    assert stop.value.code == 2
    assert f"results: {tmp_path} has no runs.csv" in capsys.readouterr().err
