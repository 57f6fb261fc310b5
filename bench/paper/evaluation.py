"""The whole evaluation: run the plan, append every run's rows to CSVs, resume where it stopped.

All modes and pipelines of one (skew, repeat) see the same generated stream, so modes are
compared on identical work. Rows are appended as runs finish, so an interrupted full run
(hours) resumes with ``--resume`` instead of starting again.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness.csv_tables import append_csv, read_rows
from bench.harness.errors import PlanConflict
from bench.harness.machine import machine
from bench.paper.collect import read_run, run_rows
from bench.paper.plan import BALANCED, RunSpec
from bench.paper.runner import DistributorSettings, run
from bench.paper.workloads import Workloads

TABLES = ("runs", "batches", "loads", "status", "moves")


class Tables:
    """CSV files in ``out`` that rows are appended to (header written once)."""

    def __init__(self, out: Path):
        self.out = out
        out.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        return self.out / f"{name}.csv"

    def done(self) -> dict[str, int]:
        """Publications of each run already in runs.csv, by run id."""
        return {row["run_id"]: int(row["publications"]) for row in read_rows(self.path("runs"))}

    def append(self, name: str, rows: list[dict[str, Any]]) -> None:
        append_csv(self.path(name), rows)


def _record_invocation(path: Path, settings: DistributorSettings, resume: bool) -> None:
    """Write the machine and append this command to meta.json.

    A resumed results directory is built by several invocations; each is kept, with its date,
    so the report can say exactly which commands produced the numbers.
    """
    previous = json.loads(path.read_text()) if resume and path.exists() else {}
    commands = previous.get("commands") or (
        [{"command": previous["command"], "date": previous["machine"]["date"]}]
        if "command" in previous else [])
    info = machine()
    commands.append({"command": sys.argv, "date": info["date"]})
    path.write_text(json.dumps({"machine": info, "commands": commands,
                                "distributor": settings.__dict__}, indent=1))


def _eta(began: float, done: int, total: int) -> str:
    """'; about 2.5 h to go' from the mean time per run so far ('' when none is left)."""
    left = (time.monotonic() - began) / done * (total - done)
    if not left:
        return ""
    return (f"; about {left / 3600:.1f} h to go" if left >= 5400
            else f"; about {left / 60:.0f} min to go")


def run_order(specs: list[RunSpec]) -> list[RunSpec]:
    """``specs`` grouped by workload, so each stream is generated once, with the modes of a
    point in the plan's order on even repeats and reversed on odd ones; within a repeat the
    highest skew first, then the balanced one, then the rest in ascending order.

    A point's six runs take ~12 minutes, and this machine's speed drifts by several per cent
    over that (by a quarter over one day); always running the modes in one order would tilt
    the comparison between them, and the target that compares the highest skew with the
    balanced one needs both measured close together.
    """
    position = {spec: i for i, spec in enumerate(specs)}
    top = max((s.skew for s in specs), default=BALANCED)

    def skew_rank(skew: float) -> tuple[int, float]:
        return (0 if skew == top else 1 if skew == BALANCED else 2), skew

    return sorted(specs, key=lambda s: (s.repeat, skew_rank(s.skew), s.hot_partitions or 0,
                                        s.sizes.subscriptions, s.pipeline,
                                        -position[s] if s.repeat % 2 else position[s]))


def run_plan(plan: list[RunSpec], out: Path, workdir: Path, settings: DistributorSettings,
             resume: bool = True, log: Callable[[str], None] = print,
             min_stream_s: float | None = None) -> Tables:
    """Run every spec not already recorded; return the tables written.

    A run that streamed for less than ``min_stream_s`` is kept but logged as too short.
    """
    tables = Tables(out)
    done = tables.done() if resume else {}
    other = [s for s in plan if done.get(s.run_id, s.sizes.publications) != s.sizes.publications]
    if other:
        first = other[0]
        raise PlanConflict(
            f"{tables.path('runs')} already holds {first.run_id} with "
            f"{done[first.run_id]:,} publications (and {len(other) - 1} more runs of other "
            f"sizes); this plan has {first.sizes.publications:,}; "
            "use another --out, or --no-resume to start it over")
    if not resume:
        for name in TABLES:
            tables.path(name).unlink(missing_ok=True)
    _record_invocation(out / "meta.json", settings, resume)
    todo = [s for s in plan if s.run_id not in done]
    log(f"{len(plan)} runs planned, {len(plan) - len(todo)} already recorded, {len(todo)} to go")
    workloads = Workloads(keep=3)  # runs are grouped by workload
    todo = run_order(todo)
    began = time.monotonic()
    for n, spec in enumerate(todo, 1):
        t0 = time.monotonic()
        workload = workloads.get(spec)
        try:
            data = run(spec, workload, workdir, settings, read_run)
        except KeyboardInterrupt:
            log(f"interrupted during {spec.run_id}: not recorded; resuming runs it again")
            raise
        rows = run_rows(spec, data, time.monotonic() - t0)
        for name in TABLES:
            tables.append(name, rows.get(name, []))
        r = rows["runs"][0]
        log(f"[{n}/{len(todo)}] {spec.pipeline} {spec.mode} skew {spec.skew} r{spec.repeat}: "
            f"{r['throughput']:,.0f} pub/s, latency p99 {r['latency_p99_ms'] or 0:,.0f} ms, "
            f"hot share {r['skew_items']:.2f} items / {r['skew_load']:.2f} time, "
            f"{r['rebalances']} rebalance(s) ({r['wall_s']:.0f} s{_eta(began, n, len(todo))})")
        streamed = (r["last_end_ms"] - r["first_start_ms"]) / 1000
        if min_stream_s is not None and streamed < min_stream_s:
            log(f"  warning: streamed for {streamed:.1f} s, under the {min_stream_s:.0f} s a run "
                f"should last, so its start before any rebalance weighs more; --scale multiplies "
                f"the stream and batch sizes (this run needs about {min_stream_s / streamed:.1f} "
                "x its own)")
    return tables

