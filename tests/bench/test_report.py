"""The report: targets and claims computed from the CSVs (verdicts), and the README's sections."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from bench.paper import paper_report, verdicts
from bench.paper.figures import make_all


def _runs(points: dict[tuple[str, str, float], tuple[float, ...]]) -> list[dict[str, str]]:
    """runs.csv rows (as read back: strings) with the given throughput of each repeat."""
    rows = []
    for (pipeline, mode, skew), values in points.items():
        for repeat, thr in enumerate(values):
            rid = f"{pipeline}-{mode.replace(' ', '')}-s{round(skew * 100)}-r{repeat}"
            rows.append({"run_id": rid, "pipeline": pipeline, "mode": mode, "skew": str(skew),
                         "repeat": str(repeat), "throughput": str(thr),
                         "latency_mean_ms": str(1e6 / thr), "rebalances": "0"})
    return rows


KNOWN = _runs({
    ("sPS", "Static STAL", 0.5): (1000.0,),
    ("sPS", "Dynamic LB STAL", 0.5): (1600.0,),
    ("sPS", "Static STAL", 0.9): (900.0, 1100.0),         # mean 1000
    ("sPS", "Dynamic LB STAL", 0.9): (1400.0, 1600.0),    # mean 1500
    ("sPS", "Dynamic DB STAL", 0.9): (1600.0,),
    ("sPS", "Static STRL", 0.9): (500.0,),
    ("RIhPS", "Static STAL", 0.5): (800.0,),
    ("RIhPS", "Dynamic LB STAL", 0.5): (820.0,),
})


def _target(rows: list[dict], target: str, pipeline: str, comparison: str = "") -> dict:
    (row,) = [r for r in rows if r["target"] == target and r["pipeline"] == pipeline
              and comparison in r["comparison"]]
    return row


def test_targets_are_ratios_of_repeat_means() -> None:
    rows = verdicts.targets(KNOWN)
    gain = _target(rows, "gain at the highest skew", "sPS")
    assert (gain["skew"], gain["ratio"], gain["n"], gain["met"]) == (0.9, pytest.approx(1.5),
                                                                      2, True)
    stal = _target(rows, "STAL >= STRL at skew >= 0.7", "sPS", "Static STAL / Static STRL")
    assert (stal["ratio"], stal["n"], stal["met"]) == (pytest.approx(900 / 500), 1, True)


def test_targets_compare_only_the_repeats_both_points_have() -> None:
    """Repeat 1 exists at 0.9 only: it must not tilt a ratio against a one-repeat point."""
    rows = verdicts.targets(KNOWN)
    kept = _target(rows, "kept at the highest skew", "sPS")
    assert (kept["ratio"], kept["n"], kept["met"]) == (pytest.approx(1400 / 1600), 1, False)
    lb_db = _target(rows, "LB >= DB at skew >= 0.7", "sPS")
    assert (lb_db["ratio"], lb_db["n"], lb_db["met"]) == (pytest.approx(1400 / 1600), 1, False)


def test_kept_has_no_verdict_without_a_common_repeat() -> None:
    runs = _runs({("sPS", "Dynamic LB STAL", 0.5): (1000.0,)})
    runs += [{**r, "repeat": "1", "skew": "0.9", "run_id": r["run_id"] + "x"} for r in runs]
    kept = _target(verdicts.targets(runs), "kept at the highest skew", "sPS")
    assert (kept["ratio"], kept["n"], kept["met"]) == (None, 0, None)
    assert kept["note"] == "no repeat run at both skews"


def test_a_pipeline_run_only_balanced_has_no_verdict() -> None:
    rows = verdicts.targets(KNOWN)
    gain = _target(rows, "gain at the highest skew", "RIhPS")
    assert gain["ratio"] == pytest.approx(820 / 800)
    assert gain["met"] is None and "balanced" in gain["note"]


def test_missed_targets_say_by_how_much() -> None:
    lines = "\n".join(paper_report._target_lines(verdicts.targets(KNOWN)))
    assert "**missed** by 12%" in lines   # LB/DB 0.875 (repeat 0) against 1.0
    assert "n/a (only the balanced skew was run)" in lines
    close = paper_report._target_lines([verdicts._ratio_row("t", "sPS", 0.9, "a / b", (0.998, 2),
                                                      1.0)])
    assert "| 1.00 | 2 | >= 1.0 | **missed** by 0.2% |" in close[-2]


def test_claims_on_known_numbers() -> None:
    found = {c["claim"]: c for c in verdicts.claims(KNOWN, [], [])}
    best = found["Dynamic LB STAL has the highest throughput (every pipeline, skew)"]
    # sPS 0.5 and RIhPS 0.5 yes; sPS 0.9: DB STAL (1600) beats LB STAL (1500)
    assert best["verdict"] == "partly"
    assert "best at 2 of 3" in best["finding"] and "sPS 0.9: Dynamic DB STAL" in best["finding"]
    assert found["LB beats DB (throughput)"]["verdict"] == "does not hold"
    assert found["STAL beats STRL (throughput)"]["verdict"] == "holds"
    grows = found["Its gain over Static STAL grows with the skew"]
    assert grows["verdict"] == "does not hold"   # 1.6 at 0.5, 1.5 at 0.9
    assert "sPS 0.5: 1.60, 0.9: 1.50" in grows["finding"]
    assert found["Redistribution time grows with the static data size"]["verdict"] == (
        "no data")


def test_claims_compare_only_the_repeats_the_compared_points_have() -> None:
    """A slow extra repeat of one mode must not decide a claim against a one-repeat mode."""
    runs = _runs({
        ("sPS", "Static STAL", 0.5): (1000.0, 100.0),
        ("sPS", "Dynamic LB STAL", 0.5): (1100.0,),
        ("sPS", "Static STAL", 0.9): (1000.0, 100.0),
        ("sPS", "Dynamic LB STAL", 0.9): (1500.0,),
        ("sPS", "Dynamic DB STAL", 0.9): (1400.0, 5000.0),
        ("sPS", "Static STRL", 0.9): (900.0, 20.0),
    })
    found = {c["claim"]: c for c in verdicts.claims(runs, [], [])}
    best = found["Dynamic LB STAL has the highest throughput (every pipeline, skew)"]
    assert best["verdict"] == "holds" and "best at 2 of 2" in best["finding"]
    assert found["LB beats DB (throughput)"]["verdict"] == "holds"
    stal = found["STAL beats STRL (throughput)"]
    assert stal["verdict"] == "holds" and "higher at 1 of 1" in stal["finding"]
    grows = found["Its gain over Static STAL grows with the skew"]
    assert grows["verdict"] == "holds" and "sPS 0.5: 1.10, 0.9: 1.50" in grows["finding"]


def test_simulation_claims_on_known_numbers() -> None:
    """The simulated runs are judged by the same rules (simulation.csv has the same columns)."""
    found = {c["claim"]: c for c in verdicts.simulation_claims(KNOWN)}
    assert found["Dynamic LB STAL has the highest throughput"]["finding"].startswith(
        "best at 2 of 3; elsewhere sPS 0.9: Dynamic DB STAL")
    assert found["Its gain over Static STAL grows with the skew"]["finding"] == (
        "sPS 0.5: 1.60, 0.9: 1.50")
    assert found["LB beats DB"]["verdict"] == "does not hold"
    assert found["STAL beats STRL"] == {"claim": "STAL beats STRL", "finding": "higher at 1 of 1",
                                        "verdict": "holds"}

def test_a_missed_pair_names_its_repeats() -> None:
    runs = _runs({("sPS", "Static STAL", 0.9): (900.0, 1000.0),
                  ("sPS", "Static STRL", 0.9): (1000.0, 1100.0)})
    stal = next(c for c in verdicts.claims(runs, [], []) if c["claim"].startswith("STAL"))
    assert stal["finding"].endswith("sPS 0.9: Static STAL 950 vs Static STRL 1,050 (n=2)")


def _status(run_id: str, mldcs: list[float | None], rebalance_at: int | None) -> list[dict]:
    return [{"run_id": run_id, "period": str(k), "mldc": "" if m is None else str(m),
             "threshold": "0.5", "decision": "rebalance" if k == rebalance_at else "none"}
            for k, m in enumerate(mldcs)]


def test_rebalance_runs_are_classified_from_status() -> None:
    runs = [{"run_id": rid, "pipeline": "sPS", "mode": "Dynamic LB STAL", "skew": "0.9",
             "repeat": "0", "rebalances": str(n)}
            for rid, n in (("a", 1), ("b", 1), ("c", 2), ("d", 0), ("e", 0))]
    status = (_status("a", [None, 0.9, 0.3, 0.2], 1) + _status("b", [0.9, 0.3, 0.6], 0)
              + _status("c", [0.9, 0.8, 0.2], 0) + _status("d", [0.2, 0.3], None)
              + _status("e", [0.7, 0.8], None))
    reb = verdicts.rebalance_runs(runs, status)
    assert {r["run_id"]: r["first_rebalance_period"] for r in reb} == {
        "a": 1, "b": 0, "c": 0, "d": None, "e": None}
    kinds = {r["run_id"]: r["kind"] for r in reb}
    assert kinds == {"a": "one rebalance, then under", "b": "one rebalance, then over at times",
                     "c": "several rebalances", "d": "no rebalance needed",
                     "e": "no rebalance, MLDC went over"}
    claim = next(c for c in verdicts.claims(runs, status, []) if c["claim"].startswith("One"))
    assert claim["verdict"] == "partly" and "1 of 4" in claim["finding"]


def test_streaming_names_the_runs_under_the_minimum() -> None:
    runs = [{"run_id": f"r{i}", "first_start_ms": "1000", "last_end_ms": str(1000 + ms)}
            for i, ms in enumerate((61_000, 75_500, 130_000))]
    assert verdicts.streaming(runs) == (
        "The runs streamed 61–130 s each (median 76 s, first batch start to last batch end); "
        "every one at least the 60 s the full plan asks for.")
    runs[1]["last_end_ms"] = "42000"
    assert verdicts.streaming(runs).endswith(
        "1 under the 60 s the full plan asks for: r1 (41 s).")
    assert verdicts.streaming([]) == ""


def test_readme_has_every_section_figure_and_the_analysis(results: Path) -> None:
    make_all(results, log=lambda _: None)
    text = paper_report.write_report(results, log=lambda _: None).read_text()
    for heading in ("## Machine", "## How to reproduce", "## Targets",
                    "## The paper's claims and our findings", "## Figures",
                    "## Throughput (publications/s)", "## Mean latency (s)",
                    "## Trace-driven simulation at the paper's scale", "## Analysis"):
        assert heading in text
    for name in ("fig4_throughput", "fig5_latency", "fig6_throughput_time_sps",
                 "fig7_mldc_time", "fig8_redistribution"):
        assert f"({name}.png)" in text and f"[`{name}.csv`]({name}.csv)" in text
    assert "- CPUs: 2" in text and "`geops bench paper --full`" in text
    assert f"geops bench paper --full --out {results.as_posix()} " in text  # its own directory
    assert text.rstrip().endswith("The *lead* explains the numbers here.")
    assert "| sPS | 0.9 | Dynamic LB STAL / Static STAL | 1.77 | 2 | >= 1.4 | met |" in text
    assert "1,000 subscriptions: 0.25 s" in text
    # the throughput table: sPS Static STAL at skew 0.9 is 600 ± 5 over two repeats
    assert "| Static STAL | 1,000 ±5 (n=2) | 800 ±5 (n=2) | 600 ±5 (n=2) |" in text


def test_readme_links_the_compressed_tables(results: Path) -> None:
    """A table stored as .csv.gz is read and linked as such; the numbers do not change."""
    before = paper_report.render(results)
    path = results / "batches.csv"
    with open(path, "rb") as src, gzip.open(results / "batches.csv.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    after = paper_report.render(results)
    assert "- [`batches.csv.gz`](batches.csv.gz): one row per micro-batch" in after
    assert after == before.replace("[`batches.csv`](batches.csv)",
                                   "[`batches.csv.gz`](batches.csv.gz)")

def test_readme_from_an_empty_directory(tmp_path: Path) -> None:
    text = paper_report.write_report(tmp_path, log=lambda _: None).read_text()
    assert "No meta.json" in text and "Not computed: no pair of modes" in text
    assert "## Analysis" not in text


def test_first_period_ab_compares_each_first_period_with_static_stal() -> None:
    from bench.paper.plan import first_period_plan

    plan = first_period_plan(2, ("sPS",), (0.9,))
    assert [(s.mode, s.first_period) for s in plan[:3]] == [
        ("Static STAL", None), ("Dynamic LB STAL", "min-items"), ("Dynamic LB STAL", "full")]
    throughput = {"Static STAL": 1000.0, "min-items": 1500.0, "full": 1200.0}
    runs, batches = [], []
    for spec in plan:
        variant = spec.first_period or spec.mode
        runs.append({"run_id": spec.run_id, "pipeline": "sPS", "mode": spec.mode,
                     "skew": "0.9", "repeat": str(spec.repeat),
                     "throughput": str(throughput[variant])})
        switch_ms = {"min-items": 4000, "full": 14000 if spec.repeat == 0 else None}.get(variant)
        batches += [{"run_id": spec.run_id, "start_ms": str(1000 + t), "epoch": str(
            int(switch_ms is not None and t >= switch_ms))} for t in range(0, 20000, 2000)]
    runs.append(KNOWN[0])  # plan runs are not part of the A/B
    lines = paper_report.first_period_ab(runs, batches)
    row = next(line for line in lines if line.startswith("| sPS"))
    assert row == ("| sPS | 0.90 | 1,000 (n=2) | 1,500 (n=2) | 1.50 | 4.0 (2 of 2) | 1,200 (n=2) "
                   "| 1.20 | 14.0 (1 of 2) |")  # one full run never left epoch 0
    assert paper_report.first_period_ab(KNOWN, []) == []


def test_distributor_args_take_the_runs_first_period() -> None:
    from bench.paper.plan import first_period_plan
    from bench.paper.runner import DistributorSettings, distributor_args

    static, early, full = first_period_plan(1, ("sPS",), (0.9,))
    settings = DistributorSettings()
    assert distributor_args(static, settings)[-1] == "min-items"
    assert distributor_args(early, settings)[-1] == "min-items"
    assert distributor_args(full, settings)[-1] == "full"
    assert "observe" in distributor_args(static, settings)


def test_the_adaptive_mode_runs_the_self_tuning_distributor() -> None:
    from bench.paper.plan import ADAPTIVE, MODES, full_plan
    from bench.paper.runner import DistributorSettings, distributor_args

    assert ADAPTIVE not in MODES  # not one of the paper's six: only when asked for
    (spec,) = full_plan(1, ("sPIS",), (ADAPTIVE,), (0.7,))
    args = distributor_args(spec, DistributorSettings())
    assert spec.join == "STAL"
    assert args[args.index("--mode") + 1] == "adaptive"
    assert args[args.index("--metric") + 1] == "LB"
    (dynamic,) = full_plan(1, ("sPIS",), ("Dynamic DB STAL",), (0.7,))
    args = distributor_args(dynamic, DistributorSettings())
    assert args[args.index("--mode") + 1] == "dynamic"
    assert args[args.index("--metric") + 1] == "DB"


def test_coverage_names_what_the_full_plan_still_lacks() -> None:
    from bench.paper.plan import full_plan

    repeat0 = [{"run_id": s.run_id} for s in full_plan(1) if s.skew != 0.6]
    text = verdicts.coverage(repeat0)
    assert text.startswith("Of the full plan's 288 runs, 78 are recorded")
    assert "repeat 0: skew 0.6 (18 runs); repeat 1: all 96 runs; repeat 2: all 96 runs" in text
    everything = [{"run_id": s.run_id} for s in full_plan()]
    assert verdicts.coverage(everything) == "Of the full plan's 288 runs, 288 are recorded."
    assert verdicts.coverage(everything[1:]).endswith(
        "still to run: repeat 0: skew 0.5 (1 run).")
