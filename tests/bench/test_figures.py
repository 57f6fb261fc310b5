"""Figures from a synthetic results directory: files written, numbers behind them, skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.harness.csv_tables import read_rows, write_csv
from bench.paper import figures

NAMES = ("fig4_throughput", "fig5_latency", "fig6_throughput_time_sps", "fig7_mldc_time",
         "fig8_redistribution", "fig9_simulation")


def _simulation(out: Path) -> None:
    rows, periods = [], []
    for mode, thr in (("Static STAL", 100.0), ("Dynamic LB STAL", 150.0)):
        for skew in (0.3, 0.7):
            for repeat in (0, 1):
                rows.append({"pipeline": "sPIS", "mode": mode, "skew": skew,
                             "repeat": repeat, "throughput": thr - 50 * skew + repeat,
                             "rebalances": int(mode != "Static STAL")})
                periods += [{"pipeline": "sPIS", "mode": mode, "skew": skew, "repeat": repeat,
                             "period": k, "time_s": 10.0 * (k + 1), "epoch": 0,
                             "mldc": 1.0 if k == 0 or mode == "Static STAL" else 0.2,
                             "threshold": 0.5, "decision": "none"} for k in range(4)]
    write_csv(out / "simulation.csv", rows)
    write_csv(out / "simulation_mldc.csv", periods)


def test_every_figure_and_its_csv_from_a_full_fixture(results: Path) -> None:
    _simulation(results)
    notes: list[str] = []
    written = figures.make_all(results, log=notes.append)
    assert [p.name for p in written] == [f"{n}.png" for n in NAMES]
    for name in NAMES:
        assert (results / f"{name}.png").stat().st_size > 10_000
        assert read_rows(results / f"{name}.csv"), name
    assert not any("skipped" in n for n in notes)


def test_fig4_is_the_mean_and_range_of_plan_runs_only(results: Path) -> None:
    figures.fig4_throughput(results, log=lambda _: None)
    table = read_rows(results / "fig4_throughput.csv")
    point = next(r for r in table if r["pipeline"] == "sPS" and r["mode"] == "Dynamic LB STAL"
                 and float(r["skew"]) == 0.7)
    # conftest: 1100 - 2 * 10, repeats at -5 and +5; the Fig. 8 runs (900/s) are left out
    assert int(point["n"]) == 2
    assert float(point["throughput_mean"]) == pytest.approx(1080)
    assert (float(point["throughput_min"]), float(point["throughput_max"])) == (1075, 1085)


def test_fig8_groups_the_forced_moves_by_static_size(results: Path) -> None:
    figures.fig8_redistribution(results, log=lambda _: None)
    table = read_rows(results / "fig8_redistribution.csv")
    assert [int(r["subscriptions"]) for r in table] == [1_000, 10_000, 100_000]
    assert [float(r["duration_s_mean"]) for r in table] == pytest.approx([0.25, 1.05, 6.05])
    assert {r["source"] for r in table} == {"forced moves"}
    assert float(table[0]["mb_moved_mean"]) == pytest.approx(0.3)


def test_fig6_mean_line_is_records_over_batch_time(results: Path) -> None:
    figures.fig6_throughput_time_sps(results, log=lambda _: None)
    rows = [r for r in read_rows(results / "fig6_throughput_time_sps.csv")
            if r["run_id"] == "sPS-StaticSTAL-s90-r0"]
    assert len(rows) == 3
    total = sum(2000 / float(r["throughput"]) for r in rows)
    assert float(rows[0]["mean_throughput"]) == pytest.approx(6000 / total)


def test_quick_data_skips_what_it_lacks(make_results, tmp_path: Path) -> None:
    out = make_results(tmp_path / "quick", pipelines=("sPIS",),
                       modes=("Static STAL", "Dynamic LB STAL"), skews=(0.5, 0.9),
                       with_moves=False)
    notes: list[str] = []
    written = figures.make_all(out, log=notes.append)
    assert [p.name for p in written] == ["fig4_throughput.png", "fig5_latency.png"]
    assert sum("skipped" in n for n in notes) == 4


def test_an_empty_directory_draws_nothing(tmp_path: Path) -> None:
    notes: list[str] = []
    assert figures.make_all(tmp_path, log=notes.append) == []
    assert len(notes) == len(NAMES)

