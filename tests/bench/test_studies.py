"""The studies behind the results pages (bench.studies) on small hand-made inputs."""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import pytest

import bench.studies
from bench.harness.csv_tables import write_csv
from bench.harness.eventlog import parse
from bench.studies import (
    ab_decode,
    cpu_by_process,
    event_state,
    eventlog,
    profile_route,
    spark_floor,
)

PIPELINES = ("sPS", "sPIS")
MODES = {"Static STAL": 1000.0, "Dynamic LB STAL": 1400.0}   # throughput at skew 0.9


def _rid(pipeline: str, mode: str, skew: int, repeat: int) -> str:
    return f"{pipeline}-{mode.replace(' ', '')}-s{skew}-r{repeat}"


def test_every_study_imports_and_runs_as_a_module() -> None:
    names = [m.name for m in pkgutil.iter_modules(bench.studies.__path__)]
    assert len(names) == 25
    for name in names:
        module = importlib.import_module(f"bench.studies.{name}")
        assert module.__doc__, name
        assert callable(module.main), name


def test_cross_cost_runs_both_sides_on_one_workload() -> None:
    """Both sides run on one workload (the generator's share put back after it), the state
    with cross holding the shapes of the fences asking for it."""
    from bench.studies import cross_cost
    from geops.workload import objects

    p = cross_cost.prepare(200, 10, 400, 2)
    assert objects.CROSS_EVERY != 2
    with_cross, without = cross_cost.run(p, True, 100), cross_cost.run(p, False, 100)
    assert with_cross[2] > without[2] and with_cross[1] >= without[1]


def test_ab_decode_compares_the_two_sides(tmp_path: Path) -> None:
    for side, factor in zip(ab_decode.SIDES, (1.0, 1.1), strict=True):
        runs, batches = [], []
        for p in ab_decode.PIPELINES:
            for mode, thr in MODES.items():
                for r in range(2):
                    base = {"run_id": _rid(p, mode, 90, r), "pipeline": p, "mode": mode,
                            "repeat": r}
                    runs.append({**base, "throughput": thr * factor})
                    batches += [{**base, "batch_id": b, "epoch": 0, "start_ms": 1000 * b,
                                 "end_ms": 1000 * b + 900, "records": 1000,
                                 "duration_ms": 900 / factor, "join_stage_ms": 600}
                                for b in range(3)]
        (tmp_path / side).mkdir()
        write_csv(tmp_path / side / "runs.csv", runs)
        write_csv(tmp_path / side / "batches.csv", batches)
    lines = ab_decode.report(tmp_path)
    assert lines[0] == ("sPIS Static STAL: frozen 1,000 · 1,000 | one-pass 1,100 · 1,100 pub/s | "
                        "one-pass/frozen 1.10 · 1.10, ratio of means 1.100")
    assert lines[2] == ("sPIS frozen-f2e4a7f: Dynamic LB STAL / Static STAL 1.40 · 1.40, ratio "
                        "of means 1.400")
    assert lines[4].startswith("sPIS Static STAL, outside the join, ms per 1,000 records: "
                               "frozen 300.0 · 300.0 | one-pass 218.2 · 218.2")


def _job(job: int, stage0: int, start: int) -> list[dict]:
    """Events of one two-stage job: read [start, start+100], join [start+110, start+400]."""
    task = {"Task Metrics": {"Shuffle Write Metrics": {"Shuffle Write Time": 2e6,
                                                       "Shuffle Bytes Written": 1e6},
                             "Result Size": 3e6, "Executor Deserialize Time": 1,
                             "Executor Run Time": 80, "Executor CPU Time": 5e6,
                             "JVM GC Time": 0, "Result Serialization Time": 0,
                             "Input Metrics": {"Records Read": 0},
                             "Shuffle Read Metrics": {"Fetch Wait Time": 0}}}
    events = [{"Event": "SparkListenerJobStart", "Job ID": job, "Submission Time": start,
               "Stage IDs": [stage0, stage0 + 1]}]
    for stage, (a, b) in ((stage0, (start, start + 100)), (stage0 + 1, (start + 110,
                                                                          start + 400))):
        events.append({"Event": "SparkListenerStageCompleted", "Stage Info": {
            "Stage ID": stage, "Submission Time": a, "Completion Time": b}})
        events.append({"Event": "SparkListenerTaskEnd", "Stage ID": stage, **task,
                       "Task Info": {"Launch Time": a + 5, "Finish Time": b - 10}})
    events.append({"Event": "SparkListenerJobEnd", "Job ID": job, "Completion Time": start + 410})
    return events


def test_eventlog_stages_and_tasks() -> None:
    lines = [json.dumps(e) for j in range(4) for e in _job(j, 2 * j, 1000 * j)]
    parsed = parse(lines)
    assert eventlog.stage_times(*parsed) == [
        "4 two-stage jobs; means over all but the first:",
        "{'job': 410, 'read': 100, 'gap': 10, 'join': 290, 'shuffle_write_ms': 2.0, "
        "'shuffle_mb': 1.0, 'result_mb': 3.0}"]
    tasks = eventlog.task_metrics(*parsed)
    assert "('join', 'duration') 275 max 275" in tasks
    assert "('read', 'launch_delay') 5 max 5" in tasks


def test_cpu_by_process_tells_the_processes_apart() -> None:
    assert cpu_by_process.kind_of("java -cp /x/a.jar kafka.Kafka server.properties") == "broker"
    assert cpu_by_process.kind_of("python -m pyspark.daemon") == "python workers"
    assert cpu_by_process.kind_of("java ... /work/app/main.py --master") == (
        "driver (JVM + Python)")
    assert cpu_by_process.kind_of("bash") is None
    assert cpu_by_process.totals({"1": ("broker", 1.04), "2": ("broker", 2.0)}) == {
        "broker": 3.0}


def test_profile_route_times_every_step() -> None:
    lines = profile_route.profile(publications=300, subscriptions=200)
    assert lines[0].startswith("records 300 point share")
    assert [line[:28].strip() for line in lines[1:-1]] == [
        "avro decode", "from_wkb", "geometry_problems", "is_valid alone", "route (place)",
        "decode_route total", "pickle shuffle records"]


def test_profile_churn_times_every_step() -> None:
    from bench.studies import profile_churn
    lines = profile_churn.profile(changes=40, batches=2, subscriptions=300)
    assert len(lines) == 2 and all("driver apply" in x and "executors apply" in x for x in lines)
    assert profile_churn.main(["x"]) == 2 and profile_churn.main(["0"]) == 2


def test_the_event_state_step_is_one_object_at_a_time_by_event_time() -> None:
    """``event_state.events_of`` over several objects at once (the bucket layout) gives the
    events a loop over each object's positions in event-time order gives."""
    import numpy as np

    rng = np.random.default_rng(3)
    oid = rng.choice(np.array(["a", "b", "c", "d"], dtype=object), 200)
    t = rng.permutation(200).astype(np.int64)
    now = rng.random(200) < 0.5
    was = {"a": True, "b": False}
    ev, order, state = event_state.events_of(
        oid, t, now, lambda objs: np.array([was.get(o, False) for o in objs]))
    got = sorted(int(t[order][i]) for i in ev)
    want, last = [], {}
    for i in np.argsort(t):
        before = last.get(oid[i], was.get(oid[i], False))
        if now[i] != before:
            want.append(int(t[i]))
        last[oid[i]] = bool(now[i])
    assert got == sorted(want)
    assert state == {o: (int(t[oid == o].max()), last[o]) for o in last}


def test_spark_floor_refuses_runs_no_longer_than_their_warm_up(capsys) -> None:
    for argv in (["--seconds", "5"], ["--jobs", "3"]):
        with pytest.raises(SystemExit):
            spark_floor.main(argv)
        assert "must be above 5" in capsys.readouterr().err


def test_output_ab_measures_the_batches_after_the_first_third() -> None:
    from bench.studies.output_ab import batch_measures

    batches = [{"records": 100, "duration_ms": 500.0 + i, "join_stage_ms": 300.0,
                "job_ms": 450.0, "start_time": 1000 * i, "end_time": 1000 * i + 500}
               for i in range(6)]
    got = batch_measures(batches)
    assert got["batches"] == 4 and got["driver"] == 203.5 and got["after_job"] == 53.5
    assert got["rate"] == 400 / 3.5
