"""bench.studies.cost_model on a tiny synthetic event log: the least-squares fit, and the
per-batch stages from the event log, the BatchSummary and the app's log line."""

from __future__ import annotations

import json
import math
from pathlib import Path

from bench.studies import cost_model


def test_fit_recovers_fixed_and_per_record_cost() -> None:
    records = [100, 200, 1000, 5000, 20000]
    fixed, per_record, r2 = cost_model.fit(records, [50 + 0.02 * n for n in records])
    assert math.isclose(fixed, 50) and math.isclose(per_record, 0.02)
    assert math.isclose(r2, 1.0)
    fixed, per_record, r2 = cost_model.fit([1, 2, 3, 4], [1, 3, 2, 4])
    assert math.isclose(fixed, 0.5) and math.isclose(per_record, 0.8) and 0 < r2 < 1


def _task(stage: int, launch: int, run: int, **metrics: float) -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage,
            "Task Info": {"Launch Time": launch, "Finish Time": launch + run},
            "Task Metrics": {"Executor Deserialize Time": metrics.get("deser", 2),
                             "Executor Run Time": run, "JVM GC Time": 1,
                             "Result Serialization Time": metrics.get("ser", 0),
                             "Result Size": 1000,
                             "Shuffle Write Metrics": {"Shuffle Write Time": 3e6,
                                                       "Shuffle Bytes Written": 500},
                             "Shuffle Read Metrics": {"Fetch Wait Time": metrics.get("wait", 0)}}}


def _batch_events(batch: int, t: int) -> list[dict]:
    """Batch ``batch`` triggered at ``t``: its job at t+130 (read stage 100 ms, join 200 ms
    after a 10 ms gap); static-side jobs without a batch id come before."""
    job, s = 10 * batch, 10 * batch
    stage = lambda sid, a, b: {"Event": "SparkListenerStageCompleted",  # noqa: E731
                               "Stage Info": {"Stage ID": sid, "Submission Time": a,
                                              "Completion Time": b}}
    return [
        {"Event": "SparkListenerJobStart", "Job ID": job - 1, "Submission Time": t,
         "Stage IDs": [s - 1], "Properties": {}},
        {"Event": "SparkListenerJobEnd", "Job ID": job - 1, "Completion Time": t + 5},
        {"Event": "SparkListenerJobStart", "Job ID": job, "Submission Time": t + 130,
         "Stage IDs": [s, s + 1, s + 2], "Properties": {"streaming.sql.batchId": str(batch)}},
        _task(s, t + 135, 90), _task(s, t + 136, 80), stage(s, t + 131, t + 230),
        _task(s + 1, t + 242, 190, wait=4, ser=3), stage(s + 1, t + 240, t + 440),
        {"Event": "SparkListenerJobEnd", "Job ID": job, "Completion Time": t + 441},
        {"Event": cost_model.PROGRESS, "progress": {
            "batchId": batch, "timestamp": "2026-11-27T17:00:00.000Z",
            "sources": [{"numInputRows": 1000}],
            "durationMs": {"latestOffset": 20, "queryPlanning": 15, "getBatch": 5,
                           "walCommit": 40, "addBatch": 500, "commitOffsets": 30,
                           "triggerExecution": 612}}},
    ]


def test_batch_rows_split_a_batch_into_stages_that_add_up() -> None:
    lines = [json.dumps(e) for b in (1, 2) for e in _batch_events(b, 10_000 * b)]
    # the batch function starts at t+100 (after offsets, planning, the offset log)
    summaries = [{"batch_id": b, "records": 1000, "items": 1500, "start_time": 10_000 * b + 100,
                  "job_ms": 350.5, "write_ms": 40.0, "duration_ms": 400.0,
                  "join_stage_ms": 150.0} for b in (1, 2, 3)]
    totals = cost_model.app_totals([
        "2026-11-27 17:00:00,470 geops.app INFO batch 1 epoch 0: 1000 records, 1500 items, "
        "900 matched, 0 dead letters, 430 ms",
        "2026-11-27 17:00:00,470 geops.app INFO batch 2 epoch 0: 1000 records, 1500 items, "
        "900 matched, 0 dead letters, 430 ms", "batch 3 is not a batch line"])
    rows = cost_model.batch_rows(lines, summaries, totals)
    assert [r["batch_id"] for r in rows] == [1, 2]   # batch 3: not in the event log
    r = rows[0]
    assert {k: r[k] for k, _, _ in cost_model.STAGES} == {
        "offsets": 20, "planning": 20, "wal": 40, "call": 70, "prepare": 30, "read": 100,
        "between": 10, "join": 200, "collect": 10.5, "gather": 9.5, "write": 40.0,
        "output": 30.0, "commit": 30, "other": 2}
    assert sum(r[k] for k, _, _ in cost_model.STAGES) == r["trigger"] == 612
    assert r["jobs"] == 1 and r["input_rows"] == 1000 and r["read_tasks"] == 2
    assert (r["read_launch"], r["read_deser"], r["read_shuffle_write"]) == (5, 4, 6.0)
    assert r["read_work"] == 170 - 6.0
    assert (r["join_fetch"], r["join_work"], r["join_result_ser"], r["join_busy"]) == (
        4, 186, 3, 150.0)


def test_a_one_stage_batch_has_no_read_stage_and_still_adds_up() -> None:
    """A small batch read in its join tasks: one stage, whose time is the join's."""
    events = [e for e in _batch_events(1, 10_000) if e.get("Stage ID") != 10
              and e.get("Stage Info", {}).get("Stage ID") != 10]
    for e in events:
        if e.get("Job ID") == 10 and e["Event"] == "SparkListenerJobStart":
            e["Stage IDs"] = [11]
    summaries = [{"batch_id": 1, "records": 300, "items": 400, "start_time": 10_100,
                  "job_ms": 350.5, "write_ms": 40.0, "duration_ms": 400.0,
                  "join_stage_ms": 150.0}]
    totals = {1: 430.0}
    (r,) = cost_model.batch_rows([json.dumps(e) for e in events], summaries, totals)
    assert r["stages"] == 1 and r["read"] == 0 and r["read_tasks"] == 0
    assert r["between"] == 110 and r["join"] == 200  # job start to the stage, then the stage
    assert sum(r[k] for k, _, _ in cost_model.STAGES) == r["trigger"] == 612


def test_table_and_files(tmp_path: Path) -> None:
    rows = [{"batch_id": i, "records": n, "trigger_start": "x",
             **{c: 10.0 + n / 1000 for c, _, _ in cost_model.STAGES},
             "trigger": 140.0 + 14 * n / 1000,
             **{c: 1.0 for c, _ in cost_model.TASK_PARTS}}
            for i, n in enumerate([50, 100, 200, 1000, 3000, 10000, 30000])]
    cost_model.write_runs(tmp_path / "runs.csv.gz", rows)
    back = cost_model.read_runs(tmp_path / "runs.csv.gz")
    assert back[3]["records"] == 1000.0 and back[3]["trigger_start"] == "x"
    table, used = cost_model.cost_table(back, skip=2)
    assert len(used) == 5
    total = next(t for t in table if t["column"] == "trigger")
    assert math.isclose(total["fixed_ms"], 140) and math.isclose(total["us_per_record"], 14)
    text = "\n".join(cost_model.markdown(table, used))
    assert "5 batches, 200 to 30,000 records" in text
    assert "| **total** | triggerExecution | 140.0 | 14.00 | 1.00 | 140.0 | 143 | 210 |" in text
    # capacity 1e6/14 records/s; d = 140 / 0.3 ms; latency 1.5 d
    assert "capacity 71,429 records/s" in text and "d = F / (1 − ρ) = 467 ms" in text
