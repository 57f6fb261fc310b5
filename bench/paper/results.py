"""The results directory's rows as the figures and the report both read them: the plan's runs,
the pipelines and modes in the paper's order, the per-point summaries, and Fig. 8's moves."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from bench.harness.csv_tables import Row, csv_number
from bench.paper.plan import DYNAMIC_LB_STAL, PIPELINES, RUN_MODES


def is_plan_run(row: Row) -> bool:
    """True for a run of the main plan (its id ends with the repeat; labelled runs do not)."""
    return row["run_id"].endswith(f"-r{row['repeat']}")


def plan_runs(rows: Iterable[Row]) -> list[Row]:
    return [r for r in rows if is_plan_run(r)]


def mode_order(modes: Iterable[str]) -> list[str]:
    """The modes present, in the paper's order (unknown ones last, by name)."""
    known = list(RUN_MODES)
    return sorted(set(modes), key=lambda m: (known.index(m) if m in known else len(known), m))


def pipeline_order(pipelines: Iterable[str]) -> list[str]:
    known = list(PIPELINES)
    return sorted(set(pipelines),
                  key=lambda p: (known.index(p) if p in known else len(known), p))


def summary(values: Sequence[float]) -> dict[str, float]:
    """n, mean, min and max of some values (NaN when there are none)."""
    if not values:
        return {"n": 0, "mean": math.nan, "min": math.nan, "max": math.nan}
    return {"n": len(values), "mean": math.fsum(values) / len(values), "min": min(values),
            "max": max(values)}


def point_table(runs: Iterable[Row], columns: Sequence[str]) -> list[dict[str, Any]]:
    """Per (pipeline, mode, skew): n and mean/min/max of each column over the repeats."""
    groups: dict[tuple[str, str, float], list[Row]] = defaultdict(list)
    for r in runs:
        groups[(r["pipeline"], r["mode"], float(r["skew"]))].append(r)
    pipes = pipeline_order(p for p, _, _ in groups)
    modes = mode_order(m for _, m, _ in groups)
    out = []
    for key in sorted(groups, key=lambda k: (pipes.index(k[0]), modes.index(k[1]), k[2])):
        row: dict[str, Any] = {"pipeline": key[0], "mode": key[1], "skew": key[2],
                               "n": len(groups[key])}
        for column in columns:
            values = [v for v in (csv_number(r.get(column)) for r in groups[key]) if v is not None]
            s = summary(values)
            row.update({f"{column}_mean": s["mean"], f"{column}_min": s["min"],
                        f"{column}_max": s["max"]})
        out.append(row)
    return out


def fig8_rows(moves: Iterable[Row]) -> list[dict[str, Any]]:
    """Per static size: redistribution time and bytes moved (mean/min/max over moves).

    Uses the moves of sPS, Dynamic LB STAL, skew 0.7; the forced-move runs (labelled run ids)
    when there are any, else every such move.
    """
    rows = [m for m in moves if m["pipeline"] == "sPS" and m["mode"] == DYNAMIC_LB_STAL
            and math.isclose(float(m["skew"]), 0.7) and int(m["partitions_moved"]) > 0]
    forced = [m for m in rows if not is_plan_run(m)]
    rows = forced or rows
    groups: dict[int, list[Row]] = defaultdict(list)
    for m in rows:
        groups[int(m["subscriptions"])].append(m)
    out = []
    for subs in sorted(groups):
        time_s = summary([float(m["duration_ms"]) / 1000 for m in groups[subs]])
        mb = summary([float(m["bytes"]) / 1e6 for m in groups[subs]])
        moved = summary([float(m["partitions_moved"]) for m in groups[subs]])
        out.append({"subscriptions": subs, "moves": time_s["n"], "duration_s_mean": time_s["mean"],
                    "duration_s_min": time_s["min"], "duration_s_max": time_s["max"],
                    "mb_moved_mean": mb["mean"], "partitions_moved_mean": moved["mean"],
                    "source": "forced moves" if forced else "distributor moves"})
    return out
