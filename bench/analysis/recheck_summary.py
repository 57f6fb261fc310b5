"""Throughput ratios per repeat at the target points, and the mean batch split, for one results
directory of the 2026-11-24 re-check (sPS and sPIS, Static STAL and Dynamic LB STAL at skews 0.5
and 0.9, three repeats).

Usage: ``python -m bench.analysis.recheck_summary DIR`` (e.g.
``docs/results/recheck-2026-11-24/scale-1.8``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from bench.analysis import print_lines
from bench.paper.plan import DYNAMIC_LB_STAL, STATIC_STAL, mode_key
from bench.paper.rows import Row, read_rows

PIPELINES = ("sPS", "sPIS")
REPEATS = range(3)


def ratios(runs: dict[str, Row]) -> list[str]:
    """Per pipeline: Static and Dynamic LB STAL at 0.9 per repeat, the pair ratios, the ratio
    of means and Dynamic LB STAL at 0.9 over at 0.5 ("kept")."""

    def thr(p: str, mode: str, s: int, k: int) -> float:
        return float(runs[f"{p}-{mode_key(mode)}-s{s}-r{k}"]["throughput"])

    out = []
    for p in PIPELINES:
        st9 = [thr(p, STATIC_STAL, 90, k) for k in REPEATS]
        dy9 = [thr(p, DYNAMIC_LB_STAL, 90, k) for k in REPEATS]
        dy5 = [thr(p, DYNAMIC_LB_STAL, 50, k) for k in REPEATS]
        out.append(f"{p} Static 0.9 {[round(x) for x in st9]} Dynamic 0.9 "
                   f"{[round(x) for x in dy9]} pair ratios "
                   f"{[round(a / b, 2) for a, b in zip(dy9, st9, strict=True)]} ratio of means "
                   f"{statistics.mean(dy9) / statistics.mean(st9):.2f} kept "
                   f"{statistics.mean(dy9) / statistics.mean(dy5):.2f}")
    return out


def batch_split(batches: list[Row]) -> list[str]:
    """Mean batch split per (pipeline, mode, skew, epoch) at skews 0.5 and 0.9; batch 0 (the
    query's warm-up) left out."""
    groups: dict[tuple[str, ...], list[Row]] = defaultdict(list)
    for r in batches:
        if r["batch_id"] != "0" and r["skew"] in ("0.5", "0.9"):
            groups[(r["pipeline"], r["mode"], r["skew"], r["epoch"])].append(r)
    out = []
    for k, rows in sorted(groups.items()):
        def f(column: str, rows: list[Row] = rows) -> float:
            return statistics.mean(float(x[column]) for x in rows)
        job, join = f("job_ms"), f("join_stage_ms")
        out.append(f"{k} records {int(f('records'))} dur {int(f('duration_ms'))} job {int(job)} "
                   f"join {int(join)} job-join {int(job - join)} write {int(f('write_ms'))}")
    return out


def summary(results_dir: Path) -> list[str]:
    runs = {r["run_id"]: r for r in read_rows(results_dir / "runs.csv")}
    return ratios(runs) + batch_split(read_rows(results_dir / "batches.csv"))


def main(argv: list[str] | None = None) -> None:
    print_lines(summary, argv)


if __name__ == "__main__":
    main()
