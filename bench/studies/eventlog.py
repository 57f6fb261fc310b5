"""Spark event logs (decompressed JSON lines) of one run: each micro-batch is one job of two
stages, read/decode/route then join.

- ``stages``: per-batch stage times (job, read, gap, join, shuffle write, result size), means
  over all two-stage jobs but the first (warm-up);
- ``tasks``: per-task metrics of the read and join stages, means (and maxima) over the
  two-stage jobs after the first two.

Usage: ``zstd -dc <event log dir>/events_1_* > ev.json`` (Spark writes the log with
``spark.eventLog.enabled``), then ``python -m bench.studies.eventlog stages|tasks ev.json``.
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict

from bench.harness.eventlog import load, stage_pair


def stage_times(jobs: dict, stages: dict, tasks: dict) -> list[str]:
    """How many two-stage jobs, and the means of their stage times over all but the first."""
    rows = []
    for _, j in sorted(jobs.items()):
        pair = stage_pair(j, stages)
        if pair is None:
            continue
        a, b = pair
        ta, tb = tasks[a["Stage ID"]], tasks[b["Stage ID"]]
        rows.append({
            "job": j["end"] - j["start"], "read": a["Completion Time"] - a["Submission Time"],
            "gap": b["Submission Time"] - a["Completion Time"],
            "join": b["Completion Time"] - b["Submission Time"],
            "shuffle_write_ms": max(t["Task Metrics"]["Shuffle Write Metrics"]
                                    ["Shuffle Write Time"] for t in ta) / 1e6,
            "shuffle_mb": sum(t["Task Metrics"]["Shuffle Write Metrics"]["Shuffle Bytes Written"]
                              for t in ta) / len(ta) / 1e6,
            "result_mb": sum(t["Task Metrics"]["Result Size"] for t in tb) / len(tb) / 1e6})
    return [f"{len(rows)} two-stage jobs; means over all but the first:",
            str({k: round(statistics.mean(r[k] for r in rows[1:]), 1) for k in rows[0]})]


def task_metrics(jobs: dict, stages: dict, tasks: dict) -> list[str]:
    """Per (stage, metric): the mean and the maximum over the tasks of the two-stage jobs
    after the first two."""
    agg: dict[tuple[str, str], list[float]] = defaultdict(list)
    for _, job in sorted(jobs.items())[2:]:
        pair = stage_pair(job, stages)
        if pair is None:
            continue
        for name, s in zip(("read", "join"), pair, strict=True):
            for t in tasks[s["Stage ID"]]:
                m, i = t["Task Metrics"], t["Task Info"]
                agg[name, "launch_delay"].append(i["Launch Time"] - s["Submission Time"])
                agg[name, "duration"].append(i["Finish Time"] - i["Launch Time"])
                agg[name, "deser"].append(m["Executor Deserialize Time"])
                agg[name, "run"].append(m["Executor Run Time"])
                agg[name, "cpu_ms"].append(m["Executor CPU Time"] / 1e6)
                agg[name, "gc"].append(m["JVM GC Time"])
                agg[name, "result_ser"].append(m["Result Serialization Time"])
                agg[name, "end_to_stage_end"].append(s["Completion Time"] - i["Finish Time"])
                agg[name, "records_read_input"].append(m["Input Metrics"]["Records Read"])
                agg[name, "shuffle_read_ms"].append(m["Shuffle Read Metrics"]["Fetch Wait Time"])
    return [f"{k} {round(statistics.mean(v), 1)} max {max(v)}" for k, v in sorted(agg.items())]


def main(argv: list[str] | None = None) -> None:
    what, path = sys.argv[1:] if argv is None else argv
    show = {"stages": stage_times, "tasks": task_metrics}[what]
    print("\n".join(show(*load(path))))


if __name__ == "__main__":
    main()
