"""The results README: machine, commands, figures, tables, targets and the paper's claims, as
Markdown.

Every number printed is computed from the CSVs of the results directory (the verdicts by
``bench.paper.verdicts``); explanations are not invented: the hand-written ``analysis.md`` of the
results directory, when it exists, is included verbatim.
"""

from __future__ import annotations

import json
import math
import shlex
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.harness.csv_tables import Row, csv_number, read_rows, stored
from bench.harness.tables import cell, of_values
from bench.paper import simulate
from bench.paper.breakdown import gain_breakdown
from bench.paper.plan import BALANCED, FIRST_PERIODS
from bench.paper.results import mode_order, pipeline_order, plan_runs, point_table
from bench.paper.verdicts import (
    GAIN_REQUIRED,
    HIGH_SKEW,
    KEEP_REQUIRED,
    claims,
    coverage,
    first_period_points,
    rebalance_runs,
    simulation_claims,
    streaming,
    targets,
)

FIGURES = (
    ("fig4_throughput", "Fig. 4: throughput vs skew coefficient, per pipeline and mode"),
    ("fig5_latency", "Fig. 5: latency (mean, p99) vs skew coefficient"),
    ("fig6_throughput_time_sps", "Fig. 6: sPS throughput per batch over time"),
    ("fig7_mldc_time", "Fig. 7: sPS MLDC per distributor period over time"),
    ("fig8_redistribution", "Fig. 8: redistribution time vs static data size (sPS, skew 0.7)"),
    ("fig9_simulation", "Fig. 9: trace-driven simulation at the paper's scale (W = 16, 3 hot)"),
)
TABLES = (
    ("runs.csv", "one row per run: throughput, latency, skew seen, rebalances"),
    ("batches.csv", "one row per micro-batch: duration, join stage, job and write time"),
    ("loads.csv", "per batch and static partition: items and processing time (LB/DB load)"),
    ("status.csv", "the distributor's status per period: MLDC, threshold, decision"),
    ("moves.csv", "every applied redistribution: partitions and bytes moved, duration"),
    ("simulation.csv", "simulated throughput and rebalances per pipeline, mode, skew, repeat"),
    ("simulation_mldc.csv", "simulated distributor statuses (MLDC per period)"),
    ("simulation_costs.csv", "the simulation's cost model, per pipeline and repeat"),
    ("simulation_check.csv", "the cost model's prediction of each physical run vs measured"),
)


# -- Markdown -----------------------------------------------------------------------------------


def _cell(row: dict[str, Any], column: str, scale: float, digits: int) -> str:
    mean = row[f"{column}_mean"]
    if math.isnan(mean):
        return "–"
    half = (row[f"{column}_max"] - row[f"{column}_min"]) * scale / 2
    return f"{mean * scale:,.{digits}f} ±{half:,.{digits}f} (n={row['n']})"


def _grid(rows: Iterable[Row], column: str, scale: float = 1.0, digits: int = 0) -> list[str]:
    """Per pipeline, a mode x skew table of ``column`` (mean ± half the min-max range, n)."""
    table = point_table(rows, [column])
    lines: list[str] = []
    for pipe in pipeline_order(r["pipeline"] for r in table):
        own = [r for r in table if r["pipeline"] == pipe]
        skews = sorted({r["skew"] for r in own})
        cells = {(r["mode"], r["skew"]): r for r in own}
        lines.append(f"**{pipe}**")
        lines.append("")
        lines += of_values(["mode", *[f"skew {s}" for s in skews]],
                           [[m, *[_cell(cells[(m, s)], column, scale, digits) if (m, s) in cells
                                  else "–" for s in skews]]
                            for m in mode_order(r["mode"] for r in own)])
    return lines


def _machine(results_dir: Path) -> list[str]:
    path = results_dir / "meta.json"
    if not path.exists():
        return ["No meta.json in this directory: the machine is not recorded.", ""]
    meta = json.loads(path.read_text())
    m = meta.get("machine", {})
    lines = [f"- CPUs: {m.get('cpus', '?')}", f"- platform: {m.get('platform', '?')}",
             f"- Python {m.get('python', '?')}, PySpark {m.get('pyspark', '?')}, "
             f"Java: {m.get('java', '?')}", f"- started: {m.get('date', '?')}"]
    if meta.get("commands"):
        lines.append("- commands that produced these results (in order):")
        lines += [f"  - `{shlex.join(str(a) for a in c['command'])}` ({c['date']})"
                  for c in meta["commands"]]
    if meta.get("distributor"):
        lines.append("- distributor: " + ", ".join(f"{k} {v}" for k, v in
                                                    meta["distributor"].items()))
    return [*lines, ""]


def _target_lines(rows: list[dict[str, Any]]) -> list[str]:
    def status(r: dict[str, Any]) -> str:
        if r["met"] is None:
            return f"n/a ({r['note']})" if r["note"] else "n/a"
        if r["met"]:
            return "met"
        short = (r["required"] - r["ratio"]) / r["required"]
        return f"**missed** by {short:.{0 if short >= 0.01 else 1}%}"
    return of_values(["target", "pipeline", "skew", "comparison", "ratio", "n", "required",
                      "status"],
                     [[r["target"], r["pipeline"], str(r["skew"]), r["comparison"], r["ratio"],
                       r["n"], f">= {r['required']}", status(r)] for r in rows])


def _gain_lines(runs: Sequence[Row], batches: Sequence[Row]) -> list[str]:
    rows = [r for r in gain_breakdown(runs, batches) if r["skew"] > BALANCED]
    if not rows:
        return []
    return ["### Where the gain over Static STAL goes", "",
            "From `batches.csv`, Dynamic LB STAL vs Static STAL, means over the repeats. "
            "*join only*: Static's join-stage time per record over Dynamic's after its "
            "rebalance, the most balancing the join can give; *steady state*: the same for "
            "whole batches, whose time outside the join (reading, decoding, routing, shuffle, "
            "writing; ms per 1,000 records) balancing does not shrink; *before the move*: the "
            "batches still run on the initial assignment and what they cost beyond the steady "
            "rate; *without them*: the ratio had they run at that rate; *gaps*: time between "
            "batches (trigger, control polls, moves).", "",
            *of_values(["pipeline", "skew", "n", "ratio", "join only", "steady state",
                        "outside join ms/1k (Static / LB)", "batches before the move",
                        "their extra s", "without them", "gaps s (Static / LB)"],
                       [[r["pipeline"], str(r["skew"]), r["n"], r["ratio"], r["join_ratio"],
                         r["steady_ratio"], f"{r['outside_static']:.1f} / "
                         f"{r['outside_dynamic']:.1f}", f"{r['batches_before']:.1f}",
                         f"{r['extra_before_s']:.1f}", r["without_start"],
                         f"{r['gap_static_s']:.1f} / {r['gap_dynamic_s']:.1f}"]
                        for r in rows])]


def _simulation(results_dir: Path) -> list[str]:
    sims = read_rows(results_dir / "simulation.csv")
    lines = ["## Trace-driven simulation at the paper's scale", ""]
    if not sims:
        return [*lines, "Not run: there was no Static STAL run at skew 0.5 to take the "
                "per-partition costs from.", ""]
    doc = simulate.__doc__ or ""
    lines += ["The per-partition costs measured above, replayed for W = 16 workers with 3 hot "
              "workers (3/16 = 0.1875 is balanced) through the real distributor engine. "
              "The model's assumptions:", "",
              doc.split("(printed verbatim in the report):", 1)[-1].strip(), ""]
    costs = read_rows(results_dir / "simulation_costs.csv")
    lines += ["### The cost model", ""]
    lines += of_values(["pipeline", "repeat", "ns/item mean (min–max)", "index build ms",
                        "overhead STAL/STRL ms", "move ms (source)", "B", "partitions match"],
                       [[c["pipeline"], c["repeat"],
                         f"{float(c['ns_per_item_mean']):,.0f} ({float(c['ns_per_item_min']):,.0f}"
                         f"–{float(c['ns_per_item_max']):,.0f})", csv_number(c["build_ms_mean"]),
                         f"{cell(csv_number(c['overhead_stal_ms']), 0)} / "
                         f"{cell(csv_number(c['overhead_strl_ms']), 0)}",
                         f"{float(c['move_ms']):,.0f} ({c['move_source']})", c["batch_records"],
                         c["partition_items_match"] or "not checked"] for c in costs])
    check = read_rows(results_dir / "simulation_check.csv")
    if check:
        groups: dict[tuple[str, str], list[float]] = defaultdict(list)
        for c in check:
            groups[(c["pipeline"], c["mode"])].append(float(c["predicted_over_measured"]))
        lines += ["**The model against the physical runs.** For every physical run, the sum "
                  "of its batch durations predicted by the cost model from the run's own items "
                  "per batch, partition and worker, over the measured sum "
                  "(`simulation_check.csv`):", ""]
        lines += of_values(["pipeline", "mode", "runs", "predicted / measured: median (min–max)"],
                           [[p, m, len(v), f"{statistics.median(v):.2f} ({min(v):.2f}–"
                             f"{max(v):.2f})"]
                            for (p, m), v in sorted(groups.items(), key=lambda kv: (
                                pipeline_order(p for p, _ in groups).index(kv[0][0]),
                                mode_order(m for _, m in groups).index(kv[0][1])))])
    lines += ["### Simulated throughput (publications/s)", ""]
    lines += _grid(sims, "throughput")
    lines += ["### Simulated rebalances and MLDC", "",
              "Mean over repeats: rebalances commanded, MLDC of the first and of the last "
              "period (in the metric the mode balances: items for DB, processing time "
              "otherwise), share of the simulated time spent in the fixed per-batch overhead, "
              "and the hot workers' share of items and of cost under the initial assignment.",
              ""]
    groups2: dict[tuple[str, str, float], list[Row]] = defaultdict(list)
    for r in sims:
        groups2[(r["pipeline"], r["mode"], float(r["skew"]))].append(r)

    def avg(rs: list[Row], col: str) -> float:
        return sum(float(r[col]) for r in rs) / len(rs)

    pipes = pipeline_order(p for p, _, _ in groups2)
    modes = mode_order(m for _, m, _ in groups2)
    lines += of_values(["pipeline", "mode", "skew", "rebalances", "MLDC first", "MLDC last",
                        "overhead share", "hot share items / cost"],
                       [[p, m, s, avg(rs, "rebalances"), avg(rs, "mldc_first"),
                         avg(rs, "mldc_last"), avg(rs, "overhead_share"),
                         f"{avg(rs, 'hot_share_items'):.2f} / {avg(rs, 'hot_share_cost'):.2f}"]
                        for (p, m, s), rs in sorted(groups2.items(), key=lambda kv: (
                            pipes.index(kv[0][0]), modes.index(kv[0][1]), kv[0][2]))])
    lines += ["### The paper's throughput claims at the simulated scale", ""]
    return lines + of_values(["claim", "simulation", "verdict"],
                             [[c["claim"], c["finding"], c["verdict"]]
                              for c in simulation_claims(sims)])


def first_period_ab(runs: Iterable[Row], batches: Iterable[Row]) -> list[str]:
    """The first-period A/B table: per point, mean throughput of Static STAL and of Dynamic LB
    STAL with each first period, their ratios, and how long the run stayed on epoch 0."""
    points = first_period_points(runs, batches)
    if not points:
        return []

    def mean_n(values: list[float]) -> str:
        return f"{statistics.mean(values):,.0f} (n={len(values)})" if values else "–"

    rows = []
    for pt in points:
        row: list[Any] = [pt["pipeline"], pt["skew"], mean_n(pt["static"])]
        for fp in FIRST_PERIODS:
            dyn, start = pt["dynamic"][fp], pt["epoch0_s"][fp]
            row += [mean_n(dyn), cell(pt["ratio"][fp]),
                    f"{statistics.mean(start):.1f} ({len(start)} of {len(dyn)})" if start
                    else f"– (0 of {len(dyn)})"]
        rows.append(row)
    header = ["pipeline", "skew", "Static STAL pub/s"]
    for fp in FIRST_PERIODS:
        header += [f"LB STAL {fp} pub/s", f"{fp} / Static", f"{fp}: s on epoch 0"]
    return ["## The distributor's first period (A/B)", "",
            "`geops bench paper --first-period-ab`: per point Static STAL and Dynamic LB STAL "
            "with `--first-period min-items` (ours: the first period closes once M items are "
            "in) and `full` (the paper: after D), run back to back on the same stream. "
            "*s on epoch 0*: seconds from the first batch to the first batch under the new "
            "assignment, mean over the runs that rebalanced (how many of the point's runs did).",
            "", *of_values(header, rows)]


def render(results_dir: Path) -> str:
    """The README's text for the CSVs in ``results_dir``."""
    all_runs = read_rows(results_dir / "runs.csv")
    runs = plan_runs(all_runs)
    status = read_rows(results_dir / "status.csv")
    moves = read_rows(results_dir / "moves.csv")
    batches = read_rows(results_dir / "batches.csv")
    lines = ["# Reproducing the paper's evaluation with geops", "",
             "Marić et al., *Dynamic Load Balancing in Stream Processing Pipelines Containing "
             "Stream-Static Joins*, Electronics 2023. The physical runs use W = 2 workers "
             "(`local[2]`) with one hot worker (skew 0.5 is balanced); every number in this "
             "file is computed from the CSV files next to it. "
             f"{len(runs)} runs of the plan and {len(all_runs) - len(runs)} other runs "
             "(Fig. 8, first-period A/B) are recorded. " + coverage(runs) + " "
             + streaming(runs), "",
             "## Machine", ""]
    lines += _machine(results_dir)
    out = results_dir.as_posix()  # as the command was given: relative to the repository
    lines += ["## How to reproduce", "",
              "```sh",
              f"geops bench paper --full --out {out}   "
              "# physical runs (resumable), Fig. 8 runs, simulation, figures, this file",
              f"geops bench paper --report-only --out {out}   "
              "# only the simulation, figures and this file, from the CSVs",
              f"geops bench paper --first-period-ab --out {out}   "
              "# the distributor's first period: min-items vs full",
              "geops bench paper --quick   # CI check of the harness (sPIS, two modes, two skews)",
              "```", "", "Files:", ""]
    lines += [f"- [`{part.name}`]({part.name}): {what}" for name, what in TABLES
              for part in stored(results_dir / name)]   # loads.csv.gz where it is compressed
    lines += ["", "## Targets", "",
              f"What the Dynamic Distributor must reach here to count as reproducing the "
              f"paper: at the highest skew Dynamic LB STAL ≥ {GAIN_REQUIRED} × Static "
              f"STAL and ≥ {KEEP_REQUIRED} × its own throughput at skew {BALANCED}; Dynamic LB "
              f"STAL ≥ Dynamic DB STAL and STAL ≥ STRL at every skew ≥ {HIGH_SKEW}. Ratios of "
              "mean throughputs over the n repeats both compared points have (a repeat run "
              "at only one of them is left out of that ratio).", ""]
    rows = targets(runs)
    lines += _target_lines(rows) if rows else [
        "Not computed: no pair of modes the targets compare was run at the skews they apply "
        "to.", ""]
    lines += _gain_lines(runs, batches)
    lines += ["## The paper's claims and our findings", ""]
    lines += of_values(["claim (paper)", "our finding", "verdict"],
                       [[c["claim"], c["finding"], c["verdict"]]
                        for c in claims(runs, status, moves)])
    reb = rebalance_runs(runs, status)
    if reb:
        lines += ["Dynamic LB STAL runs, rebalances and MLDC before / after the first "
                  "rebalance (from `status.csv`; distributor periods count from 0; the "
                  "threshold is the distributor's):", ""]
        pipes = pipeline_order(r["pipeline"] for r in reb)
        reb.sort(key=lambda r: (pipes.index(r["pipeline"]), r["skew"], r["repeat"]))
        lines += of_values(["run", "rebalances", "first rebalance in period",
                            "max MLDC before", "max MLDC after",
                            "periods after (over threshold)", "threshold", "kind"],
                           [[r["run_id"], r["rebalances"], r["first_rebalance_period"],
                             r["max_mldc_before"],
                             r["max_mldc_after"], f"{r['periods_after']} "
                             f"({r['periods_after_over']})", r["threshold"], r["kind"]]
                            for r in reb])
    lines += first_period_ab(all_runs, batches)
    lines += ["## Figures", ""]
    for name, caption in FIGURES:
        if (results_dir / f"{name}.png").exists():
            lines += [f"### {caption}", "", f"![{caption}]({name}.png)", "",
                      f"Data: [`{name}.csv`]({name}.csv)", ""]
        else:
            lines += [f"### {caption}", "", "Not drawn: the data it needs is missing.", ""]
    lines += ["## Throughput (publications/s)", "",
              "Mean ± half the min–max range over the n repeats.", ""]
    lines += _grid(runs, "throughput")
    lines += ["## Mean latency (s)", ""]
    lines += _grid([r for r in runs if r["latency_mean_ms"]], "latency_mean_ms", 1e-3, 2)
    lines += ["## p99 latency (s)", ""]
    lines += _grid([r for r in runs if r["latency_p99_ms"]], "latency_p99_ms", 1e-3, 2)
    lines += _simulation(results_dir)
    analysis = results_dir / "analysis.md"
    if analysis.exists():
        lines += ["## Analysis", "", analysis.read_text().rstrip(), ""]
    return "\n".join(lines)


def write_report(results_dir: Path, log: Callable[[str], None] = print) -> Path:
    """Write ``README.md`` in ``results_dir``; returns its path."""
    results_dir = Path(results_dir)
    path = results_dir / "README.md"
    path.write_text(render(results_dir))
    log(f"report: wrote {path}")
    return path
