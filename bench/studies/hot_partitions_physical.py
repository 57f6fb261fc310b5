"""The physical W = 2 runs of the hot-partition study (docs/results/hot-partitions)
summarised: replicate and the adaptive distributor against Static STAL and greedy (Table 1)
per point.

``python -m bench.studies.hot_partitions_physical docs/results/hot-partitions/physical [LOAD_LOG]``

Reads the CSVs ``geops bench paper --modes "Static STAL,Dynamic LB STAL,Dynamic LB STAL
replicate" --hot-partitions 1 ...`` (or with ``Adaptive STAL`` among the modes) wrote (plain
or gzipped) and writes ``summary.csv``: per
point (pipeline, skew, hot partitions) and mode, the repeats, throughput (mean, min, max), its ratio
to Static STAL and to Dynamic LB STAL (greedy) (ratio of the means, and the lowest and highest
per-repeat ratio, pairs of the same repeat: the same stream), the final MLDC (the last period
the distributor judged), rebalances, partitions and MB moved (the app's MoveReports) and the
partitions with several owners in the last batch (from the app's PartitionLoads).
``range_over_repeats`` is the largest relative range of one mode's throughput over the repeats
at the point ((max - min) / mean; repeats differ in their stream's seed and time, so this is
wider than the noise between two runs of one stream). With ``LOAD_LOG`` (lines ``HH:MM:SS
load1 load5 load15 ...`` in UTC, or stamped ``YYYY-MM-DDTHH:MM:SSZ``; e.g. ``cat
/proc/loadavg`` every 10 s during the runs), ``load1_mean`` is the machine's 1-minute load
average over each mode's streaming time. Prints the table.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness.csv_tables import iter_rows, read_rows, stored, write_csv
from bench.harness.tables import cell
from bench.paper import ADAPTIVE, DYNAMIC_LB_STAL, REPLICATE, STATIC_STAL

MODES = (STATIC_STAL, DYNAMIC_LB_STAL, ADAPTIVE, REPLICATE)


def _hot(run_id: str) -> int | None:
    m = re.search(r"-hp(\d+)-r\d+$", run_id)
    return int(m.group(1)) if m else None


def read_load(path: Path, day_ms: int) -> list[tuple[int, float]]:
    """(ms since the epoch, 1-minute load average) of each line of a load log: a line stamped
    ``HH:MM:SS`` is of the UTC day that starts at ``day_ms``, one stamped with its date (ISO
    8601, ``YYYY-MM-DDTHH:MM:SSZ`` or with an offset as ``date -Is`` writes it) of that date,
    so a log may run past midnight."""
    points = []
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        if "T" in parts[0]:
            stamp = datetime.fromisoformat(parts[0])
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            ms = round(stamp.timestamp() * 1000)
        else:
            h, m, sec = (int(x) for x in parts[0].split(":"))
            ms = day_ms + ((h * 60 + m) * 60 + sec) * 1000
        points.append((ms, float(parts[1])))
    return points


def _load_during(load: list[tuple[int, float]], start_ms: float, end_ms: float) -> float | None:
    values = [v for t, v in load if start_ms <= t <= end_ms]
    return statistics.fmean(values) if values else None


def summarise(out: Path, load_log: Path | None = None) -> list[dict[str, Any]]:
    out = Path(out)
    runs = [r for r in read_rows(out / "runs.csv") if r["mode"] in MODES]
    ids = {r["run_id"] for r in runs}
    last_mldc: dict[str, float] = {}
    for s in sorted(iter_rows(out / "status.csv", ids), key=lambda s: int(s["period"])):
        if s["mldc"] != "":
            last_mldc[s["run_id"]] = float(s["mldc"])
    moved_bytes: dict[str, int] = defaultdict(int)
    moved_parts: dict[str, int] = defaultdict(int)
    for m in iter_rows(out / "moves.csv", ids):
        moved_bytes[m["run_id"]] += int(m["bytes"])
        moved_parts[m["run_id"]] += int(m["partitions_moved"])
    last_batch: dict[str, int] = {}
    owners: dict[tuple[str, int], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in iter_rows(out / "loads.csv", ids):
        owners[(r["run_id"], int(r["batch_id"]))][r["partition"]].add(r["worker"])
        last_batch[r["run_id"]] = max(last_batch.get(r["run_id"], -1), int(r["batch_id"]))
    replicated = {rid: sum(len(w) > 1 for w in owners[(rid, b)].values())
                  for rid, b in last_batch.items()}

    load: list[tuple[int, float]] = []
    if load_log is not None and runs:
        first = float(runs[0]["first_start_ms"]) / 1000
        day = time.gmtime(first)
        load = read_load(load_log, int(first - (day.tm_hour * 3600 + day.tm_min * 60
                                                + day.tm_sec)) * 1000)
    points: dict[tuple[str, float, int | None], dict[str, dict[int, dict]]] = defaultdict(
        lambda: defaultdict(dict))
    for r in runs:
        points[(r["pipeline"], float(r["skew"]), _hot(r["run_id"]))][r["mode"]][
            int(r["repeat"])] = r
    rows = []
    for (pipeline, skew, hot), modes in sorted(
            points.items(), key=lambda kv: (kv[0][0], kv[0][2] or 0, kv[0][1])):
        thr = {m: {rep: float(r["throughput"]) for rep, r in modes[m].items()} for m in modes}
        spread = max(((max(v.values()) - min(v.values())) / statistics.fmean(v.values()))
                     for v in thr.values() if v)
        for mode in MODES:
            if mode not in modes:
                continue
            mine = thr[mode]
            row: dict[str, Any] = {
                "pipeline": pipeline, "skew": skew, "hot_partitions": hot or "", "mode": mode,
                "repeats": len(mine), "throughput_mean": statistics.fmean(mine.values()),
                "throughput_min": min(mine.values()), "throughput_max": max(mine.values())}
            for name, base in (("static", STATIC_STAL), ("greedy", DYNAMIC_LB_STAL)):
                pairs = [mine[rep] / thr[base][rep] for rep in mine if rep in thr.get(base, {})]
                both = [rep for rep in mine if rep in thr.get(base, {})]
                row[f"over_{name}"] = (statistics.fmean(mine[r] for r in both)
                                       / statistics.fmean(thr[base][r] for r in both)
                                       if both else "")
                row[f"over_{name}_min"] = min(pairs) if pairs else ""
                row[f"over_{name}_max"] = max(pairs) if pairs else ""
            rids = [r["run_id"] for r in modes[mode].values()]
            mldc = [last_mldc[i] for i in rids if i in last_mldc]
            row.update({
                "range_over_repeats": spread,
                "mldc_last_mean": statistics.fmean(mldc) if mldc else "",
                "mldc_last_max": max(mldc) if mldc else "",
                "rebalances": "/".join(modes[mode][rep]["rebalances"] for rep in sorted(mine)),
                "moved_partitions_mean": statistics.fmean(moved_parts[i] for i in rids),
                "moved_mb_mean": statistics.fmean(moved_bytes[i] for i in rids) / 1e6,
                "replicated_last": "/".join(str(replicated.get(i, "")) for i in
                                            (modes[mode][rep]["run_id"] for rep in sorted(mine))),
                "skew_items": statistics.fmean(float(r["skew_items"])
                                               for r in modes[mode].values()),
            })
            if load:
                during = [_load_during(load, float(r["first_start_ms"]), float(r["last_end_ms"]))
                          for r in modes[mode].values()]
                during = [v for v in during if v is not None]
                row["load1_mean"] = statistics.fmean(during) if during else ""
            rows.append(row)
    write_csv(out / "summary.csv", rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.studies.hot_partitions_physical",
        description="Summarise the paper harness's physical hot-partition runs into "
                    "summary.csv (per point and mode: throughput, ratios, decisions).")
    parser.add_argument("results", type=Path,
                        help="the directory `geops bench paper --out` wrote; summary.csv goes"
                             " there")
    parser.add_argument("load_log", type=Path, nargs="?",
                        help="optional 1-minute load average log taken during the runs")
    args = parser.parse_args(argv)
    if not stored(args.results / "runs.csv"):
        parser.error(f"results: {args.results} has no runs.csv(.gz) of `geops bench paper`")
    for r in summarise(args.results, args.load_log):
        print(f"{r['pipeline']} skew {r['skew']} hp {r['hot_partitions'] or '-'} {r['mode']:<26} "
              f"n {r['repeats']} thr {r['throughput_mean']:,.0f} "
              f"({r['throughput_min']:,.0f}-{r['throughput_max']:,.0f}) "
              f"x static {cell(r['over_static'])} ({cell(r['over_static_min'])}-"
              f"{cell(r['over_static_max'])}) x greedy {cell(r['over_greedy'])} "
              f"({cell(r['over_greedy_min'])}-{cell(r['over_greedy_max'])}) "
              f"range {r['range_over_repeats']:.2f} MLDC {cell(r['mldc_last_mean'])}/"
              f"{cell(r['mldc_last_max'])} rebal {r['rebalances']} "
              f"moved {r['moved_partitions_mean']:.1f} {r['moved_mb_mean']:.2f} MB "
              f"replicated {r['replicated_last']} hot items {r['skew_items']:.2f}"
              + (f" load {cell(r['load1_mean'], 1)}" if "load1_mean" in r else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
