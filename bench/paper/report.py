"""The results README: machine, commands, figures, tables, targets and the paper's claims.

Every number printed is computed here from the CSVs of the results directory; explanations
are not invented: the hand-written ``analysis.md`` of the results directory, when it exists,
is included verbatim.
"""

from __future__ import annotations

import itertools
import json
import math
import shlex
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.paper import simulate
from bench.paper.breakdown import DYNAMIC as LB
from bench.paper.breakdown import STATIC, gain_breakdown
from bench.paper.plan import AB_LABEL, BALANCED, FIRST_PERIODS, MIN_STREAM_S, full_plan
from bench.paper.rows import (
    Row,
    fig8_rows,
    mode_order,
    number,
    pipeline_order,
    plan_runs,
    point_table,
    read_rows,
)

HIGH_SKEW = 0.7         # "every skew >= 0.7" in the targets
GAIN_REQUIRED = 1.4     # Dynamic LB STAL / Static STAL at the highest skew
KEEP_REQUIRED = 0.9     # Dynamic LB STAL at the highest skew / at the balanced skew
LB_DB_PAIRS = (("Dynamic LB STAL", "Dynamic DB STAL"), ("Dynamic LB STRL", "Dynamic DB STRL"))
STAL_STRL_PAIRS = (("Static STAL", "Static STRL"), ("Dynamic LB STAL", "Dynamic LB STRL"),
                   ("Dynamic DB STAL", "Dynamic DB STRL"))

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


# -- numbers from the runs ----------------------------------------------------------------------

Point = tuple[str, str, float]               # (pipeline, mode, skew)
Repeats = dict[Point, dict[int, float]]      # a value per repeat of each point


def _per_repeat(rows: Iterable[Row], column: str) -> Repeats:
    """``column`` of each repeat per (pipeline, mode, skew)."""
    out: Repeats = defaultdict(dict)
    for r in rows:
        value = number(r.get(column))
        if value is not None:
            out[(r["pipeline"], r["mode"], float(r["skew"]))][int(r["repeat"])] = value
    return out


def _common(values: Repeats, points: Iterable[Point]) -> tuple[dict[Point, float], int]:
    """Mean of each point over the repeats all of them have, and how many: while the matrix
    is partial, a point with an extra repeat would tilt a comparison by however much that
    repeat ran faster or slower than the others."""
    points = list(points)
    common = set.intersection(*(set(values.get(p, {})) for p in points)) if points else set()
    if not common:
        return {}, 0
    return {p: statistics.fmean(values[p][i] for i in common) for p in points}, len(common)


def _paired(values: Repeats, a: Point, b: Point) -> tuple[float | None, int]:
    """Mean of ``a`` over mean of ``b`` on the repeats both points have, and how many."""
    means, n = _common(values, (a, b))
    return (means[a] / means[b], n) if n else (None, 0)


def _ratio_row(target: str, pipeline: str, skew: float | str, comparison: str,
               paired: tuple[float | None, int], required: float, note: str = ""
               ) -> dict[str, Any]:
    ratio, n = paired
    met = None if ratio is None or note else ratio >= required
    return {"target": target, "pipeline": pipeline, "skew": skew, "comparison": comparison,
            "ratio": ratio, "n": n, "required": required, "met": met, "note": note}


def targets(runs: Sequence[Row]) -> list[dict[str, Any]]:
    """The issue's targets, one row per pipeline (and skew / pair where they apply); each a
    ratio of mean throughputs over the repeats both compared points have."""
    values = _per_repeat(runs, "throughput")
    out: list[dict[str, Any]] = []
    pipes = pipeline_order(p for p, _, _ in values)
    for pipe in pipes:
        both = [s for (p, m, s) in values if p == pipe and m == LB and (p, STATIC, s) in values]
        if both:
            top = max(both)
            note = "only the balanced skew was run" if top <= BALANCED else ""
            out.append(_ratio_row("gain at the highest skew", pipe, top, f"{LB} / {STATIC}",
                                  _paired(values, (pipe, LB, top), (pipe, STATIC, top)),
                                  GAIN_REQUIRED, note))
        own = [s for (p, m, s) in values if p == pipe and m == LB]
        if own:
            top = max(own)
            paired = _paired(values, (pipe, LB, top), (pipe, LB, BALANCED))
            note = ("only the balanced skew was run" if top <= BALANCED else
                    "no run at the balanced skew" if (pipe, LB, BALANCED) not in values else
                    "no repeat run at both skews" if paired[0] is None else "")
            out.append(_ratio_row("kept at the highest skew", pipe, top,
                                  f"{LB} at {top} / at {BALANCED}", paired, KEEP_REQUIRED, note))
    for target, pairs in (("LB >= DB at skew >= 0.7", LB_DB_PAIRS[:1]),
                          ("STAL >= STRL at skew >= 0.7", STAL_STRL_PAIRS)):
        for pipe in pipes:
            for a, b in pairs:
                for s in sorted(s for (p, m, s) in values if p == pipe and m == a
                                and s >= HIGH_SKEW - 1e-9 and (p, b, s) in values):
                    out.append(_ratio_row(target, pipe, s, f"{a} / {b}",
                                          _paired(values, (pipe, a, s), (pipe, b, s)), 1.0))
    return out


def coverage(runs: Iterable[Row]) -> str:
    """How much of the full plan (every pipeline x mode x skew x 3 repeats) the runs cover,
    and which (repeat, skew) groups are still to run, so a partial matrix says what it lacks."""
    recorded = {r["run_id"] for r in runs}
    plan = full_plan()
    missing: dict[int, dict[float, int]] = defaultdict(lambda: defaultdict(int))
    per_repeat: dict[int, int] = defaultdict(int)
    for spec in plan:
        per_repeat[spec.repeat] += 1
        if spec.run_id not in recorded:
            missing[spec.repeat][spec.skew] += 1
    done = len(plan) - sum(sum(m.values()) for m in missing.values())
    text = f"Of the full plan's {len(plan)} runs, {done} are recorded"
    if not missing:
        return text + "."

    def group(repeat: int, skews: dict[float, int]) -> str:
        if sum(skews.values()) == per_repeat[repeat]:
            return f"repeat {repeat}: all {per_repeat[repeat]} runs"
        return f"repeat {repeat}: " + ", ".join(f"skew {s} ({n} run{'s' * (n != 1)})"
                                                for s, n in sorted(skews.items()))
    return text + "; still to run: " + "; ".join(
        group(rep, skews) for rep, skews in sorted(missing.items())) + "."


def streaming(runs: Iterable[Row]) -> str:
    """How long the runs streamed (first batch start to last batch end), and which ran under
    the full plan's minimum: a short run is dominated by its start and the skewed first
    batches, so its throughput says less."""
    streamed = sorted(((float(r["last_end_ms"]) - float(r["first_start_ms"])) / 1000,
                       r["run_id"]) for r in runs
                      if r.get("first_start_ms") and r.get("last_end_ms"))
    if not streamed:
        return ""
    seconds = [t for t, _ in streamed]
    text = (f"The runs streamed {seconds[0]:.0f}–{seconds[-1]:.0f} s each (median "
            f"{statistics.median(seconds):.0f} s, first batch start to last batch end); ")
    short = [f"{rid} ({t:.0f} s)" for t, rid in streamed if t < MIN_STREAM_S]
    if not short:
        return text + f"every one at least the {MIN_STREAM_S:.0f} s the full plan asks for."
    more = f" and {len(short) - 6} more" if len(short) > 6 else ""
    return (text + f"{len(short)} under the {MIN_STREAM_S:.0f} s the full plan asks for: "
            + ", ".join(short[:6]) + more + ".")


def _verdict(good: int, total: int) -> str:
    if total == 0:
        return "no data"
    return "holds" if good == total else "does not hold" if good == 0 else "partly"


def _best(values: Repeats, higher: bool) -> tuple[str, int, int, list[str]]:
    """Is Dynamic LB STAL the best mode at every (pipeline, skew) where it ran with others?
    The modes of a point are compared on the repeats all of them have."""
    points: dict[tuple[str, float], list[Point]] = defaultdict(list)
    for p, m, s in values:
        points[(p, s)].append((p, m, s))
    good, total, others = 0, 0, []
    for (p, s), keys in sorted(points.items()):
        means, _ = _common(values, keys)
        if (p, LB, s) not in means or len(means) < 2:
            continue
        best = (max if higher else min)(means, key=means.__getitem__)[1]
        total += 1
        if best == LB:
            good += 1
        else:
            others.append(f"{p} {s}: {best}")
    return _verdict(good, total), good, total, others


def _pairs(values: Repeats, pairs: Sequence[tuple[str, str]]
           ) -> tuple[str, int, int, list[str]]:
    """Does the first mode of each pair beat the second at every (pipeline, skew)?"""
    good, total, misses = 0, 0, []
    for (p, m, s) in sorted(values):
        for a, b in pairs:
            if m != a:
                continue
            means, n = _common(values, ((p, a, s), (p, b, s)))
            if not n:
                continue
            total += 1
            va, vb = means[(p, a, s)], means[(p, b, s)]
            if va > vb:
                good += 1
            else:
                misses.append(f"{p} {s}: {a} {va:,.0f} vs {b} {vb:,.0f} (n={n})")
    return _verdict(good, total), good, total, misses


def _gain_growth(values: Repeats) -> tuple[str, list[str]]:
    """Does Dynamic LB STAL / Static STAL grow from the lowest to the highest skew?"""
    grows, total, lines = 0, 0, []
    for pipe in pipeline_order(p for p, _, _ in values):
        ratios = {}
        for p, m, s in values:
            if p == pipe and m == LB:
                ratio, _ = _paired(values, (p, LB, s), (p, STATIC, s))
                if ratio is not None:
                    ratios[s] = ratio
        if len(ratios) < 2:
            continue
        skews = sorted(ratios)
        total += 1
        grows += ratios[skews[-1]] > ratios[skews[0]]
        lines.append(f"{pipe} " + ", ".join(f"{s}: {ratios[s]:.2f}" for s in skews))
    return _verdict(grows, total), lines


def rebalance_runs(runs: Iterable[Row], status: Iterable[Row]) -> list[dict[str, Any]]:
    """Per Dynamic LB STAL run: rebalances, its MLDC before and after the first rebalance."""
    periods: dict[str, list[Row]] = defaultdict(list)
    for s in status:
        periods[s["run_id"]].append(s)
    out = []
    for run in runs:
        if run["mode"] != LB:
            continue
        own = sorted(periods.get(run["run_id"], []), key=lambda s: int(s["period"]))
        values = [(int(s["period"]), number(s["mldc"]), s["decision"]) for s in own]
        first = next((k for k, _, d in values if d == "rebalance"), None)
        before = [m for k, m, _ in values if m is not None and (first is None or k <= first)]
        after = [m for k, m, _ in values if m is not None and first is not None and k > first]
        threshold = number(own[0]["threshold"]) if own else None
        rebalances = int(run["rebalances"])
        over_after = sum(m > threshold for m in after) if threshold is not None else 0
        if not own:
            kind = "no status"
        elif rebalances == 0:
            needed = threshold is not None and any(m > threshold for m in before)
            kind = "no rebalance, MLDC went over" if needed else "no rebalance needed"
        elif rebalances == 1:
            kind = "one rebalance, then under" if not over_after else (
                "one rebalance, then over at times")
        else:
            kind = "several rebalances"
        out.append({"run_id": run["run_id"], "pipeline": run["pipeline"],
                    "skew": float(run["skew"]), "repeat": int(run["repeat"]),
                    "rebalances": rebalances, "first_rebalance_period": first,
                    "max_mldc_before": max(before, default=None),
                    "max_mldc_after": max(after, default=None),
                    "periods_after": len(after), "periods_after_over": over_after,
                    "threshold": threshold, "kind": kind})
    return out


def claims(runs: Sequence[Row], status: Sequence[Row], moves: Sequence[Row]
           ) -> list[dict[str, str]]:
    """Each claim of the paper, what our runs show, and a verdict computed from them."""
    thr = _per_repeat(runs, "throughput")
    lat = _per_repeat(runs, "latency_mean_ms")
    out = []
    verdict, good, total, others = _best(thr, higher=True)
    out.append({"claim": "Dynamic LB STAL has the highest throughput (every pipeline, skew)",
                "finding": f"best at {good} of {total} (pipeline, skew) points"
                + (f"; elsewhere the best is {'; '.join(others)}" if others else ""),
                "verdict": verdict})
    verdict, good, total, others = _best(lat, higher=False)
    out.append({"claim": "Dynamic LB STAL has the lowest mean latency (paper: except RIsPS at "
                         "its lowest skew)",
                "finding": f"lowest at {good} of {total} points"
                + (f"; elsewhere the lowest is {'; '.join(others)}" if others else ""),
                "verdict": verdict})
    verdict, lines = _gain_growth(thr)
    out.append({"claim": "Its gain over Static STAL grows with the skew",
                "finding": "Dynamic LB STAL / Static STAL by skew: " + "; ".join(lines)
                if lines else "fewer than two skews with both modes",
                "verdict": verdict})
    for claim, pairs in (("LB beats DB (throughput)", LB_DB_PAIRS),
                         ("STAL beats STRL (throughput)", STAL_STRL_PAIRS)):
        verdict, good, total, misses = _pairs(thr, pairs)
        out.append({"claim": claim,
                    "finding": f"higher at {good} of {total} comparable points"
                    + (f"; not at {'; '.join(misses)}" if misses else ""),
                    "verdict": verdict})
    reb = rebalance_runs(runs, status)
    needing = [r for r in reb if r["kind"] not in ("no rebalance needed", "no status")]
    ok = sum(r["kind"] == "one rebalance, then under" for r in needing)
    kinds: dict[str, int] = defaultdict(int)
    for r in reb:
        kinds[r["kind"]] += 1
    out.append({"claim": "One rebalance, then MLDC stays under the threshold (Dynamic LB STAL)",
                "finding": f"{ok} of {len(needing)} runs that rebalanced or went over the "
                           f"threshold; all runs: "
                           + ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())),
                "verdict": _verdict(ok, len(needing))})
    sizes = fig8_rows(moves)
    durations = [r["duration_s_mean"] for r in sizes]
    grows = all(b > a for a, b in itertools.pairwise(durations))
    out.append({"claim": "Redistribution time grows with the static data size",
                "finding": ", ".join(f"{r['subscriptions']:,} subscriptions: "
                                     f"{r['duration_s_mean']:.2f} s ({r['mb_moved_mean']:.1f} MB,"
                                     f" n={r['moves']})" for r in sizes) or "no moves",
                "verdict": "no data" if len(sizes) < 2 else "holds" if grows
                else "does not hold"})
    return out


# -- Markdown -----------------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(c).replace("|", "\\|") for c in row) + " |"
              for row in rows]
    return [*lines, ""]


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
        lines += _table(["mode", *[f"skew {s}" for s in skews]],
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
    return _table(["target", "pipeline", "skew", "comparison", "ratio", "n", "required",
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
            *_table(["pipeline", "skew", "n", "ratio", "join only", "steady state",
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
    lines += _table(["pipeline", "repeat", "ns/item mean (min–max)", "index build ms",
                     "overhead STAL/STRL ms", "move ms (source)", "B", "partitions match"],
                    [[c["pipeline"], c["repeat"],
                      f"{float(c['ns_per_item_mean']):,.0f} ({float(c['ns_per_item_min']):,.0f}"
                      f"–{float(c['ns_per_item_max']):,.0f})", number(c["build_ms_mean"]),
                      f"{_fmt(number(c['overhead_stal_ms']), 0)} / "
                      f"{_fmt(number(c['overhead_strl_ms']), 0)}",
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
        lines += _table(["pipeline", "mode", "runs", "predicted / measured: median (min–max)"],
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
    lines += _table(["pipeline", "mode", "skew", "rebalances", "MLDC first", "MLDC last",
                     "overhead share", "hot share items / cost"],
                    [[p, m, s, avg(rs, "rebalances"), avg(rs, "mldc_first"),
                      avg(rs, "mldc_last"), avg(rs, "overhead_share"),
                      f"{avg(rs, 'hot_share_items'):.2f} / {avg(rs, 'hot_share_cost'):.2f}"]
                     for (p, m, s), rs in sorted(groups2.items(), key=lambda kv: (
                         pipes.index(kv[0][0]), modes.index(kv[0][1]), kv[0][2]))])
    lines += ["### The paper's throughput claims at the simulated scale", ""]
    thr = _per_repeat(sims, "throughput")
    rows = []
    verdict, good, total, others = _best(thr, higher=True)
    rows.append(["Dynamic LB STAL has the highest throughput", f"best at {good} of {total}"
                 + (f"; elsewhere {'; '.join(others)}" if others else ""), verdict])
    verdict, growth = _gain_growth(thr)
    rows.append(["Its gain over Static STAL grows with the skew", "; ".join(growth) or "–",
                 verdict])
    for claim, pairs in (("LB beats DB", LB_DB_PAIRS), ("STAL beats STRL", STAL_STRL_PAIRS)):
        verdict, good, total, misses = _pairs(thr, pairs)
        rows.append([claim, f"higher at {good} of {total}"
                     + (f"; not at {'; '.join(misses)}" if misses else ""), verdict])
    return lines + _table(["claim", "simulation", "verdict"], rows)


def _ab_variant(run_id: str) -> str | None:
    """Static STAL, or the first period of a Dynamic LB STAL run, of the first-period A/B."""
    if run_id.endswith(f"-{AB_LABEL}"):
        return STATIC
    return next((fp for fp in FIRST_PERIODS if run_id.endswith(f"-{AB_LABEL}-{fp}")), None)


def first_period_ab(runs: Iterable[Row], batches: Iterable[Row]) -> list[str]:
    """The first-period A/B table: per point, mean throughput of Static STAL and of Dynamic LB
    STAL with each first period, their ratios, and how long the run stayed on epoch 0."""
    groups: dict[tuple[str, float, str], list[float]] = defaultdict(list)
    for r in runs:
        variant = _ab_variant(r["run_id"])
        if variant is not None:
            groups[(r["pipeline"], float(r["skew"]), variant)].append(float(r["throughput"]))
    if not groups:
        return []
    first: dict[str, float] = {}
    switch: dict[str, float] = {}
    for b in batches:
        rid, start = b["run_id"], float(b["start_ms"])
        first[rid] = min(first.get(rid, start), start)
        if int(b["epoch"]) > 0:
            switch[rid] = min(switch.get(rid, start), start)
    skewed: dict[tuple[str, float, str], list[float]] = defaultdict(list)
    for r in runs:
        variant = _ab_variant(r["run_id"])
        if variant in FIRST_PERIODS and r["run_id"] in switch:
            skewed[(r["pipeline"], float(r["skew"]), variant)].append(
                (switch[r["run_id"]] - first[r["run_id"]]) / 1000)
    rows = []
    points = sorted({(p, s) for p, s, _ in groups},
                    key=lambda k: (pipeline_order(p for p, _, _ in groups).index(k[0]), k[1]))
    for pipeline, skew in points:
        static = groups.get((pipeline, skew, STATIC), [])
        row: list[Any] = [pipeline, skew, f"{statistics.mean(static):,.0f} (n={len(static)})"
                          if static else "–"]
        for fp in FIRST_PERIODS:
            dyn = groups.get((pipeline, skew, fp), [])
            ratio = statistics.mean(dyn) / statistics.mean(static) if dyn and static else None
            start = skewed.get((pipeline, skew, fp), [])
            row += [f"{statistics.mean(dyn):,.0f} (n={len(dyn)})" if dyn else "–", _fmt(ratio),
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
            "", *_table(header, rows)]


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
    lines += [f"- [`{name}`]({name}): {what}" for name, what in TABLES
              if (results_dir / name).exists()]
    lines += ["", "## Targets", "",
              f"From the issue: at the highest skew Dynamic LB STAL ≥ {GAIN_REQUIRED} × Static "
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
    lines += _table(["claim (paper)", "our finding", "verdict"],
                    [[c["claim"], c["finding"], c["verdict"]]
                     for c in claims(runs, status, moves)])
    reb = rebalance_runs(runs, status)
    if reb:
        lines += ["Dynamic LB STAL runs, rebalances and MLDC before / after the first "
                  "rebalance (from `status.csv`; distributor periods count from 0; the "
                  "threshold is the distributor's):", ""]
        pipes = pipeline_order(r["pipeline"] for r in reb)
        reb.sort(key=lambda r: (pipes.index(r["pipeline"]), r["skew"], r["repeat"]))
        lines += _table(["run", "rebalances", "first rebalance in period",
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
