"""`geops bench churn`: its pure computations (fast), the command line, and one tiny run end to
end (slow)."""

from __future__ import annotations

import csv
import lzma
from pathlib import Path

import numpy as np
import pytest

from bench.churn import calc
from bench.churn.calc import NEW, TOMBSTONE, UPDATE
from bench.harness.batches import window_throughput
from bench.harness.encoding import encoded_geometry
from bench.harness.procfs import cpu_ticks
from schemas import codec
from schemas.records import relation_symbols
from tests.bench.conftest import assert_nothing_left, run_geops_bench

RELATIONS = (0, 1, 2, 5)

# -- the mix of changes ----------------------------------------------------------------------


def test_mix_follows_its_live_set_and_keeps_its_size():
    live = {i: 5 for i in range(100)}
    mix = calc.ChangeMix(live, n_geoms=7, relations=RELATIONS, seed=1)
    mine = dict(live)
    for _ in range(20_000):
        op, sid, geom, rel = mix.next()
        if op == NEW:
            assert sid not in mine and 0 <= geom < 7 and rel in RELATIONS
            mine[sid] = rel
        elif op == UPDATE:
            assert sid in mine and rel in RELATIONS and rel != mine[sid]
            mine[sid] = rel
        else:
            assert op == TOMBSTONE and sid in mine and (geom, rel) == (-1, -1)
            del mine[sid]
    assert set(mix.ids) == set(mine) and mix.relation == mine
    assert sum(mix.counts) == 20_000
    shares = np.array(mix.counts) / 20_000
    assert shares == pytest.approx([0.25, 0.5, 0.25], abs=0.02)
    assert abs(len(mix) - 100) < 400  # a random walk around its start, never negative


def test_mix_new_ids_never_reuse_an_id_and_geometries_cycle():
    mix = calc.ChangeMix({3: 0, 10: 1}, n_geoms=3, relations=RELATIONS,
                               shares=(1, 0, 0))
    got = [mix.next() for _ in range(5)]
    assert [g[1] for g in got] == [11, 12, 13, 14, 15]
    assert [g[2] for g in got] == [0, 1, 2, 0, 1]


def test_mix_with_no_live_id_writes_new_ones_and_is_deterministic():
    mix = calc.ChangeMix({}, n_geoms=2, relations=RELATIONS, shares=(0, 1, 1), seed=3)
    assert mix.next()[0] == NEW  # nothing to update or remove yet
    a, b = (calc.ChangeMix({i: 0 for i in range(9)}, 4, RELATIONS, seed=9)
            for _ in range(2))
    assert [a.next() for _ in range(50)] == [b.next() for _ in range(50)]
    with pytest.raises(ValueError):
        calc.ChangeMix({}, 2, RELATIONS, shares=(0, 0, 0))


@pytest.mark.parametrize("sid,rel", [(0, 0), (7, 8), (13_000_000_007, 5), (-2, 3)])
def test_subscription_bytes_equal_the_codec(sid, rel):
    c = codec()
    wkb = bytes(range(33)) * 2
    got = calc.subscription_bytes(c.header("Subscription"), sid,
                                        encoded_geometry(wkb), rel)
    record = {"id": sid, "geometry": wkb, "relation": relation_symbols()[rel]}
    assert got == c.encode("Subscription", record)
    assert c.decode(got)[1] == {**record, "detect": [], "distance_m": None, "roam": None}


# -- the plan --------------------------------------------------------------------------------


def test_odd_rounds_run_the_levels_in_reverse():
    assert calc.level_order([0, 100, 1000], 3) == [
        (0, 0), (0, 100), (0, 1000), (1, 1000), (1, 100), (1, 0), (2, 0), (2, 100),
        (2, 1000)]
    assert calc.level_order([0, 5], 1) == [(0, 0), (0, 5)]


# -- throughput over a window ----------------------------------------------------------------


def _b(bid, start, end, records=0, duration=None, offsets=None):
    return {"batch_id": bid, "start_time": start, "end_time": end, "records": records,
            "duration_ms": end - start if duration is None else duration,
            "subscription_offsets": {} if offsets is None else offsets}


def test_window_throughput_counts_the_batches_that_ended_in_it():
    batches = [_b(0, 0, 400, 100), _b(1, 500, 900, 200), _b(2, 1000, 1300, 300),
               _b(3, 1900, 2100, 999)]
    w = window_throughput(batches, 0, 2000)
    assert w["batches"] == 3 and w["records"] == 600
    assert w["processed_rate"] == 300          # 600 in 2 s
    assert w["busy_s"] == pytest.approx(1.1) and w["busy_share"] == pytest.approx(1.1 / 2)
    assert w["per_busy_s"] == pytest.approx(600 / 1.1)
    assert w["batch_ms_mean"] == pytest.approx(1100 / 3)
    empty = window_throughput([], 0, 1000)
    assert empty["records"] == 0 and empty["per_busy_s"] is None


# -- time to effect --------------------------------------------------------------------------


def test_a_change_takes_effect_in_the_first_batch_whose_offsets_exceed_it():
    batches = [_b(0, 1000, 1200, offsets={"0": 10}), _b(1, 1500, 1700, offsets={"0": 10}),
               _b(2, 2000, 2300, offsets={"0": 13}), _b(3, 2500, 2600, offsets={"0": 14})]
    written = np.array([900, 1100, 1600, 1990, 2450, 2700])
    offsets = np.array([9, 10, 11, 12, 13, 14])
    e = calc.time_to_effect(written, np.zeros(6, int), offsets, batches)
    assert e.effect_ms[:5].tolist() == [1000, 2000, 2000, 2000, 2500]
    assert np.isnan(e.effect_ms[5]) and e.censored == 1
    # batches started after the write, up to the effect one: next batch = 1
    assert e.batches[:5].tolist() == [1, 2, 1, 1, 1]
    s = calc.effect_summary(written, e, trigger_ms=500)
    assert s["changes"] == 6 and s["effective"] == 5 and s["censored"] == 1
    ms = np.array([100, 900, 400, 10, 50], float)
    assert s["tte_p50_ms"] == pytest.approx(np.percentile(ms, 50))
    assert s["tte_p99_triggers"] == pytest.approx(np.percentile(ms, 99) / 500)
    assert s["tte_max_batches"] == 2


def test_a_batch_that_read_the_change_after_stamping_its_start_counts_as_zero_batches():
    batches = [_b(0, 1000, 1200, offsets={"0": 5})]
    e = calc.time_to_effect(np.array([1003]), np.array([0]), np.array([4]), batches)
    assert e.effect_ms.tolist() == [1000] and e.batches.tolist() == [0]
    s = calc.effect_summary(np.array([1003]), e, 500)
    assert s["tte_p50_ms"] == -3


def test_time_to_effect_per_partition_replays_and_unknown_offsets():
    batches = [_b(0, 100, 150, offsets={"0": 3, "1": 0}),
               _b(1, 200, 250, offsets={"0": 3, "1": 2}),
               _b(1, 260, 300, offsets={"0": 3, "1": 2}),   # a replay: the first start counts
               _b(2, 400, 450, offsets={}),                  # not known: no effect, no regress
               _b(3, 500, 550, offsets={"0": 4, "1": 2})]
    e = calc.time_to_effect(np.array([50, 60, 70, 300]), np.array([0, 1, 1, 0]),
                                  np.array([2, 1, 2, 3]), batches)
    assert e.effect_ms[:2].tolist() == [100, 200] and np.isnan(e.effect_ms[2])
    assert e.effect_ms[3] == 500 and e.batches[3] == 2
    assert len(calc.batch_table(batches)) == 4
    none = calc.time_to_effect(np.array([1]), np.array([0]), np.array([0]), [])
    assert none.censored == 1


# -- ratios to the level without changes -----------------------------------------------------


def test_ratios_are_of_round_means_to_the_same_cells_zero_level():
    rows = []
    for rnd, (zero, thousand) in enumerate(((1000, 900), (1100, 1000))):
        for rate, thr in ((0, zero), (1000, thousand)):
            rows.append({"strategy": "sPIS", "join": "STAL", "round": rnd,
                         "change_rate": rate, "processed_rate": thr,
                         "per_busy_s": 2 * thr, "p99_ms": None})
    rows.append({"strategy": "RIsPS", "join": "STAL", "round": 0, "change_rate": 1000,
                 "processed_rate": 5, "per_busy_s": None, "p99_ms": 1.0})
    out = calc.with_ratios(rows, ("processed_rate", "per_busy_s", "p99_ms"))
    by = {(r["strategy"], r["change_rate"]): r for r in out}
    assert by[("sPIS", 0)]["processed_rate"] == 1050 and by[("sPIS", 0)]["rounds"] == 2
    assert by[("sPIS", 1000)]["throughput_ratio"] == pytest.approx(950 / 1050)
    assert by[("sPIS", 1000)]["capacity_ratio"] == pytest.approx(950 / 1050)
    assert by[("sPIS", 0)]["throughput_ratio"] == 1 and by[("sPIS", 0)]["p99_ms"] is None
    # no level without changes in that cell: no ratio
    assert by[("RIsPS", 1000)]["throughput_ratio"] is None
    assert by[("RIsPS", 1000)]["capacity_ratio"] is None


# -- the command line ------------------------------------------------------------------------


def _spec(*argv: str):
    from cli.bench_churn import build_spec
    from cli.main import build_parser

    return build_spec(build_parser().parse_args(["bench", "churn", *argv]))


def test_the_command_line_builds_the_cells_and_levels():
    spec = _spec("--strategies", "sPIS", "--joins", "STAL,STRL", "--change-rates",
                 "0,100,100", "--duration", "20s", "--tail", "2s", "--trigger", "250ms")
    assert spec.cells == (("sPIS", "STAL"), ("sPIS", "STRL"))
    assert spec.change_rates == (0, 100) and spec.window_s == 18 and spec.trigger_ms == 250
    assert spec.warmup_s == 30 and _spec("--warmup", "0").warmup_s == 0
    d = _spec()
    assert d.cells == (("sPIS", "STAL"), ("sPIS", "STRL"), ("RIsPS", "STAL"),
                       ("RIsPS", "STRL"))
    assert d.change_rates == (0, 100, 1000, 10000) and d.mix == (25, 50, 25)


@pytest.mark.parametrize("argv", [("--strategies", "nope"), ("--joins", ""),
                                  ("--change-rates", "100,1000"), ("--mix", "1,2"),
                                  ("--tail", "60s"), ("--rounds", "0")])
def test_the_command_line_rejects(argv):
    from cli.errors import CommandError

    with pytest.raises(CommandError):
        _spec(*argv)


# -- end to end ------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.slow
def test_tiny_churn_bench_end_to_end(tmp_path: Path):
    _, out, work = run_geops_bench(
        tmp_path, "churn", "--strategies", "sPIS", "--joins", "STAL", "--subscriptions", "300",
        "--pool", "2000", "--rate", "300", "--change-rates", "0,200", "--duration", "5s",
        "--tail", "2s", "--rounds", "1", "--partitions", "8", "--warmup", "3s", timeout=240)
    for name in ("README.md", "churn.csv", "levels.csv", "batches.csv", "timeline.csv",
                 "effects_raw.csv.xz", "churn.png", "effect_cdf.png"):
        assert (out / name).stat().st_size > 0, name
    with open(out / "churn.csv") as fh:
        rows = {float(r["change_rate"]): r for r in csv.DictReader(fh)}
    assert set(rows) == {0.0, 200.0}
    assert float(rows[0.0]["throughput_ratio"]) == 1
    assert all(float(r["processed_rate"]) > 0 and float(r["p99_ms"]) > 0
               for r in rows.values())
    changed = rows[200.0]
    assert int(changed["effective"]) > 0 and float(changed["tte_p99_ms"]) > 0
    with lzma.open(out / "effects_raw.csv.xz", "rt") as fh:
        effects = list(csv.DictReader(fh))
    assert len(effects) == int(changed["changes"]) > 400  # 200/s for 3 s
    readme = (out / "README.md").read_text()
    assert "geops bench churn" in readme and "Targets" in readme
    assert_nothing_left(work)


# -- the report, from synthetic levels -------------------------------------------------------


def _level(strategy: str, rnd: int, rate: float, per_batch: int, t0: int = 1_000_000):
    from bench.churn.run import ChangeRun, Level
    from bench.harness.phase import PhaseResult
    from bench.harness.publisher import Offer, Paced

    batches = [dict(_b(i, t0 + 500 * i, t0 + 500 * i + 200, per_batch,
                       offsets={"0": 10 * (i + 1)}), epoch=0) for i in range(20)]
    offer = Offer(900, 10, 1_000, 9000, t0, t0 + 10_000, np.full(11, 900))
    ev = np.arange(t0, t0 + 10_000, 10)
    phase = PhaseResult("x", "500ms", None, offer, [], batches, np.arange(len(ev)), ev,
                        ev + 300 + rate / 10, 0.5, load=2.0)
    changes = None
    if rate:
        written = np.arange(t0, t0 + 9_000, 100)
        changes = ChangeRun(rate, Paced(len(written), t0, t0 + 9_000, np.zeros(10)), written,
                            np.zeros(len(written), int), np.arange(len(written)), (1, 2, 1))
    lv = Level(strategy, "STAL", rnd, rate, phase, changes, (t0, t0 + 9_000),
               {"app": 9.0 + rate / 1000, "broker": 1.0})
    if changes is not None:
        lv.effect = calc.time_to_effect(changes.written_ms, changes.partitions,
                                              changes.offsets, batches)
    return lv


def test_the_report_writes_its_files_and_reports_the_targets(tmp_path: Path):
    from bench.churn import report
    from bench.churn.run import ChurnSpec

    levels = [_level(s, r, rate, 450 - int(rate / 100)) for s in ("sPIS", "RIsPS")
              for r in (0, 1) for rate in (0.0, 1000.0)]
    spec = ChurnSpec(out=tmp_path, cells=(("sPIS", "STAL"), ("RIsPS", "STAL")),
                     change_rates=(0.0, 1000.0), duration_s=10, tail_s=1, rounds=2,
                     command=("geops", "bench", "churn"))
    lines = []
    report.write(spec, levels, lines.append)
    for name in ("README.md", "churn.csv", "levels.csv", "batches.csv", "timeline.csv",
                 "effects_raw.csv.xz", "churn.png", "effect_cdf.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    with open(tmp_path / "churn.csv") as fh:
        rows = {(r["strategy"], float(r["change_rate"])): r for r in csv.DictReader(fh)}
    r = rows[("sPIS", 1000.0)]
    assert float(r["throughput_ratio"]) == pytest.approx(440 / 450, rel=1e-3)
    assert int(r["changes"]) == 180 and int(r["censored"]) == 0
    assert float(r["cpu_ratio"]) == pytest.approx(9 / 10)       # 9,000 pubs in 9 s vs 10 s
    assert float(r["app_cpu_ms_per_1k"]) == pytest.approx(10_000 / 9, rel=1e-5)
    readme = (tmp_path / "README.md").read_text()
    assert "geops bench churn" in readme and "0.978 of 0 changes/s" in readme
    assert "**met**" in readme
    # the throughput line says what the app did at 0 changes/s: a ratio of offered rates is
    # no throughput
    assert "it processed 900 of 900 pub/s offered: the cost in throughput only where" in readme
    with lzma.open(tmp_path / "effects_raw.csv.xz", "rt") as fh:
        assert len(list(csv.DictReader(fh))) == 4 * 90


def test_cpu_ticks_of_a_proc_stat_line_and_the_cpu_use():
    line = "42 (a b) c) S 7 42 42 0 -1 4194304 99 0 0 0 120 30 5 6 20 0 1 0 597107"
    assert cpu_ticks(line) == 120 + 30 + 5 + 6
    u = calc.cpu_use(9000, 4.5, 1.0)
    assert u["pub_per_cpu_s"] == 2000 and u["app_cpu_ms_per_1k"] == 500
    assert calc.cpu_use(0, 0.0, 0.0)["pub_per_cpu_s"] is None
