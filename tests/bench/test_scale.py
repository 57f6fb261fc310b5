"""The pure parts of `geops bench scale` (bench.scale.calc, bench.scale.memory): log parsing,
memory peaks, the per-run summary, ratios to the reference, CSV round trip and the report, on
hand-made inputs."""

from __future__ import annotations

import pytest

from bench.harness.csv_tables import append_csv
from bench.harness.procfs import memory_kb
from bench.scale.calc import (
    failure_reason,
    forced_assignment,
    parse_app_log,
    relative_to_reference,
    summarise,
)
from bench.scale.memory import MemoryPeaks

LOG = """\
2026-11-26 08:24:40,100 geops.app INFO 10000 subscriptions (10000 records read by the executors \
in 2.1 s, 0 skipped) in 16 partitions for sPIS with a kdbtree partitioner, 2 workers, STAL join \
(built in 0.4 s)
2026-11-26 08:25:03,522 geops.app INFO static data: 6995512 bytes in 16 partitions (546 bytes \
per subscription, the largest partition 657673 bytes), built on the executors in 18.2 s
"""


def test_parse_app_log():
    got = parse_app_log(LOG)
    assert got == {"static_bytes": 6995512, "static_partitions": 16,
                   "bytes_per_subscription": 546.0, "largest_partition_bytes": 657673,
                   "static_build_s": 18.2, "router_build_s": 0.4}
    assert parse_app_log("nothing")["static_build_s"] is None


def test_failure_reason_prefers_out_of_memory():
    text = ("INFO fine\nERROR later thing\n"
            "Exception in thread \"dispatcher\" java.lang.OutOfMemoryError: Java heap space\n"
            "ERROR geops.app the app stopped\n")
    assert "OutOfMemoryError" in failure_reason(text)
    assert failure_reason("a\nERROR b\nc\n") == "ERROR b"
    assert failure_reason("") == "(empty log)"


def test_memory_kb_and_peaks():
    assert memory_kb("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n") == (1024, 2048)
    assert memory_kb("Name:\tzombie\n") == (0, 0)
    p = MemoryPeaks()
    p.add([(1, "app-jvm", 1000, 1500), (2, "app-python-workers", 100, 200),
           (3, "app-python-workers", 300, 300)])
    p.add([(1, "app-jvm", 900, 1600), (2, "app-python-workers", 150, 250)])  # pid 3 gone
    assert p.rss_sum_kb == {"app-jvm": 1000, "app-python-workers": 400}
    assert p.hwm_kb == {"app-jvm": 1600, "app-python-workers": 300}
    assert p.hwm_sum_kb("app-python-workers") == 550
    row = p.row()
    assert row["jvm_hwm_mb"] == round(1600 / 1024, 1)
    assert row["driver_python_hwm_mb"] == 0


def _batch(i, records, start, dur, end=None):
    return {"batch_id": i, "records": records, "start_time": start,
            "end_time": end if end is not None else start + dur, "duration_ms": dur,
            "partitions": 16, "workers": 2}


def test_summarise_leaves_out_warm_up_and_move_batch():
    launch = 1_000
    batches = [_batch(0, 0, 2_000, 10), _batch(1, 100, 60_000, 5_000),
               _batch(2, 100, 65_000, 1_000), _batch(3, 100, 66_000, 3_000),
               _batch(3, 100, 66_000, 1_000),            # replayed: the last report counts
               _batch(4, 100, 67_000, 1_000)]
    loads = [{"batch_id": b, "candidates": c, "processing_ns": ns}
             for b, c, ns in [(1, 999, 10**9), (2, 500, 10**6), (3, 500, 10**6),
                              (4, 250, 10**6), (4, 250, 10**6)]]
    moves = [{"batch_id": 3, "partitions_moved": [0, 4], "bytes": 123, "duration_ms": 45}]
    s = summarise(batches, loads, moves, launch)
    assert s["first_batch_s"] == pytest.approx(64.0)      # batch 1 ends at 65,000
    assert s["batches"] == 4 and s["steady_batches"] == 2  # batches 2 and 4
    assert s["steady_records"] == 200
    assert s["throughput_busy"] == pytest.approx(100.0)    # 200 records / 2 s
    assert s["throughput_span"] == pytest.approx(200 / 3)  # 65,000 .. 68,000
    assert s["candidates"] == 1000
    assert s["batch_us_per_candidate"] == pytest.approx(2_000)
    assert s["join_us_per_candidate"] == pytest.approx(3.0)
    assert (s["move_partitions"], s["move_bytes"], s["move_ms"]) == (2, 123, 45)
    with pytest.raises(ValueError):
        summarise([_batch(0, 0, 0, 1)], [], [], 0)


def test_relative_to_reference():
    rows = [{"strategy": "sPIS", "subscriptions": "10000", "status": "ok",
             "first_batch_s": "10", "throughput_busy": "100", "batch_us_per_candidate": "2",
             "join_us_per_candidate": ""},
            {"strategy": "sPIS", "subscriptions": "1000000", "status": "ok",
             "first_batch_s": "40", "throughput_busy": "50", "batch_us_per_candidate": "3",
             "join_us_per_candidate": "1"},
            {"strategy": "RIsPS", "subscriptions": "1000000", "status": "failed"}]
    out = relative_to_reference(rows, 10_000)
    assert out[1]["first_batch_s_rel"] == 4.0
    assert out[1]["throughput_busy_rel"] == 0.5
    assert out[1]["batch_us_per_candidate_rel"] == 1.5
    assert out[1]["join_us_per_candidate_rel"] is None     # no reference value
    assert out[2]["first_batch_s_rel"] is None             # no RIsPS reference


def test_forced_assignment_moves_every_fourth_partition():
    old, new = forced_assignment(16, 2)
    moved = [p for p in range(16) if old[p] != new[p]]
    assert moved == [0, 4, 8, 12]
    assert all(new[p] == (old[p] + 1) % 2 for p in moved)


def test_report_table(tmp_path):
    from bench.scale.report import write_report
    append_csv(tmp_path / "runs.csv", [
        {"strategy": "sPIS", "subscriptions": 10000, "status": "ok", "first_batch_s": 70,
         "throughput_busy": 700, "batch_us_per_candidate": 20, "join_us_per_candidate": 3,
         "move_bytes": 1_900_000, "move_ms": 1100, "jvm_hwm_mb": 800},
        {"strategy": "sPIS", "subscriptions": 1000000, "status": "failed",
         "failure": "the app exited with 1"}])
    write_report(tmp_path, 10_000, "geops bench scale")
    text = (tmp_path / "table.md").read_text()
    assert "| sPIS | 10,000 |" in text and "| failed |" in text and "1.9" in text
    assert (tmp_path / "scale.png").exists() and (tmp_path / "moves.png").exists()


def test_report_of_one_size_without_its_10k_reference(tmp_path):
    # a run of 1M alone: no ratio to 10k, so those series are empty (they broke the log axis)
    from bench.scale.report import write_report
    append_csv(tmp_path / "runs.csv", [
        {"strategy": "sPIS", "subscriptions": 1000000, "status": "ok", "first_batch_s": 163,
         "throughput_busy": 53, "batch_us_per_candidate": 2.6, "move_bytes": 4_700_000,
         "move_ms": 447, "jvm_hwm_mb": 778}])
    write_report(tmp_path, 10_000, "geops bench scale")
    assert "| sPIS | 1,000,000 |" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "scale.png").exists() and (tmp_path / "moves.png").exists()


def test_phases_anchored_on_the_first_batch():
    from bench.scale.calc import phases
    text = LOG + (
        "2026-11-26 08:25:14,763 geops.app INFO streaming from 'x' (checkpoint y)\n"
        "2026-11-26 08:25:20,000 geops.app INFO batch 0 epoch 0: 0 records, 0 items\n"
        "2026-11-26 08:25:25,690 geops.app INFO batch 1 epoch 0: 2000 records, 2346 items\n")
    got = phases(text, 71.7)
    assert got["first_batch_at_s"] == 71.7
    assert got["streaming_at_s"] == pytest.approx(71.7 - 10.9, abs=0.05)
    assert got["static_at_s"] == pytest.approx(71.7 - 22.2, abs=0.05)
    assert got["router_at_s"] == pytest.approx(71.7 - 45.6, abs=0.05)
    assert phases(text, None)["static_at_s"] is None
    assert phases("nothing", 3.0) == dict.fromkeys(got)


def test_batch_rows():
    from bench.scale.calc import batch_rows
    rows = batch_rows([_batch(1, 100, 3_000, 500), _batch(0, 0, 2_000, 10)],
                      [{"batch_id": 1, "candidates": 7, "processing_ns": 9}], 1_000,
                      {"strategy": "sPIS"})
    assert [r["batch_id"] for r in rows] == [0, 1]
    assert rows[1] == {"strategy": "sPIS", "batch_id": 1, "epoch": None, "start_s": 2.0,
                       "end_s": 2.5, "records": 100, "items": None, "duration_ms": 500,
                       "job_ms": None, "write_ms": None, "candidates": 7, "processing_ns": 9}


def test_reference_with_the_same_batch_size():
    rows = [{"strategy": "sPIS", "subscriptions": "10000", "status": "ok", "records": "20000",
             "batches": "10", "throughput_busy": "100"},
            {"strategy": "sPIS", "subscriptions": "10000", "status": "ok", "records": "6000",
             "batches": "6", "throughput_busy": "80"},
            {"strategy": "sPIS", "subscriptions": "100000", "status": "ok", "records": "20000",
             "batches": "10", "throughput_busy": "50"},
            {"strategy": "sPIS", "subscriptions": "300000", "status": "ok", "records": "6000",
             "batches": "6", "throughput_busy": "40"},
            {"strategy": "sPIS", "subscriptions": "1000000", "status": "failed"}]
    out = relative_to_reference(rows, 10_000)
    assert [r["throughput_busy_rel"] for r in out[2:4]] == [0.5, 0.5]
    assert [r["reference_batch"] for r in out[2:]] == [2000, 1000, 1000]
