"""Per-batch stage times from a Spark event log (decompressed JSON lines).

Usage: zstd -dc <eventlog dir>/events_1_*.zstd > ev.json && python3 eventlog_stages.py ev.json
Each micro-batch is one job of two stages (read/decode/route, then join); means leave out the
first job (warm-up).
"""
import statistics as st
import sys

from eventlog import load, stage_pair

jobs, stages, tasks = load(sys.argv[1])
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
        "shuffle_write_ms": max(t["Task Metrics"]["Shuffle Write Metrics"]["Shuffle Write Time"]
                                for t in ta) / 1e6,
        "shuffle_mb": sum(t["Task Metrics"]["Shuffle Write Metrics"]["Shuffle Bytes Written"]
                          for t in ta) / len(ta) / 1e6,
        "result_mb": sum(t["Task Metrics"]["Result Size"] for t in tb) / len(tb) / 1e6})
print(len(rows), "two-stage jobs; means over all but the first:")
print({k: round(st.mean(r[k] for r in rows[1:]), 1) for k in rows[0]})
