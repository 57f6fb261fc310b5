"""Where Dynamic LB STAL's gain over Static STAL goes, from ``batches.csv``.

Balancing shrinks only the join stage. A run's time also holds the batches that ran before the
new assignment arrived (still skewed), the per-batch work outside the join (reading, decoding,
routing, the shuffle, writing matches) that is the same in every mode, and the gaps between
batches (trigger waits, control polls, partition moves). Splitting the runs' time this way says,
in numbers, why a ratio falls short of what balancing the join alone would give.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from bench.harness.csv_tables import Row
from bench.paper.plan import DYNAMIC_LB_STAL as DYNAMIC
from bench.paper.plan import STATIC_STAL as STATIC
from bench.paper.results import is_plan_run, pipeline_order


def run_breakdown(batches: Iterable[Row]) -> dict[str, float]:
    """One run's time split: its span and gaps, the batches before the first new assignment
    and the steady state's milliseconds per 1,000 records (batch, join, outside the join).

    The steady state is every batch under a new assignment, or, for a run that never got one,
    every batch but the first (which also carries the query's warm-up).
    """
    rows = sorted(batches, key=lambda b: int(b["batch_id"]))
    if not rows:
        raise ValueError("a run without batches")
    moved = [b for b in rows if int(b["epoch"]) > 0]
    steady = moved or rows[1:] or rows
    before = [b for b in rows if int(b["epoch"]) == 0] if moved else []

    def per_k(column: str, part: list[Row]) -> float:
        return 1000 * math.fsum(float(b[column]) for b in part) / sum(int(b["records"])
                                                                       for b in part)

    batch_k, join_k = per_k("duration_ms", steady), per_k("join_stage_ms", steady)
    span_s = (max(float(b["end_ms"]) for b in rows) - min(float(b["start_ms"]) for b in rows)
              ) / 1000
    busy_s = math.fsum(float(b["duration_ms"]) for b in rows) / 1000
    # what the batches before the move cost beyond the same records at the steady rate
    extra_s = math.fsum(float(b["duration_ms"]) - int(b["records"]) * batch_k / 1000
                        for b in before) / 1000
    return {"records": sum(int(b["records"]) for b in rows), "span_s": span_s,
            "gap_s": span_s - busy_s, "batches_before": len(before), "extra_before_s": extra_s,
            "batch_ms_per_k": batch_k, "join_ms_per_k": join_k,
            "outside_ms_per_k": batch_k - join_k}


def _mean(runs: list[dict[str, float]], key: str) -> float:
    return statistics.fmean(x[key] for x in runs)


def gain_breakdown(runs: Iterable[Row], batches: Iterable[Row]) -> list[dict[str, Any]]:
    """Per (pipeline, skew) where both ran: Dynamic LB STAL vs Static STAL, means over repeats.

    ``ratio`` is the throughput ratio; ``steady_ratio`` the same for the steady state alone
    (Static's time per record over Dynamic's after its rebalance); ``join_ratio`` that of the
    join stage alone, the most balancing can give; ``without_start`` the ratio had the batches
    before the move run at the steady rate.
    """
    by_run: dict[str, list[Row]] = defaultdict(list)
    for b in batches:
        by_run[b["run_id"]].append(b)
    split: dict[tuple[str, str, float], list[dict[str, float]]] = defaultdict(list)
    for r in runs:
        if is_plan_run(r) and r["mode"] in (STATIC, DYNAMIC) and by_run.get(r["run_id"]):
            split[(r["pipeline"], r["mode"], float(r["skew"]))].append(
                run_breakdown(by_run[r["run_id"]]))
    out = []
    points = sorted({(p, s) for p, _, s in split})
    for pipe in pipeline_order(p for p, _ in points):
        for skew in sorted(s for p, s in points if p == pipe):
            st, dy = split.get((pipe, STATIC, skew)), split.get((pipe, DYNAMIC, skew))
            if not st or not dy:
                continue

            thr_st = statistics.fmean(x["records"] / x["span_s"] for x in st)
            thr_dy = statistics.fmean(x["records"] / x["span_s"] for x in dy)
            start_free = statistics.fmean(x["records"] / (x["span_s"] - x["extra_before_s"])
                                          for x in dy)
            out.append({
                "pipeline": pipe, "skew": skew, "n": min(len(st), len(dy)),
                "ratio": thr_dy / thr_st,
                "steady_ratio": _mean(st, "batch_ms_per_k") / _mean(dy, "batch_ms_per_k"),
                "join_ratio": _mean(st, "join_ms_per_k") / _mean(dy, "join_ms_per_k"),
                "outside_static": _mean(st, "outside_ms_per_k"),
                "outside_dynamic": _mean(dy, "outside_ms_per_k"),
                "batches_before": _mean(dy, "batches_before"),
                "extra_before_s": _mean(dy, "extra_before_s"),
                "gap_static_s": _mean(st, "gap_s"), "gap_dynamic_s": _mean(dy, "gap_s"),
                "without_start": start_free / thr_st,
            })
    return out
