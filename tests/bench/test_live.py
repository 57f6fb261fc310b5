"""`geops bench live`: its pure computations (fast), and one tiny run end to end (slow)."""

from __future__ import annotations

import csv
import lzma
from pathlib import Path

import numpy as np
import pytest

from bench.harness.batches import batch_cost
from bench.harness.encoding import encoded_geometry, match_event_time, publication_bytes
from bench.harness.latency import latency_summary, per_second
from bench.harness.monitor import lag_of
from bench.harness.procfs import descendants, memory_kb, parse_stat, role
from bench.live import calc
from bench.live.report import _backlog_md
from schemas import codec
from schemas.codec import HEADER_LEN
from tests.bench.conftest import assert_nothing_left, run_geops_bench

# -- latency ---------------------------------------------------------------------------------


def test_latency_summary_percentiles_and_empty():
    s = latency_summary(np.arange(1, 101, dtype=float))
    assert s["count"] == 100 and s["max"] == 100 and s["mean"] == 50.5
    assert s["p50"] == pytest.approx(50.5) and s["p99"] == pytest.approx(99.01)
    assert s["p95"] == pytest.approx(95.05)
    assert latency_summary([]) == {"count": 0, "p50": None, "p95": None, "p99": None,
                                        "max": None, "mean": None}


def test_per_second_groups_by_time():
    times = np.array([1000, 1500, 2100, 4000])
    rows = per_second(times, np.array([10.0, 30.0, 5.0, 7.0]), t0_ms=1000, seconds=3)
    assert [r["count"] for r in rows] == [2, 1, 0]
    assert rows[0]["max"] == 30 and rows[2]["p50"] is None


def test_rebalance_windows_and_their_latency():
    bounds = calc.rebalance_windows(0, 60_000, command_ms=20_000, moved_ms=22_000)
    assert bounds == [("before", 0, 20_000), ("during", 20_000, 27_000),
                      ("after", 27_000, 60_000)]
    assert calc.rebalance_windows(0, 10_000, None, None) == [("no rebalance", 0, 10_000)]
    # a move reported near the end: "during" stops at the end
    assert calc.rebalance_windows(0, 10_000, 8_000, 9_000)[1] == ("during", 8_000, 10_000)
    ev = np.array([1_000, 21_000, 26_000, 30_000])
    rows = calc.windows(ev, np.array([100.0, 900.0, 800.0, 120.0]), bounds)
    assert [(r["window"], r["count"], r["max"]) for r in rows] == [
        ("before", 1, 100), ("during", 2, 900), ("after", 1, 120)]
    assert rows[1]["seconds"] == 7


# -- lag and the verdict ---------------------------------------------------------------------


def test_lag_is_topic_end_minus_batch_end_never_negative():
    assert lag_of({0: 100, 1: 50, 2: 10}, {"0": 90, "1": 60}) == 10 + 0 + 10
    assert lag_of({0: 5}, {}) == 5


def test_bounded_lag_is_sustainable():
    # a sawtooth around 1 s of input, no trend
    samples = [(t, 800 + (t % 2) * 400) for t in range(21)]
    v = calc.judge_step(1000, 20, samples, processed=20_000)
    assert v.sustainable, v.reason
    assert v.achieved == 1000
    assert "sustainable" in v.line()


def test_growing_lag_is_unsustainable():
    # the app processes 80 % of 1,000/s: lag grows 200/s, 2 s of input over the second half
    samples = [(t, 200 * t) for t in range(21)]
    v = calc.judge_step(1000, 20, samples)
    assert not v.sustainable
    assert v.growth == pytest.approx(2000)
    assert "grew" in v.reason


def test_large_but_flat_lag_is_unsustainable():
    samples = [(t, 9000) for t in range(21)]
    v = calc.judge_step(1000, 20, samples, max_lag_s=5)
    assert not v.sustainable and "lag 9.0 s" in v.reason


def test_unknown_lag_is_unsustainable():
    v = calc.judge_step(1000, 20, [(1, None), (2, None)])
    assert not v.sustainable and v.end_lag is None and "unknown" in v.reason


# -- the search ------------------------------------------------------------------------------


def _run_search(capacity: float, **kw) -> calc.RateSearch:
    rs = calc.RateSearch(**kw)
    while (rate := rs.next_rate()) is not None:
        rs.record(calc.Verdict(rate, rate <= capacity, 0, 0, None, ""))
    return rs


def test_search_doubles_then_bisects():
    rs = _run_search(5000, start=500, bisections=3)
    rates = [v.rate for v in rs.history]
    assert rates[:5] == [500, 1000, 2000, 4000, 8000]
    assert rates[5:] == [6000, 5000, 5500]
    assert rs.best == 5000


def test_search_halves_when_the_first_rate_fails():
    rs = _run_search(300, start=1000, bisections=2)
    assert [v.rate for v in rs.history][:3] == [1000, 500, 250]
    assert 250 <= rs.best <= 300


def test_search_gives_up_below_min_rate():
    rs = _run_search(1, start=100, bisections=2, min_rate=25)
    assert rs.best is None
    assert all(v.rate >= 25 for v in rs.history)


def test_search_with_no_bisection_and_a_ceiling():
    assert _run_search(3000, start=500, bisections=0).best == 2000
    assert _run_search(1e9, start=500, bisections=2, max_rate=4000).best == 4000


def test_drain_rate_spans_the_batches_with_records():
    batches = [{"records": 0, "start_time": 0, "end_time": 400},
               {"records": 3000, "start_time": 500, "end_time": 1500},
               {"records": 1000, "start_time": 1500, "end_time": 2500}]
    assert calc.drain_rate(batches) == 4000 / 2.0
    assert calc.drain_rate(batches[:1]) == 0.0


def test_backlog_line_names_the_producer_only_after_a_search():
    backlog = {"rate": 10_000.0, "records": 100_000, "batches": 2}
    given = " ".join(_backlog_md(7_000, backlog, None))
    assert "= 0.70**" in given and "producer" not in given
    searched = " ".join(_backlog_md(7_000, backlog, 0.25))
    assert "used 25% of a core during the search" in searched
    assert _backlog_md(7_000, None, None) == []


def test_nice_rate():
    assert calc.nice_rate(1234) == 1200
    assert calc.nice_rate(75) == 75
    assert calc.nice_rate(5500) == 5500
    assert calc.nice_rate(0) == 0


# -- memory ----------------------------------------------------------------------------------


def test_growth_first_vs_last_fifth():
    g = calc.growth([100, 100, 110, 120, 100, 100, 100, 100, 120, 120])
    assert g == {"first": 100, "last": 120, "growth": pytest.approx(0.2)}
    assert calc.growth([])["growth"] is None
    assert calc.growth([5.0])["growth"] == 0


def test_proc_parsing_and_the_tree():
    status = "Name:\tjava\nVmPeak:\t 999 kB\nVmRSS:\t  123456 kB\nThreads: 3\n"
    assert memory_kb(status) == (123456, 0)
    assert memory_kb("Name:\tkworker\n") == (0, 0)
    assert parse_stat("42 (a b) c) S 7 42 42 0") == (42, 7)
    parents = {1: 0, 10: 1, 11: 10, 12: 11, 13: 11, 20: 1}
    assert sorted(descendants(10, parents)) == [10, 11, 12, 13]
    assert role("/usr/lib/jvm/bin/java -cp x org.apache.spark.deploy.SparkSubmit",
                     "x") == "app-jvm"
    assert role("/venv/bin/python -m pyspark.daemon", "x") == "app-python-workers"
    assert role("/venv/bin/python -m cli.main app", "app-launcher") == "app-launcher"


# -- encoding --------------------------------------------------------------------------------


@pytest.mark.parametrize("pid,event", [(0, 0), (1, 1_795_000_000_000), (13_000_000_007, 5),
                                       (-3, 2**40)])
def test_publication_bytes_equal_the_codec(pid, event):
    c = codec()
    wkb = bytes(range(21)) * 3
    got = publication_bytes(c.header("Publication"), pid, encoded_geometry(wkb),
                                 event)
    assert got == c.encode("Publication", {"id": pid, "geometry": wkb, "event_time": event})
    assert c.decode(got)[1] == {"id": pid, "geometry": wkb, "event_time": event,
                                "object_id": None}


@pytest.mark.parametrize("subs", [[], [1], list(range(0, 5000, 7))])
def test_match_event_time_reads_past_the_array(subs):
    c = codec()
    value = c.encode("Match", {"publication_id": 99, "subscription_ids": subs,
                               "event_time": 1_795_000_000_123, "match_time": 1,
                               "batch_id": 4, "app_id": "a"})
    assert match_event_time(value, HEADER_LEN) == 1_795_000_000_123


# -- end to end ------------------------------------------------------------------------------


def test_batch_cost_fits_a_line_only_over_a_spread_of_sizes():
    batches = [{"records": n, "duration_ms": 120 + 0.1 * n} for n in (200, 400, 2000, 8000)]
    batches.append({"records": 0, "duration_ms": 5})  # an empty batch is no evidence
    cost = batch_cost(batches)
    assert cost["batches"] == 4 and cost["small_batches"] == 3
    assert cost["fixed_ms"] == pytest.approx(120) and cost["us_per_record"] == pytest.approx(100)
    assert cost["small_median_ms"] == pytest.approx(160) and cost["small_median_records"] == 400
    narrow = batch_cost([{"records": n, "duration_ms": 300 - n / 10} for n in (500, 600, 700)])
    assert narrow["fixed_ms"] is None and narrow["small_median_ms"] == pytest.approx(240)
    assert batch_cost([])["fixed_ms"] is None


@pytest.mark.integration
@pytest.mark.slow
def test_tiny_live_bench_end_to_end(tmp_path: Path):
    result, out, work = run_geops_bench(
        tmp_path, "live", "--subscriptions", "300", "--pool", "2000", "--step", "4s",
        "--bisections", "1", "--start-rate", "1000", "--duration", "4s", "--levels", "50,90",
        "--backlog", "4000", "--rates", "300", "--idle", "2s")
    assert "search step 1" in result.stderr and "maximum sustainable rate" in result.stderr
    assert "maximum sustainable rate / backlog throughput:" in result.stderr
    for name in ("README.md", "search.csv", "latency.csv", "timeline.csv", "batches.csv",
                 "latency_raw.csv.xz", "latency_vs_load.png", "timeline.png"):
        assert (out / name).stat().st_size > 0, name
    with open(out / "latency.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["level"] for r in rows] == ["0.5", "0.9", ""]
    assert rows[2]["label"] == "300/s" and float(rows[2]["offered_rate"]) == 300
    assert all(int(r["matched"]) > 0 and float(r["p99_ms"]) > 0 for r in rows)
    with open(out / "search.csv") as fh:
        steps = list(csv.DictReader(fh))
    assert len(steps) >= 2 and any(s["sustainable"] == "True" for s in steps)
    with lzma.open(out / "latency_raw.csv.xz", "rt") as fh:
        raw = list(csv.DictReader(fh))
    assert len(raw) == sum(int(r["matched"]) for r in rows)
    assert all(int(r["latency_ms"]) >= 0 for r in raw[:1000])
    readme = (out / "README.md").read_text()
    assert "Maximum sustainable rate" in readme and "geops bench live" in readme
    assert "maximum sustainable rate / backlog throughput = " in readme
    assert "**Cost of a batch**" in readme and "**Idle** for " in readme
    assert "idle for " in result.stderr and "of a core" in result.stderr
    assert_nothing_left(work)  # everything it started is gone


def test_visible_time_is_the_summary_of_the_batch_that_wrote_the_match():
    import numpy as np

    from bench.delivery.run import visible_times

    batches = [{"end_time": 100, "seen_ms": 130}, {"end_time": 200, "seen_ms": 260},
               {"end_time": 300}]  # the last one was not seen: never a match's batch here
    got = visible_times(np.array([90, 100, 101, 199]), batches)
    assert got.tolist() == [130, 130, 260, 260]
